// nn.ConvTranspose2d (OpKind::ConvTranspose2d): the shape rule, bad geometry, and what PyTorch
// 1.13's CPU kernel (slow_conv_transpose2d) allocates, pinned byte by byte against the trace
// validation/optrace.py printed for captured:conv-transpose (validation/captured.py).
#include <gtest/gtest.h>

#include "estimate/estimate.h"
#include "ir/builder.h"
#include "training/device_profile.h"
#include "training/op_rules.h"
#include "util/error.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

Window2d stride_pad(int64_t stride, int64_t pad) {
  Window2d w;
  w.stride_h = w.stride_w = stride;
  w.pad_top = w.pad_left = w.pad_bottom = w.pad_right = pad;
  return w;
}

// ConvTransposeStack of validation/captured.py at batch 2, cross-entropy over 4 classes per pixel:
// up_k2 (16->8, k2 s2, bias), relu, up_k3 (8->8, k3 s2 p1 op1, no bias), relu, mix (8->4, 1x1, bias).
Graph stack(bool training) {
  GraphBuilder b("conv-transpose");
  TensorId x = b.input("x", {2, 16, 16, 16}, DType::F32);
  TensorId w1 = b.parameter("up_k2.weight", {16, 8, 2, 2});
  TensorId b1 = b.parameter("up_k2.bias", {8});
  TensorId h = b.conv_transpose2d_with("up_k2", x, w1, b1, stride_pad(2, 0), {0, 0}, 1);
  h = b.relu("relu1", h, false);
  TensorId w2 = b.parameter("up_k3.weight", {8, 8, 3, 3});
  h = b.conv_transpose2d_with("up_k3", h, w2, kNone, stride_pad(2, 1), {1, 1}, 1);
  h = b.relu("relu2", h, false);
  TensorId w3 = b.parameter("mix.weight", {8, 4, 1, 1});
  TensorId b3 = b.parameter("mix.bias", {4});
  TensorId out = b.conv_transpose2d_with("mix", h, w3, b3, stride_pad(1, 0), {0, 0}, 1);
  b.mark_output(out);
  if (training) {
    TensorId y = b.target("y", {2, 64, 64}, DType::I64);
    b.begin_loss();
    b.set_loss(b.cross_entropy("loss", out, y));
  }
  return b.finish();
}

TEST(ConvTranspose, OutputSizeFollowsPyTorchsRule) {
  Graph g = stack(false);
  // (16-1)*2 + 1*(2-1) + 0 + 1 = 32; (32-1)*2 - 2 + 2 + 1 + 1 = 64; 1x1 stride 1 keeps 64.
  EXPECT_EQ(g.tensor(g.ops[0].outputs[0]).shape, (std::vector<int64_t>{2, 8, 32, 32}));
  EXPECT_EQ(g.tensor(g.ops[2].outputs[0]).shape, (std::vector<int64_t>{2, 8, 64, 64}));
  EXPECT_EQ(g.tensor(g.ops[4].outputs[0]).shape, (std::vector<int64_t>{2, 4, 64, 64}));
  EXPECT_EQ(g.ops[0].kind, OpKind::ConvTranspose2d);
  // MACs: every input element times Cout*kh*kw: 2*16*16*16 * 8*2*2 = 262,144 -> 524,288 FLOPs.
  EXPECT_EQ(g.ops[0].flops, 524288);
}

TEST(ConvTranspose, BadGeometryIsAnInputError) {
  GraphBuilder b("bad");
  TensorId x = b.input("x", {1, 4, 8, 8}, DType::F32);
  TensorId w = b.parameter("w", {4, 2, 3, 3});
  // output_padding must be below stride or dilation (both 1 here).
  EXPECT_THROW(b.conv_transpose2d_with("c", x, w, kNone, stride_pad(1, 0), {1, 1}, 1), InputError);
  // Groups other than 1 run through per-group copies on the CPU: refused, not guessed.
  EXPECT_THROW(b.conv_transpose2d_with("c", x, w, kNone, stride_pad(1, 0), {0, 0}, 2), InputError);
  TensorId wrong = b.parameter("w2", {3, 2, 3, 3});
  EXPECT_THROW(b.conv_transpose2d_with("c", x, wrong, kNone, stride_pad(1, 0), {0, 0}, 1), InputError);
  // Padding larger than the grown size: (1-1)*1 + 2 + 1 - 2*2 = -1.
  TensorId x1 = b.input("x1", {1, 4, 1, 1}, DType::F32);
  EXPECT_THROW(b.conv_transpose2d_with("c", x1, w, kNone, stride_pad(1, 2), {0, 0}, 1), InputError);
}

struct Ev {
  LocalEvent::Kind kind;
  int64_t bytes;
};

std::vector<Ev> temps_of(const std::vector<LocalEvent>& ev) {
  std::vector<Ev> out;
  for (const LocalEvent& e : ev) out.push_back({e.kind, e.bytes});
  return out;
}

TEST(ConvTranspose, CpuForwardAllocatesColumnsAndOnesAfterTheOutput) {
  Graph g = stack(false);
  DeviceProfile cpu = DeviceProfile::cpu();
  using K = LocalEvent::Kind;
  // up_k2: output first, columns Cout*kh*kw * H*W * 4 = 8*2*2 * 16*16 * 4 = 32,768, ones
  // Ho*Wo*4 = 32*32*4 = 4,096 (bias), ones freed, columns freed.
  RuleContext c0{g, g.ops[0], cpu, true, true, {false, true, true}};
  ForwardPlan p = forward_plan(c0);
  std::vector<Ev> ev = temps_of(p.events);
  ASSERT_EQ(ev.size(), 5u);
  EXPECT_EQ(ev[0].kind, K::AllocOutput);
  EXPECT_EQ(ev[1].kind, K::AllocTemp);
  EXPECT_EQ(ev[1].bytes, 32768);
  EXPECT_EQ(ev[2].kind, K::AllocTemp);
  EXPECT_EQ(ev[2].bytes, 4096);
  EXPECT_EQ(ev[3].kind, K::FreeTemp);
  EXPECT_EQ(ev[4].kind, K::FreeTemp);
  // ConvolutionBackward0 keeps input and weight.
  ASSERT_EQ(p.saved.size(), 2u);
  // up_k3 (no bias): columns 8*3*3 * 32*32 * 4 = 294,912 and no ones.
  RuleContext c2{g, g.ops[2], cpu, true, true, {true, true}};
  ev = temps_of(forward_plan(c2).events);
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[1].bytes, 294912);
  // mix, a 1x1 stride-1 transposed convolution, still unfolds in the forward: 4 * 64*64 * 4 =
  // 65,536, then ones 64*64*4 = 16,384.
  RuleContext c4{g, g.ops[4], cpu, true, true, {true, true, true}};
  ev = temps_of(forward_plan(c4).events);
  ASSERT_EQ(ev.size(), 5u);
  EXPECT_EQ(ev[1].bytes, 65536);
  EXPECT_EQ(ev[2].bytes, 16384);
}

TEST(ConvTranspose, CpuBackwardSkipsColumnsForAPlain1x1) {
  Graph g = stack(true);
  DeviceProfile cpu = DeviceProfile::cpu();
  using K = LocalEvent::Kind;
  // up_k3, contiguous incoming gradient: grad_input (65,536 = 2*8*32*32*4), columns 294,912 alive
  // and freed; then grad_weight (2,304 = 8*8*3*3*4) and the columns again.
  RuleContext c2{g, g.ops[2], cpu, true, true, {true, true}};
  BackwardPlan b = backward_plan(c2, true);
  std::vector<Ev> ev = temps_of(b.events);
  ASSERT_EQ(ev.size(), 6u);
  EXPECT_EQ(ev[0].kind, K::AllocGrad);
  EXPECT_EQ(ev[1].bytes, 294912);
  EXPECT_EQ(ev[3].kind, K::AllocGrad);
  EXPECT_EQ(ev[4].bytes, 294912);
  ASSERT_EQ(b.grads.size(), 2u);
  EXPECT_EQ(b.grads[0].bytes, 65536);
  EXPECT_EQ(b.grads[1].bytes, 2304);
  // mix (1x1, stride 1, no padding): grad_input, grad_weight, grad_bias and nothing else.
  RuleContext c4{g, g.ops[4], cpu, true, true, {true, true, true}};
  b = backward_plan(c4, true);
  ASSERT_EQ(b.events.size(), 3u);
  EXPECT_EQ(b.grads[1].input, 1);  // the weight's gradient before the bias's
  EXPECT_EQ(b.grads[2].input, 2);
  // A non-contiguous incoming gradient (a torch.cat's narrow) is copied once per pass:
  // up_k3 then holds a 262,144-byte (2*8*64*64*4) copy around each pass.
  b = backward_plan(c2, false);
  ev = temps_of(b.events);
  ASSERT_EQ(ev.size(), 10u);
  EXPECT_EQ(ev[0].bytes, 262144);
  EXPECT_EQ(ev[5].bytes, 262144);
}

TEST(ConvTranspose, TrainingStepPeakIsTheMeasuredOne) {
  // validation/optrace.py captured:conv-transpose --batch 2 --mode train --optimizer sgd:
  // persistent = weights 2048+32+2304+128+16 = 4,528 + input 2*16*16*16*4 = 32,768 + target
  // 2*64*64*8 = 65,536 -> 102,832. End of forward 692,664 (mix output 131,072 saved by nothing but
  // the loss's log_softmax 131,072, relu outputs 65,536 + 262,144, total_weight 4, loss 4). Backward:
  // seed 4, nll grad 131,072, log_softmax grad 131,072 (nll grad, total_weight and log-probs
  // freed), mix grad_input 262,144 + grad_weight 128 + grad_bias 16 -> 954,952; log_softmax grad
  // freed -> 823,880; relu2's grad 262,144 -> 1,086,024 (the measured peak).
  EstimateOptions o;
  o.model = "conv-transpose";
  o.graph_loader = [](const BuildConfig&) { return stack(true); };
  o.batch = 2;
  o.mode = RunMode::Training;
  o.optimizer = OptimizerKind::Sgd;
  o.foreach = false;
  o.device = "cpu";
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r.value().peak_bytes, 1086024);
  EXPECT_EQ(r.value().peak_phase, Phase::Backward);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
