// The loss ops' memory rules (training/op_rules.cc) pinned against single calls measured on the
// CPU with PyTorch 1.13 (docs/research/scripts/tracelib.py's op_case, one thread, mean
// reduction): x[6,10] float32 = 240 bytes needing a gradient, a float target of the same shape,
// so the loss is 4 bytes and the mean's Python-side count is an 8-byte float64 scalar and its
// 4-byte cast. Class scores [2,5,7] (280 bytes) with int64 targets [2,7] for nll_loss_nd.
#include <gtest/gtest.h>

#include "ir/builder.h"
#include "kernel_event_sizes.h"
#include "training/device_profile.h"
#include "training/op_rules.h"
#include "util/error.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using Build = TensorId (GraphBuilder::*)(const std::string&, TensorId, TensorId);

Graph pointwise(Build loss) {
  GraphBuilder b("loss");
  TensorId x = b.parameter("x", {6, 10});
  TensorId t = b.target("t", {6, 10}, DType::F32);
  b.begin_loss();
  b.set_loss((b.*loss)("loss", x, t));
  return b.finish();
}

const Op& only_op(const Graph& g) {
  EXPECT_EQ(g.ops.size(), 1u);
  return g.ops.at(0);
}

TEST(LossRules, BceWithLogitsMatchesTheCompositeKernel) {
  Graph g = pointwise(&GraphBuilder::bce_with_logits_loss);
  DeviceProfile cpu = DeviceProfile::cpu();
  RuleContext c{g, only_op(g), cpu, true, true, {true, false}};
  EXPECT_EQ(only_op(g).kind, OpKind::BceWithLogitsLoss);
  ForwardPlan f = forward_plan(c);
  // Measured: +240 x5 (neg, empty_like, neg, neg, sub: peak 5 x 240 = 1,200 over the inputs),
  // -240 x3, +4 the loss, +8 +4 -4 -8 the mean's scalar, -240 x2.
  EXPECT_EQ(allocs(f), (std::vector<int64_t>{240, 240, 240, 240, 240, 0, 0, 0, -1, 8, 4, 0, 0, 0, 0}));
  ASSERT_EQ(f.saved.size(), 2u);  // BinaryCrossEntropyWithLogitsBackward0: self, target
  // Backward: the 240-byte gradient (sigmoid(x) - t), then the scalar's +8 +4 -4 -8.
  EXPECT_EQ(allocs(backward_plan(c, true)), (std::vector<int64_t>{240, 8, 4, 0, 0}));
  // CUDA: the same buffers; the scalar lives in host memory.
  DeviceProfile cuda = DeviceProfile::cuda();
  RuleContext gpu{g, only_op(g), cuda, true, true, {true, false}};
  EXPECT_EQ(allocs(forward_plan(gpu)), (std::vector<int64_t>{240, 240, 240, 240, 240, 0, 0, 0, -1, 0, 0}));
}

TEST(LossRules, L1KeepsTheDifferenceForAbsBackward) {
  Graph g = pointwise(&GraphBuilder::l1_loss);
  DeviceProfile cpu = DeviceProfile::cpu();
  RuleContext c{g, only_op(g), cpu, true, true, {true, false}};
  ForwardPlan f = forward_plan(c);
  // Measured: +240 x - t (saved by AbsBackward0), +240 abs, +4 the loss, +8 +4 -4 -8, -240 abs.
  EXPECT_EQ(allocs(f), (std::vector<int64_t>{240, 240, -1, 8, 4, 0, 0, 0}));
  ASSERT_EQ(f.saved.size(), 1u);
  EXPECT_EQ(f.saved[0].kind, Ref::Kind::Extra);
  // Measured backward: MeanBackward0 +8 +4 +240 -4 -8; AbsBackward0 +240 sgn, +240 the
  // gradient, -240 sgn, -240 the mean's gradient (then the saved difference goes): peak 3 x 240
  // over the forward's leftovers.
  EXPECT_EQ(allocs(backward_plan(c, true)), (std::vector<int64_t>{8, 4, 240, 0, 0, 240, 240, 0, 0}));
  // Without autograd the difference is the expression's temporary, freed before the mean.
  RuleContext nograd{g, only_op(g), cpu, false, false, {true, false}};
  EXPECT_EQ(allocs(forward_plan(nograd)), (std::vector<int64_t>{240, 240, 0, -1, 8, 4, 0, 0, 0}));
}

TEST(LossRules, SmoothL1TakesMseLossBuffers) {
  Graph g = pointwise(&GraphBuilder::smooth_l1_loss);
  DeviceProfile cpu = DeviceProfile::cpu();
  RuleContext c{g, only_op(g), cpu, true, true, {true, false}};
  ForwardPlan f = forward_plan(c);
  // Measured: +240 (the elementwise loss, which stays the returned loss's storage until the
  // loss is dropped), +240 the reduction's buffer, [+8 +4 -4 -8: not modelled, as for mse_loss],
  // -240. Backward: +240 (zeros_like, the gradient).
  EXPECT_EQ(allocs(f), (std::vector<int64_t>{-1, 240, 0}));
  EXPECT_EQ(f.output_bytes, 240);
  EXPECT_EQ(f.saved.size(), 2u);
  EXPECT_EQ(allocs(backward_plan(c, true)), (std::vector<int64_t>{240}));
}

TEST(LossRules, PointwiseLossesNeedATargetOfTheInputShape) {
  GraphBuilder b("bad");
  TensorId x = b.parameter("x", {6, 10});
  TensorId t = b.target("t", {6}, DType::F32);
  EXPECT_THROW(b.l1_loss("l1", x, t), InputError);
  EXPECT_THROW(b.bce_with_logits_loss("bce", x, t), InputError);
}

TEST(LossRules, CrossEntropyOnThreeDimensionsGoesThroughNllLoss2d) {
  // nll_loss_nd: log-probabilities [2,5,7] viewed as [2,5,1,7], targets [2,7] as [2,1,7]; the
  // measured trace is log_softmax +280 (kept), total_weight +4, the loss +4 (nll_loss2d's
  // order), backward +280 zeros_like, -4, +280 the logits' gradient, -280, -280.
  GraphBuilder b("ce3");
  TensorId x = b.parameter("x", {2, 5, 7});
  TensorId t = b.target("t", {2, 7}, DType::I64);
  b.begin_loss();
  b.set_loss(b.cross_entropy("ce", x, t));
  Graph g = b.finish();
  std::vector<OpKind> kinds;
  for (const Op& op : g.ops) kinds.push_back(op.kind);
  EXPECT_EQ(kinds, (std::vector<OpKind>{OpKind::LogSoftmax, OpKind::View, OpKind::View, OpKind::NllLoss}));
  const Op& nll = g.ops.back();
  EXPECT_EQ(g.tensor(nll.inputs[0]).shape, (std::vector<int64_t>{2, 5, 1, 7}));
  EXPECT_EQ(g.tensor(nll.inputs[1]).shape, (std::vector<int64_t>{2, 1, 7}));
  DeviceProfile cpu = DeviceProfile::cpu();
  RuleContext c{g, nll, cpu, true, true, {true, false}};
  EXPECT_EQ(allocs(forward_plan(c)), (std::vector<int64_t>{4, -1}));
  EXPECT_EQ(allocs(backward_plan(c, true)), (std::vector<int64_t>{280}));
  RuleContext ls{g, g.ops[0], cpu, true, true, {true}};
  EXPECT_EQ(allocs(backward_plan(ls, true)), (std::vector<int64_t>{280}));
  // Targets must drop the class dimension.
  GraphBuilder bad("bad");
  TensorId y = bad.parameter("y", {2, 5, 7});
  EXPECT_THROW(bad.cross_entropy("ce", y, bad.target("t", {2, 5}, DType::I64)), InputError);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
