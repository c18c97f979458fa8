// The PyTorch 2.x behaviours of DeviceProfile::cuda() that the H100 measurements with 2.11
// showed (validation/measured_cuda.json, its allocator traces), each pinned beside the 1.13 CPU
// behaviour the CPU validation measures: mean keeps only sizes, a Linear without bias makes its
// weight's gradient first, the autograd engine sums two gradients in place,
// nn.MultiheadAttention runs scaled_dot_product_attention (vit_b_16), and CUDA's softmax
// backward multiplies into a temporary.
#include <gtest/gtest.h>

#include <string>

#include "estimate/estimate.h"
#include "frontends/zoo/registry.h"
#include "ir/builder.h"
#include "kernel_event_sizes.h"
#include "schedule/build_program.h"
#include "training/device_profile.h"
#include "training/op_rules.h"
#include "op_named.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::op_named;

TEST(Torch2CudaRules, MeanKeepsItsInputOnlyOnTheCpu) {
  // x [2, 3, 8] fp32 (192 bytes) -> mean(-1, keepdim=True) [2, 3, 1]: 1.13's MeanBackward1 keeps
  // self (the CPU profile, measured); 2.x's keeps self.sym_sizes() and self.sym_numel().
  GraphBuilder b("mean");
  TensorId x = b.parameter("x", {2, 3, 8});
  b.mean("m", x, -1, true);
  Graph g = b.finish();
  const Op& m = op_named(g, "m");
  DeviceProfile cpu = DeviceProfile::cpu(), cuda = DeviceProfile::cuda();
  ForwardPlan on_cpu = forward_plan(RuleContext{g, m, cpu, true, true, {true}});
  ASSERT_EQ(on_cpu.saved.size(), 1u);
  EXPECT_EQ(on_cpu.saved[0].kind, Ref::Kind::Input);
  EXPECT_TRUE(forward_plan(RuleContext{g, m, cuda, true, true, {true}}).saved.empty());
  // Either way the backward writes one gradient of the input's 2 x 3 x 8 x 4 = 192 bytes.
  BackwardPlan back = backward_plan(RuleContext{g, m, cuda, true, true, {true}}, true);
  EXPECT_EQ(allocs(back.events, &back), (std::vector<int64_t>{192}));
}

TEST(Torch2CudaRules, OneByOneAdaptivePoolIsTheMean) {
  // adaptive_avg_pool2d to 1x1 is x.mean((-1, -2), keepdim=True): kept only on the CPU. Any
  // other output size runs _adaptive_avg_pool2d, whose backward reads self on both.
  GraphBuilder b("pool");
  TensorId x = b.parameter("x", {2, 4, 6, 6});
  b.adaptive_avg_pool2d("gap", x, 1, 1);
  b.adaptive_avg_pool2d("pool2", x, 2, 2);
  Graph g = b.finish();
  DeviceProfile cpu = DeviceProfile::cpu(), cuda = DeviceProfile::cuda();
  EXPECT_EQ(forward_plan(RuleContext{g, op_named(g, "gap"), cpu, true, true, {true}}).saved.size(), 1u);
  EXPECT_TRUE(forward_plan(RuleContext{g, op_named(g, "gap"), cuda, true, true, {true}}).saved.empty());
  EXPECT_EQ(forward_plan(RuleContext{g, op_named(g, "pool2"), cuda, true, true, {true}}).saved.size(), 1u);
}

TEST(Torch2CudaRules, LinearWithoutBiasMakesTheWeightGradientFirst) {
  // x [4, 16] fp32 (256 bytes) @ W [8, 16]^T (512 bytes). Measured on the H100 (llama's
  // projections and lm_head): the weight's gradient, then the input's; the CPU with 1.13 and
  // every biased Linear (addmm) make the input's first.
  GraphBuilder b("linear");
  TensorId x = b.parameter("x", {4, 16});
  b.linear("plain", x, 8, /*bias=*/false);
  b.linear("biased", x, 8, /*bias=*/true);
  Graph g = b.finish();
  DeviceProfile cpu = DeviceProfile::cpu(), cuda = DeviceProfile::cuda();
  auto grads = [&](const DeviceProfile& d, const std::string& op, size_t n) {
    std::vector<bool> need(n, true);
    BackwardPlan p = backward_plan(RuleContext{g, op_named(g, op), d, true, true, need}, true);
    return allocs(p.events, &p);
  };
  EXPECT_EQ(grads(cuda, "plain", 2), (std::vector<int64_t>{512, 256}));
  EXPECT_EQ(grads(cpu, "plain", 2), (std::vector<int64_t>{256, 512}));
  // With the bias (8 x 4 = 32 bytes): input, weight, bias on both.
  EXPECT_EQ(grads(cuda, "biased", 3), (std::vector<int64_t>{256, 512, 32}));
  EXPECT_EQ(grads(cpu, "biased", 3), (std::vector<int64_t>{256, 512, 32}));
}

TEST(Torch2CudaRules, CudaSoftmaxBackwardMultipliesIntoATemporary) {
  // bert-base's attention probabilities at batch 2, sequence 32: [2, 12, 32, 32] fp32 = 98,304
  // bytes. softmax_backward_cuda_out makes grad_input (98,304), then tmp = grad * output
  // (98,304), freed when it returns (measured on the H100, once per layer); the CPU kernel
  // writes grad_input only.
  GraphBuilder b("softmax");
  TensorId x = b.parameter("x", {2, 12, 32, 32});
  b.softmax("probs", x, -1);
  Graph g = b.finish();
  DeviceProfile cpu = DeviceProfile::cpu(), cuda = DeviceProfile::cuda();
  EXPECT_TRUE(cuda.softmax_backward_temp);
  EXPECT_FALSE(cpu.softmax_backward_temp);
  BackwardPlan on_cuda = backward_plan(RuleContext{g, op_named(g, "probs"), cuda, true, true, {true}}, true);
  EXPECT_EQ(allocs(on_cuda.events, &on_cuda), (std::vector<int64_t>{98'304, 98'304, 0}));
  BackwardPlan on_cpu = backward_plan(RuleContext{g, op_named(g, "probs"), cpu, true, true, {true}}, true);
  EXPECT_EQ(allocs(on_cpu.events, &on_cpu), (std::vector<int64_t>{98'304}));
  // The flag, not the profile's name, decides: a CUDA profile without it writes grad_input only.
  cuda.softmax_backward_temp = false;
  BackwardPlan off = backward_plan(RuleContext{g, op_named(g, "probs"), cuda, true, true, {true}}, true);
  EXPECT_EQ(allocs(off.events, &off), (std::vector<int64_t>{98'304}));
}

// Buffers of a program whose name ends in `suffix`.
int count_named(const Program& p, const std::string& suffix) {
  int n = 0;
  for (const Buffer& b : p.buffers) {
    n += b.name.size() >= suffix.size() && b.name.compare(b.name.size() - suffix.size(), suffix.size(), suffix) == 0;
  }
  return n;
}

TEST(Torch2CudaRules, TwoGradientsOfOneTensorAreSummedInPlaceOnCuda) {
  // h = fc(x) [4, 8] fp32 (128 bytes) feeds relu and gelu, whose backwards each make a new
  // 128-byte gradient of h. The second arrives while the engine holds the only reference to the
  // first: 2.x adds it in place (input_buffer.cpp accumulate: old_var.add_(var), measured on the
  // H100); the CPU profile (1.13, measured) makes a third 128-byte buffer for the sum.
  GraphBuilder b("two_paths");
  TensorId x = b.input("x", {4, 8}, DType::F32);
  TensorId h = b.linear("fc", x, 8);
  TensorId s = b.add("add", b.relu("relu", h, false), b.gelu("gelu", h));
  TensorId t = b.target("t", {4, 8}, DType::F32);
  b.begin_loss();
  b.set_loss(b.mse_loss("loss", s, t));
  Graph g = b.finish();
  ScheduleOptions o;
  o.iterations = 1;
  o.device = DeviceProfile::cpu();
  Program cpu = build_program(g, o);
  o.device = DeviceProfile::cuda();
  o.device.cublas_workspace_bytes = 0;
  Program cuda = build_program(g, o);
  EXPECT_EQ(count_named(cpu, "fc.grad(sum)"), 1);
  EXPECT_EQ(count_named(cuda, "fc.grad(sum)"), 0);
}

TEST(Torch2CudaRules, VitAttentionRunsSdpaOnCuda) {
  // vit_b_16 at batch 1, training, one encoder block's attention: 197 tokens x 768 fp32 =
  // 605,184 bytes per [1, 197, 768]. 2.x (mha_sdpa): in_proj addmm [197, 2304] (1,815,552),
  // its packed [3, 197, 1, 768] copy (1,815,552), the memory-efficient kernel's output
  // (605,184) and logsumexp [1, 12, 224] fp32 (10,752; 197 rows padded to a multiple of 32):
  // no [12, 197, 197] scores. 1.13 materializes them: bmm and softmax, 12 x 197 x 197 x 4 =
  // 1,862,832 bytes each.
  BuildConfig cfg;
  cfg.batch = 1;
  Graph torch1 = build_model("vit_b_16", cfg);
  cfg.mha_sdpa = true;
  Graph torch2 = build_model("vit_b_16", cfg);
  const std::string p = "encoder.layers.encoder_layer_0.self_attention";
  const Op& sdpa = op_named(torch2, p + ".scaled_dot_product_attention");
  ASSERT_EQ(sdpa.outputs.size(), 2u);
  EXPECT_EQ(torch2.tensor(sdpa.outputs[0]).bytes(), 605'184);
  EXPECT_EQ(torch2.tensor(sdpa.outputs[1]).bytes(), 10'752);
  EXPECT_EQ(torch2.tensor(op_named(torch2, p + ".in_proj.pack").outputs[0]).bytes(), 1'815'552);
  EXPECT_EQ(torch1.tensor(op_named(torch1, p + ".softmax").outputs[0]).bytes(), 1'862'832);
  for (const Op& op : torch2.ops) EXPECT_EQ(op.name.find(".softmax"), std::string::npos) << op.name;
  // The eval fast path (native multi-head attention): qkv [197, 2304], the kernel's output and
  // no logsumexp without autograd.
  cfg.inference = true;
  Graph fast = build_model("vit_b_16", cfg);
  const Op& fused = op_named(fast, p + ".scaled_dot_product_attention");
  EXPECT_EQ(fused.outputs.size(), 1u);
  EXPECT_EQ(fast.tensor(op_named(fast, p + ".in_proj").outputs[0]).bytes(), 1'815'552);
}

TEST(Torch2CudaRules, EstimateOnCudaBuildsTheTorch2Graph) {
  // build_graph (what estimate() runs) sets BuildConfig::mha_sdpa from the device: the CUDA
  // graph has the kernel in each of the 12 blocks, the CPU graph the 1.13 softmax.
  EstimateOptions o;
  o.model = "vit_b_16";
  o.mode = RunMode::Training;
  auto count = [](const Graph& g, const std::string& suffix) {
    int n = 0;
    for (const Op& op : g.ops) n += op.name.size() >= suffix.size() && op.name.compare(op.name.size() - suffix.size(), suffix.size(), suffix) == 0;
    return n;
  };
  o.device = "cuda";
  Graph cuda = build_graph(o, 1);
  EXPECT_EQ(count(cuda, ".scaled_dot_product_attention"), 12);
  EXPECT_EQ(count(cuda, "self_attention.softmax"), 0);
  o.device = "cpu";
  Graph cpu = build_graph(o, 1);
  EXPECT_EQ(count(cpu, ".scaled_dot_product_attention"), 0);
  EXPECT_EQ(count(cpu, "self_attention.softmax"), 12);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
