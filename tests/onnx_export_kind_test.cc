// What an export is (frontends/onnx/onnx_export_kind.h): fixed batch and eval mode, on models
// built here and on real torch 1.13 exports (tests/data/onnx/gen_export_kinds.py), and what the
// CLI does with them.
#include "frontends/onnx/onnx_export_kind.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "cli_runner.h"
#include "onnx_test_models.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::CliRun;
using testing::OnnxModel;
using testing::expect_usage_error;
using testing::run_cli;

const std::string kDir = std::string(HEADROOM_SOURCE_DIR) + "/tests/data/onnx/";

OnnxExportFacts facts(const OnnxModel& m) {
  std::optional<OnnxExportFacts> f = inspect_onnx_export_bytes(m.bytes());
  EXPECT_TRUE(f.has_value());
  return f.value_or(OnnxExportFacts{});
}

std::string peak_of(const std::string& json) {
  size_t k = json.find("\"peak_bytes\": ");
  return k == std::string::npos ? "" : json.substr(k + 14, json.find(',', k) - k - 14);
}

TEST(OnnxExportKind, FixedBatchIsTheFirstInputsLeadingDimension) {
  OnnxModel fixed;
  fixed.input("x", {int64_t{2}, int64_t{4}});
  fixed.node("Relu", {"x"}, {"y"});
  fixed.output("y");
  EXPECT_EQ(facts(fixed).fixed_batch, 2);
  EXPECT_EQ(facts(fixed).fixed_batch_input, "x");

  OnnxModel symbolic;
  symbolic.input("x", {std::string("batch"), int64_t{4}});
  symbolic.node("Relu", {"x"}, {"y"});
  symbolic.output("y");
  EXPECT_FALSE(facts(symbolic).fixed_batch.has_value());

  // A batch-named axis anywhere (here the second input's) makes the batch symbolic.
  OnnxModel second;
  second.input("x", {int64_t{2}, int64_t{4}}).input("m", {int64_t{4}, std::string("bs")});
  second.node("Add", {"x", "x"}, {"y"});
  second.output("y");
  EXPECT_FALSE(facts(second).fixed_batch.has_value());
}

TEST(OnnxExportKind, FoldedBatchNormIsAnEvalExport) {
  // Eval export of Conv-BN: the Conv's weight and bias are the exporter's folded tensors.
  OnnxModel folded;
  folded.input("x", {std::string("batch"), int64_t{3}, int64_t{8}, int64_t{8}});
  folded.initializer("onnx::Conv_12", {4, 3, 3, 3}).initializer("onnx::Conv_13", {4});
  folded.node("Conv", {"x", "onnx::Conv_12", "onnx::Conv_13"}, {"c"});
  folded.node("Relu", {"c"}, {"y"});
  folded.output("y");
  EXPECT_EQ(facts(folded).eval_mode_evidence,
            "1 Conv weight holds folded batch norm ('onnx::Conv_12') and there is no BatchNormalization");

  // A Conv without batch norm keeps its parameter's name in either mode: nothing to say.
  OnnxModel plain;
  plain.input("x", {std::string("batch"), int64_t{3}, int64_t{8}, int64_t{8}});
  plain.initializer("c.weight", {4, 3, 3, 3}).initializer("c.bias", {4});
  plain.node("Conv", {"x", "c.weight", "c.bias"}, {"c"});
  plain.node("Relu", {"c"}, {"y"});
  plain.output("y");
  EXPECT_EQ(facts(plain).eval_mode_evidence, "");

  // An MLP is the same program in both modes: never refused.
  OnnxModel mlp;
  mlp.input("x", {std::string("batch"), int64_t{8}});
  mlp.initializer("a.weight", {8, 8}).initializer("a.bias", {8});
  mlp.node("Gemm", {"x", "a.weight", "a.bias"}, {"h"}).i("transB", 1);
  mlp.node("Relu", {"h"}, {"y"});
  mlp.output("y");
  EXPECT_EQ(facts(mlp).eval_mode_evidence, "");
}

TEST(OnnxExportKind, EvalModeBatchNormalizationIsAnEvalExport) {
  // Opset 14+: the training_mode attribute; before: one output (training exports write five).
  for (int64_t opset : {13, 14}) {
    OnnxModel m(opset);
    m.input("x", {std::string("batch"), int64_t{4}});
    for (const char* p : {"weight", "bias", "running_mean", "running_var"}) m.initializer(std::string("bn.") + p, {4});
    auto bn = m.node("BatchNormalization", {"x", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"}, {"y"});
    if (opset >= 14) bn.i("training_mode", 0);
    m.output("y");
    EXPECT_EQ(facts(m).eval_mode_evidence, "1 BatchNormalization node is in eval mode") << opset;
  }
  OnnxModel training(14);
  training.input("x", {std::string("batch"), int64_t{4}});
  for (const char* p : {"weight", "bias", "running_mean", "running_var"}) training.initializer(std::string("bn.") + p, {4});
  training.node("BatchNormalization", {"x", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"}, {"y", "rm", "rv"})
      .i("training_mode", 1);
  training.output("y");
  EXPECT_EQ(facts(training).eval_mode_evidence, "");
}

TEST(OnnxExportKind, RealTorchExports) {
  std::optional<OnnxExportFacts> eval = inspect_onnx_export(kDir + "tiny_cnn_eval.onnx");
  ASSERT_TRUE(eval.has_value());
  EXPECT_NE(eval->eval_mode_evidence.find("folded batch norm ('onnx::Conv_"), std::string::npos)
      << eval->eval_mode_evidence;
  EXPECT_FALSE(eval->fixed_batch.has_value());
  std::optional<OnnxExportFacts> training = inspect_onnx_export(kDir + "tiny_cnn_training.onnx");
  ASSERT_TRUE(training.has_value());
  EXPECT_EQ(training->eval_mode_evidence, "");
  EXPECT_FALSE(training->fixed_batch.has_value());
  std::optional<OnnxExportFacts> fixed = inspect_onnx_export(kDir + "tiny_cnn_fixed_batch.onnx");
  ASSERT_TRUE(fixed.has_value());
  EXPECT_EQ(fixed->fixed_batch, 2);
  EXPECT_EQ(fixed->fixed_batch_input, "input");
  // Unreadable files yield no facts: the import reports them with its own message.
  EXPECT_FALSE(inspect_onnx_export("/nonexistent/model.onnx").has_value());
  EXPECT_FALSE(inspect_onnx_export_bytes("not protobuf").has_value());
}

TEST(OnnxExportKind, CliRefusesAnEvalExportForTraining) {
  expect_usage_error("estimate " + kDir + "tiny_cnn_eval.onnx --mode train",
                     "is an eval-mode export (1 Conv weight holds folded batch norm ('onnx::Conv_");
  expect_usage_error("estimate " + kDir + "tiny_cnn_eval.onnx --mode train",
                     "training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False");
  CliRun infer = run_cli("estimate " + kDir + "tiny_cnn_eval.onnx --mode infer --json");
  EXPECT_EQ(infer.code, 0) << infer.err;
  CliRun train = run_cli("estimate " + kDir + "tiny_cnn_training.onnx --mode train --json");
  EXPECT_EQ(train.code, 0) << train.err;
}

TEST(OnnxExportKind, CliRunsAFixedBatchExportAtItsOwnBatch) {
  // Without --batch the fixed export runs at its batch of 2: the same program and peak as the
  // dynamic-batch training export of the same network at --batch 2.
  CliRun fixed = run_cli("estimate " + kDir + "tiny_cnn_fixed_batch.onnx --device cpu --json");
  ASSERT_EQ(fixed.code, 0) << fixed.err;
  CliRun dynamic = run_cli("estimate " + kDir + "tiny_cnn_training.onnx --batch 2 --device cpu --json");
  ASSERT_EQ(dynamic.code, 0) << dynamic.err;
  EXPECT_NE(peak_of(fixed.out), "");
  EXPECT_EQ(peak_of(fixed.out), peak_of(dynamic.out));
  EXPECT_NE(fixed.out.find("\"batch\": 2"), std::string::npos);
  CliRun same = run_cli("estimate " + kDir + "tiny_cnn_fixed_batch.onnx --batch 2 --device cpu --json");
  EXPECT_EQ(same.code, 0) << same.err;
  EXPECT_EQ(peak_of(same.out), peak_of(fixed.out));
  expect_usage_error("estimate " + kDir + "tiny_cnn_fixed_batch.onnx --batch 8",
                     "was exported with a fixed batch of 2 (input 'input'), so it cannot run at --batch 8");
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
