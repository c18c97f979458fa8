// F.pad (constant) and torch.roll: shapes from the builder, and what the forward allocates and
// saves and what the backward allocates (constant_pad_nd_backward narrows and clones the gradient;
// roll's backward rolls it back into a new tensor).
#include <gtest/gtest.h>

#include "ir/builder.h"
#include "training/op_rules.h"
#include "util/error.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

struct Planned {
  ForwardPlan forward;
  BackwardPlan backward;
};

Planned plan(const Graph& g, TensorId out) {
  const Op& op = g.op(g.tensor(out).producer);
  DeviceProfile cpu = DeviceProfile::cpu();
  RuleContext c{g, op, cpu, true, true, {true}};
  return {forward_plan(c), backward_plan(c, true)};
}

TEST(PadRollRules, PadShapesFollowPyTorchsOrder) {
  GraphBuilder b("t");
  TensorId x = b.input("x", {1, 14, 14, 96}, DType::F32);
  // swin's F.pad(x, (0, 0, 0, pad_r, 0, pad_b)): C untouched, W then H padded at the end.
  EXPECT_EQ(b.shape(b.pad("p", x, {0, 0, 0, 2, 0, 2})), (std::vector<int64_t>{1, 16, 16, 96}));
  EXPECT_EQ(b.shape(b.pad("q", x, {1, 2})), (std::vector<int64_t>{1, 14, 14, 99}));
  EXPECT_THROW(b.pad("odd", x, {1}), InputError);
  EXPECT_THROW(b.pad("crop", x, {0, -1}), InputError);
  EXPECT_THROW(b.pad("deep", x, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0}), InputError);
}

TEST(PadRollRules, PadAllocatesItsOutputSavesNothingAndMakesAnInputSizedGradient) {
  GraphBuilder b("t");
  TensorId x = b.input("x", {1, 14, 14, 96}, DType::F32);
  TensorId p = b.pad("p", x, {0, 0, 0, 2, 0, 2});
  TensorId zero = b.pad("zero", x, {0, 0, 0, 0, 0, 0});
  Graph g = b.finish();
  // Output 1*16*16*96*4 = 98,304 bytes, new (the input is 1*14*14*96*4 = 75,264).
  EXPECT_EQ(g.tensor(p).bytes(), 98'304);
  Planned pl = plan(g, p);
  ASSERT_EQ(pl.forward.output_alias, (std::vector<int>{-1}));
  EXPECT_TRUE(pl.forward.saved.empty());
  EXPECT_TRUE(pl.forward.extras.empty());
  ASSERT_EQ(pl.backward.grads.size(), 1u);
  EXPECT_EQ(pl.backward.grads[0].kind, GradOut::Kind::New);
  EXPECT_EQ(pl.backward.grads[0].bytes, 75'264);
  // Nothing to pad is still a copy (constant_pad_nd clones; checked on torch 1.13).
  EXPECT_EQ(g.tensor(zero).alias_of, kNone);
  EXPECT_EQ(plan(g, zero).forward.output_alias, (std::vector<int>{-1}));
}

TEST(PadRollRules, RollAllocatesItsOutputSavesNothingAndMakesAnInputSizedGradient) {
  GraphBuilder b("t");
  TensorId x = b.input("x", {1, 56, 56, 96}, DType::F32);
  TensorId r = b.roll("r", x);
  Graph g = b.finish();
  // 1*56*56*96*4 = 1,204,224 bytes out, and the same for the gradient of x.
  EXPECT_EQ(g.tensor(r).bytes(), 1'204'224);
  EXPECT_EQ(g.tensor(r).shape, g.tensor(x).shape);
  Planned pl = plan(g, r);
  EXPECT_EQ(pl.forward.output_alias, (std::vector<int>{-1}));
  EXPECT_TRUE(pl.forward.saved.empty());
  ASSERT_EQ(pl.backward.grads.size(), 1u);
  EXPECT_EQ(pl.backward.grads[0].kind, GradOut::Kind::New);
  EXPECT_EQ(pl.backward.grads[0].bytes, 1'204'224);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
