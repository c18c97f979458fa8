// Dilated convolutions on the CPU profile (training/cpu_conv.h): which ones oneDNN runs through
// its GEMM convolution and what that allocates, pinned against single convolutions measured with
// the validation harness (PyTorch 1.13, oneDNN 2.6, AVX-512; batch 2, bias-free, input needing a
// gradient, traced with validation/optrace.py).
#include <gtest/gtest.h>

#include "ir/builder.h"
#include "training/device_profile.h"
#include "kernel_event_sizes.h"
#include "training/op_rules.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

Graph conv(int64_t cin, int64_t hw, int64_t cout, int64_t dilation) {
  GraphBuilder b("dilated");
  TensorId x = b.input("x", {2, cin, hw, hw}, DType::F32);
  Conv2dSpec spec;
  spec.kernel_h = spec.kernel_w = 3;
  spec.padding_h = spec.padding_w = dilation;
  spec.dilation = dilation;
  spec.bias = false;
  b.mark_output(b.conv2d("c", x, cout, spec));
  return b.finish();
}

TEST(ConvDilatedCpu, AsppRunsTheGemmConvolutionEverywhere) {
  // DeepLabV3's ASPP branch: 2048 -> 256, 3x3, dilation 12, padding 12, on an 8x8 map. Padding 12
  // exceeds the 8-wide output row: no direct kernel, no source or weight reorder.
  Graph g = conv(2048, 8, 256, 12);
  DeviceProfile cpu = DeviceProfile::cpu();
  RuleContext c{g, g.ops[0], cpu, true, true, {true, true}};
  // Forward: dst 2*256*8*8*4 = 131,072, the output, dst freed (measured: +85,376 scratchpad
  // first, not modelled).
  EXPECT_EQ(allocs(forward_plan(c).events), (std::vector<int64_t>{131072, -1, 0}));
  BackwardPlan b = backward_plan(c, true);
  // Data: diff_src 2*2048*8*8*4 = 1,048,576; scratchpad im2col 2048*9*64*4 = 4,718,592 + 128;
  // grad_input 1,048,576. Weights: diff_weights 256*2048*9*4 = 18,874,368; scratchpad
  // 4,718,592 + 4 * 18,874,368 + 256 = 80,216,320; W.grad 18,874,368.
  EXPECT_EQ(allocs(b.events, &b), (std::vector<int64_t>{1048576, 4718720, 0, 1048576, 0,
                                                        18874368, 80216320, 0, 18874368, 0}));
  // Two threads: one im2col (and weights-pass buffers) per thread: 2 * 4,718,592 + 128 =
  // 9,437,312 and 2 * (4,718,592 + 75,497,472) + 256 = 160,432,384 (both measured).
  cpu.threads = 2;
  RuleContext c2{g, g.ops[0], cpu, true, true, {true, true}};
  b = backward_plan(c2, true);
  EXPECT_EQ(b.events[1].bytes, 9437312);
  EXPECT_EQ(b.events[6].bytes, 160432384);
}

TEST(ConvDilatedCpu, DilatedKernelWiderThanTheInputTakesTheGemmWeightsPassOnly) {
  // layer4 of DeepLabV3's backbone at a 64x64 image: 512 -> 512, dilation 4 on an 8x8 map. The
  // dilated kernel spans 1 + 2*4 = 9 > 8 rows: the weights pass is GEMM (scratchpad
  // 512*9*64*4 = 1,179,648 + 4 * 9,437,184 + 256 = 38,928,640, measured); forward and data keep
  // the direct kernels' reorders (padding 4 <= 8).
  Graph g = conv(512, 8, 512, 4);
  DeviceProfile cpu = DeviceProfile::cpu();
  RuleContext c{g, g.ops[0], cpu, true, true, {true, true}};
  // Forward: src 262,144, weights 9,437,184, dst 262,144 reordered, as every direct call.
  std::vector<int64_t> f = allocs(forward_plan(c).events);
  ASSERT_GE(f.size(), 3u);
  EXPECT_EQ(f[1], 9437184);
  BackwardPlan b = backward_plan(c, true);
  std::vector<int64_t> a = allocs(b.events, &b);
  ASSERT_EQ(a.size(), 12u);  // data pass: 7 events; weights pass: 5
  EXPECT_EQ(a[7], 9437184);
  EXPECT_EQ(a[8], 38928640);
  // Dilation 2 (kernel span 5 <= 8) stays on the direct kernels in every pass.
  Graph g2 = conv(512, 8, 512, 2);
  RuleContext c3{g2, g2.ops[0], cpu, true, true, {true, true}};
  b = backward_plan(c3, true);
  for (const LocalEvent& e : b.events) EXPECT_NE(e.bytes, 38928640);
  EXPECT_EQ(b.events.size(), 7u + 7u);  // data and weights passes with their reorders
}

TEST(ConvDilatedCpu, GemmWeightsPassKeepsIdeepsDiffBiasAfterTheScratchpad) {
  // The 512 -> 512 dilation-4 convolution above with a bias (measured): diff_weights 9,437,184,
  // scratchpad 38,928,640, diff_bias 512*4 = 2,048, scratchpad freed, bias.grad 2,048, W.grad,
  // diff_weights freed, diff_bias freed.
  GraphBuilder gb("dilated-bias");
  TensorId x = gb.input("x", {2, 512, 8, 8}, DType::F32);
  Conv2dSpec spec;
  spec.kernel_h = spec.kernel_w = 3;
  spec.padding_h = spec.padding_w = 4;
  spec.dilation = 4;
  gb.mark_output(gb.conv2d("c", x, 512, spec));
  Graph g = gb.finish();
  DeviceProfile cpu = DeviceProfile::cpu();
  RuleContext c{g, g.ops[0], cpu, true, true, {false, true, true}};
  BackwardPlan b = backward_plan(c, true);
  EXPECT_EQ(allocs(b.events, &b), (std::vector<int64_t>{9437184, 38928640, 2048, 0, 2048, 9437184, 0, 0}));
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
