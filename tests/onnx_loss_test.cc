// A loss computed inside the exported graph (tests/data/onnx/gen_losses.py: F.cross_entropy in
// forward, which torch 1.13 writes as one SoftmaxCrossEntropyLoss node): in training it is the
// run's loss, lowered as the log_softmax and nll_loss eager runs, with no second loss attached.
#include <gtest/gtest.h>

#include "estimate/estimate.h"
#include "frontends/onnx/onnx_import.h"
#include "ir/builder.h"
#include "sgd_cuda_peak.h"
#include "onnx_test_models.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::sgd_cuda_peak;

const std::string kDir = std::string(HEADROOM_SOURCE_DIR) + "/tests/data/onnx/";
constexpr int64_t kBatch = 64;

Result<Graph> import_file(bool with_loss, LossKind loss = LossKind::Default) {
  OnnxImportOptions o;
  o.batch = kBatch;
  o.with_loss = with_loss;
  o.loss = loss;
  return import_onnx(kDir + "loss_cross_entropy.onnx", o);
}

// The exported module as the zoo writes a classifier with its cross-entropy: the targets are a
// graph input of the file, so an input here too.
Graph reference(bool training) {
  GraphBuilder b("ref");
  TensorId x = b.input("input", {kBatch, 8}, DType::F32);
  TensorId target = b.input("target", {kBatch}, DType::I64);
  TensorId w1 = b.parameter("fc1.weight", {16, 8}), b1 = b.parameter("fc1.bias", {16});
  TensorId w2 = b.parameter("fc2.weight", {4, 16}), b2 = b.parameter("fc2.bias", {4});
  TensorId z = b.linear_with("fc2", b.relu("relu", b.linear_with("fc1", x, w1, b1), false), w2, b2);
  if (training) b.begin_loss();
  TensorId loss = b.cross_entropy("ce", z, target);
  b.mark_output(loss);
  if (training) b.set_loss(loss);
  return b.finish();
}

int count_kind(const Graph& g, OpKind k) {
  int n = 0;
  for (const Op& op : g.ops) n += op.kind == k;
  return n;
}

TEST(OnnxLoss, SoftmaxCrossEntropyIsTheTrainingLoss) {
  Result<Graph> g = import_file(true);
  ASSERT_TRUE(g.ok()) << g.error();
  // One log_softmax and one nll_loss: the graph's own loss, nothing attached after it.
  EXPECT_EQ(count_kind(g.value(), OpKind::LogSoftmax), 1);
  EXPECT_EQ(count_kind(g.value(), OpKind::NllLoss), 1);
  EXPECT_EQ(g.value().loss, g.value().outputs.at(0));
  EXPECT_EQ(sgd_cuda_peak(g.value(), RunMode::Training), sgd_cuda_peak(reference(true), RunMode::Training));
  // Without a loss (inference), the cross-entropy still runs as a model op, as the module's
  // forward computes it under no_grad.
  Result<Graph> infer = import_file(false);
  ASSERT_TRUE(infer.ok()) << infer.error();
  EXPECT_EQ(sgd_cuda_peak(infer.value(), RunMode::Inference), sgd_cuda_peak(reference(false), RunMode::Inference));
}

TEST(OnnxLoss, LossOptionDoesNotApplyToAnInGraphLoss) {
  Result<Graph> g = import_file(true, LossKind::Mse);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().find("computes its own loss"), std::string::npos) << g.error();
  EXPECT_EQ(g.error().find('\n'), std::string::npos);
}

TEST(OnnxLoss, PerPositionSoftmaxCrossEntropyIsModelled) {
  // Scores [batch,4,3] against labels [batch,3] (class dimension 1): log_softmax, then
  // nll_loss_nd's views to [2,4,1,3] and [2,1,3] and nll_loss2d.
  testing::OnnxModel m;
  m.input("x", {"batch", 4, 3});
  m.input("t", {"batch", 3}, onnx::TensorProto::INT64);
  m.node("SoftmaxCrossEntropyLoss", {"x", "t"}, {"loss"}).s("reduction", "mean");
  m.output("loss");
  Result<Graph> r = import_onnx_bytes(m.bytes(), testing::batch_options(2), "m.onnx");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(count_kind(r.value(), OpKind::LogSoftmax), 1);
  EXPECT_EQ(count_kind(r.value(), OpKind::NllLoss), 1);
  EXPECT_EQ(r.value().tensor(r.value().ops.back().inputs[0]).shape, (std::vector<int64_t>{2, 4, 1, 3}));
  EXPECT_EQ(r.value().loss, r.value().outputs.at(0));
}

TEST(OnnxLoss, UnmodelledCrossEntropyFormsAreOneLine) {
  testing::OnnxModel m;
  m.input("x", {"batch", 4, 3});
  m.input("t", {"batch", 3}, onnx::TensorProto::INT64);
  m.node("SoftmaxCrossEntropyLoss", {"x", "t"}, {"loss"}).s("reduction", "none");
  m.output("loss");
  OnnxImportOptions o;
  o.batch = 2;
  Result<Graph> r = import_onnx_bytes(m.bytes(), o, "m.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("reduction 'none' is not modelled"), std::string::npos) << r.error();
  EXPECT_EQ(r.error().find('\n'), std::string::npos);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
