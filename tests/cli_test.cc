// The headroom command as a user meets it: bad input gives one line on stderr, exit code 2 and
// nothing on stdout; good input is deterministic.
#include <gtest/gtest.h>

#include "cli_runner.h"
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace {

using headroom::testing::CliRun;
using headroom::testing::run_cli;
using headroom::testing::expect_usage_error;

TEST(Cli, UnknownModelSuggestsClosestNames) {
  expect_usage_error("estimate resnet5", "did you mean 'resnet50'");
  expect_usage_error("estimate nosuchmodel", "unknown model 'nosuchmodel'");
}

TEST(Cli, BadNumbersAndOptions) {
  expect_usage_error("estimate resnet18 --batch 0", "--batch must be a positive integer");
  expect_usage_error("estimate resnet18 --batch -4", "--batch must be a positive integer");
  expect_usage_error("estimate resnet18 --batch abc", "batch");
  expect_usage_error("estimate resnet18 --batch 99999999999999999999", "batch");
  expect_usage_error("estimate resnet18 --mode fly", "--mode must be infer, train or generate");
  expect_usage_error("estimate gpt2 --mode generate --prompt 4 --new-tokens 2", "--mode generate needs a Hugging Face config.json");
  expect_usage_error("estimate gpt2 --mode infer --prompt 4", "--prompt applies to --mode generate");
  expect_usage_error("estimate gpt2 --attention eager", "--attention applies to Hugging Face configs");
  expect_usage_error("estimate gpt2 --attention fast", "--attention must be eager, sdpa or flash");
  expect_usage_error("estimate resnet18 --optimizer lamb", "--optimizer must be");
  expect_usage_error("estimate resnet18 --precision fp8", "--precision must be");
  expect_usage_error("estimate resnet18 --device tpu", "--device must be cuda or cpu");
  expect_usage_error("estimate resnet18 --foreach --no-foreach", "contradict");
  expect_usage_error("estimate resnet18 --batch 8 --micro-batch 3", "must divide the batch");
}

TEST(Cli, SizesThatOverflowAreNamed) {
  expect_usage_error("estimate mlp:layers=1,dim=4000000000 --batch 4000000000", "overflows 64 bits");
}

TEST(Cli, BadModelParameters) {
  expect_usage_error("estimate mlp:layers", "is not key=value");
  expect_usage_error("estimate mlp:depth=3", "has no parameter 'depth'");
  expect_usage_error("estimate mlp:layers=0", "must be at least 1");
  expect_usage_error("estimate resnet50:", "nothing after ':'");
}

TEST(Cli, JsonIsDeterministicAndCarriesTheContract) {
  CliRun a = run_cli("estimate resnet18 --batch 4 --json");
  CliRun b = run_cli("estimate resnet18 --batch 4 --json");
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  for (const char* key : {"\"model\"", "\"batch\"", "\"mode\"", "\"optimizer\"", "\"precision\"", "\"device\"",
                          "\"parameter_count\"", "\"weights_bytes\"", "\"input_bytes\"", "\"peak_bytes\"",
                          "\"peak_phase\"", "\"breakdown_at_peak\"", "\"steps\""}) {
    EXPECT_NE(a.out.find(key), std::string::npos) << key;
  }
}

TEST(Cli, ModelsListsEveryBuiltin) {
  CliRun r = run_cli("models");
  ASSERT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("resnet50"), std::string::npos);
  EXPECT_NE(r.out.find("25,557,032"), std::string::npos);
}

}  // namespace

namespace {

std::string peak_of(const std::string& json) {
  size_t k = json.find("\"peak_bytes\": ");
  return k == std::string::npos ? "" : json.substr(k + 14, json.find(',', k) - k - 14);
}

TEST(Cli, OnnxExportPredictsWhatItsBuiltinTwinPredicts) {
  // torchvision resnet18, mobilenet_v2, alexnet, vgg11 and resnet50 exported in training mode
  // with weights stripped (tests/data/onnx/gen_models.py, gen_torchvision.py): the same peak, to
  // the byte, as the built-in models, in training and in inference.
  const std::string dir = std::string(HEADROOM_SOURCE_DIR) + "/tests/data/onnx/";
  for (const char* m : {"resnet18", "mobilenet_v2", "alexnet", "vgg11", "resnet50"}) {
    for (const char* mode : {"--mode train --optimizer sgd --no-foreach", "--mode infer"}) {
      std::string flags = std::string(" --batch 2 --device cpu --json ") + mode;
      CliRun onnx = run_cli("estimate " + dir + m + "_training.onnx" + flags);
      CliRun builtin = run_cli(std::string("estimate ") + m + flags);
      ASSERT_EQ(onnx.code, 0) << onnx.err;
      ASSERT_EQ(builtin.code, 0) << builtin.err;
      EXPECT_EQ(peak_of(onnx.out), peak_of(builtin.out)) << m << mode;
      EXPECT_NE(peak_of(onnx.out), "");
    }
  }
}

TEST(Cli, OnnxDimErrors) {
  const std::string f = std::string(HEADROOM_SOURCE_DIR) + "/tests/data/onnx/resnet18_training.onnx";
  expect_usage_error("estimate " + f + " --dim seq", "is not NAME=VALUE");
  expect_usage_error("estimate resnet18 --dim seq=4", "--dim applies to ONNX files");
  expect_usage_error("estimate /nonexistent/model.onnx", "/nonexistent/model.onnx");
}

}  // namespace

namespace {

TEST(Cli, PlanChainWorkedExample) {
  // ../shared/docs/chain-model.md section 7: 500 MiB, 500 slots -> 27 ms; 400 MiB infeasible.
  const std::string f = std::string(HEADROOM_SOURCE_DIR) + "/examples/chain-example.json";
  CliRun r = run_cli("plan --chain " + f + " --budget 500MiB --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"makespan_ms\": 27.0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"feasible\": true"), std::string::npos);
  CliRun tight = run_cli("plan --chain " + f + " --budget 400MiB --json");
  ASSERT_EQ(tight.code, 0) << tight.err;
  EXPECT_NE(tight.out.find("\"feasible\": false"), std::string::npos) << tight.out;
  expect_usage_error("plan --chain " + f, "--budget");
  expect_usage_error("plan --chain /nonexistent.json --budget 1GiB", "/nonexistent.json");
}

}  // namespace

namespace {

TEST(Cli, OnnxTransformerExportsStayWithinTheValidationBounds) {
  // validation/models.py's BERT-base and GPT-2 exported in training mode, weights stripped (the
  // external data points at a missing file). The exporter decomposes attention and GELU, so the
  // graphs differ from the built-in twins call by call; the predictions must still stay within
  // the validation bound of 3% of the built-in prediction (measured: BERT -0.18% in inference;
  // GPT-2 -2.2% in inference and -0.9% in training, where the export keeps the causal-mask
  // arithmetic as separate ops).
  const std::string dir = std::string(HEADROOM_SOURCE_DIR) + "/tests/data/onnx/";
  struct Case { const char* file; const char* builtin; const char* flags; };
  for (const Case& c : {Case{"vit_b_16_training.onnx", "vit_b_16", " --mode infer"},
                        Case{"vit_b_16_training.onnx", "vit_b_16", " --optimizer sgd --no-foreach"},
                        Case{"bert_base_training.onnx", "bert-base", " --mode infer"},
                        Case{"gpt2_training.onnx", "gpt2", " --mode infer"},
                        Case{"gpt2_training.onnx", "gpt2", " --optimizer sgd --no-foreach"}}) {
    std::string flags = std::string(" --batch 2 --device cpu --json") + c.flags;
    // GPT-2's loss is the next-token one (training only: --loss does not apply to --mode infer).
    const bool next_token = std::string(c.builtin) == "gpt2" && flags.find("--mode infer") == std::string::npos;
    CliRun onnx = run_cli("estimate " + dir + c.file + flags + (next_token ? " --loss next-token" : ""));
    std::string seq = std::string(c.builtin) == "vit_b_16" ? "" : " --seq 128";
    CliRun builtin = run_cli(std::string("estimate ") + c.builtin + seq + flags);
    ASSERT_EQ(onnx.code, 0) << onnx.err;
    ASSERT_EQ(builtin.code, 0) << builtin.err;
    double a = std::stod(peak_of(onnx.out)), b = std::stod(peak_of(builtin.out));
    EXPECT_LE(std::abs(a - b) / b, 0.03) << c.file << c.flags << ": " << a << " vs " << b;
  }
}

}  // namespace

namespace {

TEST(Cli, PlanModelJsonContractAndDeterminism) {
  const std::string args = "plan resnet18 --batch 64 --gpu A100-SXM4-40GB --activation-budget 40% --json";
  CliRun a = run_cli(args);
  CliRun b = run_cli(args);
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  for (const char* key : {"\"feasible\"", "\"strategy\"", "\"budget_bytes\"", "\"peak_bytes\"", "\"step_time_ms\"",
                          "\"baseline_step_time_ms\"", "\"overhead_pct\"", "\"micro_batch\"", "\"decisions\"",
                          "\"alternatives\"", "\"numerics_alternatives\""}) {
    EXPECT_NE(a.out.find(key), std::string::npos) << key;
  }
  EXPECT_NE(a.out.find("\"feasible\": true"), std::string::npos) << a.out;
  // Every strategy has its row.
  for (const char* s : {"accumulate", "sqrt", "checkpoint", "offload", "offload+checkpoint", "vdnn-all", "vdnn-conv", "conv"}) {
    EXPECT_NE(a.out.find(std::string("\"strategy\": \"") + s + "\""), std::string::npos) << s;
  }
  CliRun text = run_cli("plan resnet18 --batch 64 --gpu A100-SXM4-40GB --activation-budget 40%");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("changes numerics, not applied"), std::string::npos) << text.out;
}

TEST(Cli, CheckpointRangesNest) {
  // A range inside another is a nested checkpoint call; a partial overlap is an error.
  headroom::testing::CliRun ok = headroom::testing::run_cli(
      "estimate resnet18 --mode train --checkpoint layer1.0.conv1..layer1.1.relu#2 --checkpoint layer1.0.conv1..layer1.0.relu#2");
  EXPECT_EQ(ok.code, 0) << ok.err;
  expect_usage_error("estimate resnet18 --mode train --checkpoint layer1.0.conv1..layer1.1.conv1 --checkpoint layer1.0.conv2..layer1.1.relu#2",
                     "--checkpoint: checkpoint regions layer1.0.conv1..layer1.1.conv1 and layer1.0.conv2..layer1.1.relu#2 overlap without one containing the other");
  expect_usage_error("estimate resnet18 --mode train --checkpoint relu..layer1.0.relu#2", "relu overwrites bn1 in place");
}

TEST(Cli, PlanModelErrors) {
  expect_usage_error("plan resnet18", "--gpu NAME or --budget SIZE");
  expect_usage_error("plan resnet18 --budget 1GiB --strategy magic", "unknown strategy 'magic'");
  expect_usage_error("plan resnet18 --budget 0", "--budget must be positive");
  expect_usage_error("plan resnet18 --gpu A100-SXM4-40GB --activation-budget 150%", "--activation-budget");
  expect_usage_error("plan resnet18 --budget 1GiB --mode infer", "training");
  expect_usage_error("plan resnet18 --chain x.json --budget 1GiB", "not both");
  expect_usage_error("plan nosuchmodel --budget 1GiB", "nosuchmodel");
  expect_usage_error("plan resnet18 --batch 32 --micro-batch 8 --budget 1GiB", "chooses the micro-batch itself");
  expect_usage_error("plan resnet18 --budget 1GiB --checkpoint layer1.0.conv1..layer1.0.relu#2", "chooses checkpoints itself");
  expect_usage_error("plan resnet18 --budget 1GiB --device cuda --offload layer1.0.conv1", "chooses offloads itself");
}

TEST(Cli, OffloadNamesOpsAndAppliesToCudaTraining) {
  expect_usage_error("estimate resnet18 --device cuda --offload conv", "no op named 'conv' (did you mean 'conv1'?)");
  expect_usage_error("estimate resnet18 --device cpu --offload conv1", "applies to --device cuda");
  expect_usage_error("estimate resnet18 --device cuda --mode infer --offload conv1", "training only");
  // layer1.0.conv1 saves its input, maxpool's output 8 x 64 x 56 x 56 x 4 = 6,422,528 bytes: offloaded,
  // it is on the host at the backward's peak (conv1 saves the model's input, which stays).
  CliRun plain = run_cli("estimate resnet18 --batch 8 --device cuda --json");
  CliRun off = run_cli("estimate resnet18 --batch 8 --device cuda --offload conv1 --offload layer1.0.conv1 --json");
  ASSERT_EQ(plain.code, 0) << plain.err;
  ASSERT_EQ(off.code, 0) << off.err;
  auto saved = [](const std::string& json) {
    auto at = json.find("\"saved_activations\": ");
    return at == std::string::npos ? -1 : std::stoll(json.substr(at + 21));
  };
  EXPECT_EQ(saved(plain.out) - saved(off.out), 6422528);
}

}  // namespace
