// What autocast's copies cost in training, as measured on the H100 with PyTorch 2.11 (the
// amp-bf16 gpt2, gpt2-medium, llama and resnet50 traces of validation/cuda_holdout_traces.tar.xz):
// the autocast kernel casts its arguments last first (F.linear(x, W, b): b, W, x); a Linear's node
// keeps the 16-bit weight copy (mat2) past the cast cache until its backward has run; the backward
// reaches the casts' nodes in the reverse order (x, W, b); and cross-entropy's log_softmax,
// which names its dtype, stays in the logits' dtype while nll_loss keeps a float32 copy.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/builder.h"
#include "schedule/build_program.h"
#include "schedule/program.h"
#include "training/autocast.h"
#include "training/device_profile.h"
#include "training/op_rules.h"
#include "op_named.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::op_named;

// x [2, 4] fp32 -> fc1 (4 -> 4, bias) -> fc2 (4 -> 3, no bias) -> mse_loss against t [2, 3].
Graph two_linears() {
  GraphBuilder b("two_linears");
  TensorId x = b.input("x", {2, 4}, DType::F32);
  TensorId h = b.linear("fc1", x, 4, /*bias=*/true);
  TensorId y = b.linear("fc2", h, 3, /*bias=*/false);
  TensorId t = b.target("t", {2, 3}, DType::F32);
  b.begin_loss();
  b.set_loss(b.mse_loss("loss", y, t));
  return b.finish();
}

std::vector<std::string> op_names(const Graph& g) {
  std::vector<std::string> out;
  for (const Op& op : g.ops) out.push_back(op.name);
  return out;
}

TEST(AutocastWeightCopy, CastsRunLastArgumentFirst) {
  // redispatch(cached_cast(args)...) evaluates its arguments right to left (GCC): F.linear(x, W,
  // b) copies the bias, the weight, then the input. Measured on the H100: resnet50's fc allocates
  // its bias copy (1000 x 2 = 2,000 bytes), then its weight copy (2048 x 1000 x 2 = 4,096,000);
  // llama's lm_head the weight (512,000), then the input (2,097,152).
  Graph g = apply_autocast(two_linears(), DType::BF16, false);
  EXPECT_EQ(op_names(g), (std::vector<std::string>{"fc1.bias.to_bfloat16", "fc1.weight.to_bfloat16", "x.to_bfloat16",
                                                   "fc1", "fc2.weight.to_bfloat16", "fc2", "fc2.to_float32", "loss"}));
}

TEST(AutocastWeightCopy, LinearKeepsAWeightTheGraphMade) {
  // A parameter weight costs nothing to keep, so the fp32 Linear saves only its input (for the
  // weight's gradient). The bf16 copy is a buffer of its own: kept for the input's gradient,
  // only when the input needs one (x, a model input, does not: fc1 keeps no copy). Release order
  // (measured): addmm the input, then the weight; mm the weight, then the input.
  Graph fp32 = two_linears();
  DeviceProfile cuda = DeviceProfile::cuda();
  ForwardPlan plain = forward_plan(RuleContext{fp32, op_named(fp32, "fc2"), cuda, true, true, {true, true}});
  ASSERT_EQ(plain.saved.size(), 1u);
  EXPECT_EQ(plain.saved[0].index, 0);

  Graph amp = apply_autocast(two_linears(), DType::BF16, false);
  ForwardPlan mm = forward_plan(RuleContext{amp, op_named(amp, "fc2"), cuda, true, true, {true, true}});
  ASSERT_EQ(mm.saved.size(), 2u);
  EXPECT_EQ(mm.saved[0].index, 1);  // the weight copy first
  EXPECT_EQ(mm.saved[1].index, 0);
  ForwardPlan addmm = forward_plan(RuleContext{amp, op_named(amp, "fc1"), cuda, true, true, {true, true, true}});
  ASSERT_EQ(addmm.saved.size(), 2u);
  EXPECT_EQ(addmm.saved[0].index, 0);  // the input first
  EXPECT_EQ(addmm.saved[1].index, 1);
  ForwardPlan frozen_input = forward_plan(RuleContext{amp, op_named(amp, "fc1"), cuda, true, true, {false, true, true}});
  ASSERT_EQ(frozen_input.saved.size(), 1u);
  EXPECT_EQ(frozen_input.saved[0].index, 0);
}


TEST(AutocastWeightCopy, CrossEntropyKeepsBf16LogProbabilitiesAndAFloat32Copy) {
  // cross_entropy_loss calls log_softmax(self, 1, self.scalar_type()): with the dtype named,
  // autocast runs it in bf16; nll_loss (an fp32 op) casts the log-probabilities to fp32 and
  // saves that copy. Logits [6, 10] bf16 (120 bytes): log_softmax [6, 10] bf16 (120 bytes, kept
  // by its node), the fp32 copy 240 bytes (kept by nll_loss's). Measured on the H100 in gpt2's
  // loss at batch 8, sequence 256: 205,048,560 bf16 + 410,097,120 fp32 bytes live at the end of
  // the forward (2040 x 50257 log-probabilities).
  GraphBuilder b("ce");
  TensorId x = b.input("x", {6, 4}, DType::F32);
  TensorId logits = b.linear("fc", x, 10, /*bias=*/false);
  TensorId t = b.target("t", {6}, DType::I64);
  b.begin_loss();
  b.set_loss(b.cross_entropy("loss", logits, t));
  Graph g = apply_autocast(b.finish(), DType::BF16, false);
  const Op& ls = op_named(g, "loss.log_softmax");
  EXPECT_EQ(g.tensor(ls.inputs[0]).dtype, DType::BF16);
  EXPECT_EQ(g.tensor(ls.outputs[0]).bytes(), 120);
  const Op& nll = op_named(g, "loss");
  const Op& up = g.op(g.tensor(nll.inputs[0]).producer);
  EXPECT_EQ(up.kind, OpKind::Cast);
  EXPECT_EQ(g.tensor(nll.inputs[0]).bytes(), 240);
  // F.log_softmax without a dtype is an fp32 op: its input is cast up first.
  GraphBuilder plain("plain");
  TensorId y = plain.linear("fc", plain.input("x", {6, 4}, DType::F32), 10, false);
  plain.mark_output(plain.log_softmax("lsm", y, 1));
  Graph pg = apply_autocast(plain.finish(), DType::BF16, false);
  EXPECT_EQ(pg.tensor(op_named(pg, "lsm").outputs[0]).dtype, DType::F32);
}

// The backward step of `op` as signed bytes and buffer names: +bytes name for an allocation,
// -bytes name for a free.
std::vector<std::string> backward_step(const Program& p, const Graph& g, const std::string& op) {
  std::vector<std::string> out;
  for (const Step& s : p.steps) {
    if (s.phase != Phase::Backward || s.op == kNone || g.op(s.op).name != op) continue;
    for (int32_t e = s.first_event; e < s.end_event; ++e) {
      const Event& ev = p.events[static_cast<size_t>(e)];
      if (ev.kind == Event::Kind::Retag) continue;
      const Buffer& b = p.buffers[static_cast<size_t>(ev.buffer)];
      out.push_back((ev.kind == Event::Kind::Alloc ? "+" : "-") + std::to_string(b.bytes) + " " + b.name);
    }
  }
  return out;
}

TEST(AutocastWeightCopy, TheCopyIsFreedAfterItsLinearsGradientsAndItsCastGivesTheFp32Gradient) {
  // amp-bf16 two_linears on CUDA (no cuBLAS workspaces), one step. fc2 (mm, no bias) makes the
  // weight copy's gradient first, 3 x 4 x 2 = 24 bytes, then h's, 2 x 4 x 2 = 16; drops the
  // incoming bf16 gradient (2 x 3 x 2 = 12), then releases the weight copy (24) and h (16), as
  // the H100 trace of llama's lm_head does (512,000 + 2,097,152 for the copy and the input).
  // The weight cast's backward then makes the fp32 gradient, 3 x 4 x 4 = 48 bytes, and drops the
  // bf16 one.
  Graph g = apply_autocast(two_linears(), DType::BF16, false);
  ScheduleOptions o;
  o.iterations = 1;
  o.device = DeviceProfile::cuda();
  o.device.cublas_workspace_bytes = 0;
  o.device.cublaslt_workspace_bytes = 0;
  Program p = build_program(g, o);
  EXPECT_EQ(backward_step(p, g, "fc2"), (std::vector<std::string>{"+24 fc2.weight.to_bfloat16.grad", "+16 fc1.grad",
                                                                  "-12 fc2.grad", "-24 fc2.weight.to_bfloat16",
                                                                  "-16 fc1"}));
  EXPECT_EQ(backward_step(p, g, "fc2.weight.to_bfloat16"),
            (std::vector<std::string>{"+48 fc2.weight.grad", "-24 fc2.weight.to_bfloat16.grad"}));
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
