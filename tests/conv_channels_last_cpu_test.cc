// Channels-last tensors in the IR (Tensor::channels_last) and the CPU convolution rules for them
// (training/cpu_conv.h), pinned against single convolutions measured with the validation harness
// (PyTorch 1.13, oneDNN 2.6, AVX-512; batch 2, bias, an NHWC input needing a gradient, traced
// with validation/memtrace.py's Recorder as in validation/optrace.py): ConvNeXt's 2x2 stride-2
// downsampling and 7x7 depthwise convolutions after LayerNorm2d's permute back.
#include <gtest/gtest.h>

#include "ir/builder.h"
#include "training/device_profile.h"
#include "kernel_event_sizes.h"
#include "training/op_rules.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

// [2,C,hw,hw] with NHWC strides, as LayerNorm2d leaves it: permute(0,3,1,2) of [2,hw,hw,C].
TensorId channels_last_map(GraphBuilder& b, int64_t c, int64_t hw) {
  TensorId nhwc = b.input("x", {2, hw, hw, c}, DType::F32);
  return b.permute("to_nchw", nhwc, {0, 3, 1, 2});
}

Graph conv(int64_t cin, int64_t hw, int64_t cout, int64_t k, int64_t stride, int64_t pad, int64_t groups) {
  GraphBuilder b("channels_last");
  TensorId x = channels_last_map(b, cin, hw);
  Conv2dSpec spec = Conv2dSpec::square(k, stride, pad);
  spec.groups = groups;
  b.mark_output(b.conv2d("c", x, cout, spec));
  return b.finish();
}

TEST(ChannelsLastIr, PermuteConvolutionAndElementwiseKeepTheLayout) {
  GraphBuilder b("layout");
  TensorId x = channels_last_map(b, 96, 16);
  EXPECT_TRUE(b.is_channels_last(x));
  EXPECT_FALSE(b.is_contiguous(x));
  TensorId y = b.conv2d("dw", x, 96, [] {
    Conv2dSpec s = Conv2dSpec::square(7, 1, 3);
    s.groups = 96;
    return s;
  }());
  EXPECT_TRUE(b.is_channels_last(y));  // _convolution follows suggest_memory_format()
  TensorId r = b.add("residual", y, x);
  EXPECT_TRUE(b.is_channels_last(r));
  TensorId g = b.gelu("act", r);
  EXPECT_TRUE(b.is_channels_last(g));
  // Back to [N,H,W,C]: contiguous again, so layer_norm copies nothing.
  TensorId nhwc = b.permute("to_nhwc", g, {0, 2, 3, 1});
  EXPECT_TRUE(b.is_contiguous(nhwc));
  EXPECT_FALSE(b.is_channels_last(nhwc));
  // The same permute of an NCHW-contiguous map is neither.
  TensorId plain = b.input("p", {2, 96, 16, 16}, DType::F32);
  TensorId p = b.permute("p_nhwc", plain, {0, 2, 3, 1});
  EXPECT_FALSE(b.is_contiguous(p));
  EXPECT_FALSE(b.is_channels_last(p));
  // One channel or a 1x1 map: NHWC strides are contiguous ones (size-1 strides do not count).
  TensorId pooled = b.input("q", {2, 1, 1, 96}, DType::F32);
  TensorId q = b.permute("q_nchw", pooled, {0, 3, 1, 2});
  EXPECT_TRUE(b.is_contiguous(q));
  EXPECT_FALSE(b.is_channels_last(q));
}

TEST(ConvChannelsLastCpu, DenseDownsamplingCopiesTheWeightToChannelsLast) {
  // ConvNeXt's features.2.1 at a 64x64 image: 96 -> 192, 2x2 stride 2 on [2,96,16,16] NHWC.
  // W = 192*96*2*2*4 = 294,912; out 2*192*8*8*4 = 98,304; x 196,608.
  Graph g = conv(96, 16, 192, 2, 2, 0, 1);
  DeviceProfile cpu = DeviceProfile::cpu();
  RuleContext c{g, g.ops[1], cpu, true, true, {true, true, true}};
  ASSERT_EQ(g.ops[1].kind, OpKind::Conv2d);
  // Forward (measured): +W channels_last copy, +out, +8,192 scratchpad (4,096 * (1 thread + 1)),
  // +W reorder 192*96*4*4 = 294,912, then -W -8,192 -W. No source or destination reorder.
  EXPECT_EQ(allocs(forward_plan(c).events), (std::vector<int64_t>{294912, -1, 8192, 294912, 0, 0, 0}));
  // Backward (measured): +W copy, +grad_input 196,608, +W reorder -W; weights: +diff_weights W,
  // +diff_bias 768, +b.grad 768, +W.grad channels_last W, +W.grad converted W, then -W -W -768
  // and the copy -W.
  BackwardPlan b = backward_plan(c, true);
  EXPECT_EQ(allocs(b.events, &b), (std::vector<int64_t>{294912, 196608, 294912, 0, 294912, 768, 768, 294912,
                                                        294912, 0, 0, 0, 0}));
  // Two threads (measured): the forward scratchpad is 4,096 * 3 = 12,288; the rest the same.
  cpu.threads = 2;
  RuleContext c2{g, g.ops[1], cpu, true, true, {true, true, true}};
  EXPECT_EQ(allocs(forward_plan(c2).events), (std::vector<int64_t>{294912, -1, 12288, 294912, 0, 0, 0}));
  EXPECT_EQ(allocs(backward_plan(c2, true).events, nullptr).size(), 13u);
}

TEST(ConvChannelsLastCpu, FeaturesSixOneHoldsTwoWeightCopiesAtOnce) {
  // ConvNeXt's features.6.1, 384 -> 768 2x2 stride 2 on [2,384,4,4]: the 4,718,592-byte
  // channels-last weight copy beside oneDNN's 4,718,592-byte reorder (768*384*2*2*4), the
  // measured inference peak of convnext_tiny.
  Graph g = conv(384, 4, 768, 2, 2, 0, 1);
  DeviceProfile cpu = DeviceProfile::cpu();
  RuleContext c{g, g.ops[1], cpu, false, false, {false, false, false}};
  EXPECT_EQ(allocs(forward_plan(c).events), (std::vector<int64_t>{4718592, -1, 8192, 4718592, 0, 0, 0}));
}

TEST(ConvChannelsLastCpu, DepthwiseSevenBySevenWeightsPassBuffer) {
  // ConvNeXt's block convolution, 96 channels, 7x7, padding 3 on [2,96,16,16] NHWC.
  // W = 96*49*4 = 18,816 (already channels_last: one input channel per group, no copy).
  Graph g = conv(96, 16, 96, 7, 1, 3, 96);
  DeviceProfile cpu = DeviceProfile::cpu();
  RuleContext c{g, g.ops[1], cpu, true, true, {true, true, true}};
  // Forward (measured): +out 196,608, +scratchpad 128 + 4,096 * 1 = 4,224, +W reorder 18,816, freed.
  EXPECT_EQ(allocs(forward_plan(c).events), (std::vector<int64_t>{-1, 4224, 18816, 0, 0}));
  // Backward (measured): +grad_input 196,608, +W reorder 18,816 -; weights: +96*49*1,024 =
  // 4,816,896 (the same at batch 1 and 4, an 8x8 map, and 2 threads), +96*64 + 128 = 6,272,
  // +diff_bias 384, -6,272, +b.grad 384, +W.grad channels_last 18,816, +W.grad 18,816, then
  // -18,816 -4,816,896 -384.
  BackwardPlan b = backward_plan(c, true);
  EXPECT_EQ(allocs(b.events, &b), (std::vector<int64_t>{196608, 18816, 0, 4816896, 6272, 384, 0, 384, 18816,
                                                        18816, 0, 0, 0}));
  cpu.threads = 2;
  RuleContext c2{g, g.ops[1], cpu, true, true, {true, true, true}};
  // Two threads (measured): forward scratchpad 128 + 2 * 4,096 = 8,320.
  EXPECT_EQ(allocs(forward_plan(c2).events), (std::vector<int64_t>{-1, 8320, 18816, 0, 0}));
}

TEST(ConvChannelsLastCpu, DepthwiseBufferScalesWithChannelsAndKernel) {
  // Measured: 40 channels at 7x7 -> 40*49*1,024 = 2,007,040 (unblocked), small 40*64 + 128 =
  // 2,688; the data pass's weight reorder is blocked, 48*49*4 = 9,408. 96 channels at 5x5 ->
  // 96*25*1,024 = 2,457,600.
  Graph g40 = conv(40, 16, 40, 7, 1, 3, 40);
  DeviceProfile cpu = DeviceProfile::cpu();
  RuleContext c{g40, g40.ops[1], cpu, true, true, {true, true, true}};
  BackwardPlan b = backward_plan(c, true);
  EXPECT_EQ(allocs(b.events, &b), (std::vector<int64_t>{81920, 9408, 0, 2007040, 2688, 160, 0, 160, 7840,
                                                        7840, 0, 0, 0}));
  Graph g5 = conv(96, 16, 96, 5, 1, 2, 96);
  RuleContext c5{g5, g5.ops[1], cpu, true, true, {true, true, true}};
  BackwardPlan b5 = backward_plan(c5, true);
  EXPECT_EQ(allocs(b5.events, &b5)[3], 2457600);
}

TEST(ConvChannelsLastCpu, PointwiseAtOneThreadStaysOnTheSlowPathWithNothingExtra) {
  // 96 -> 384 1x1 on [2,96,16,16] NHWC at 1 thread: aten takes _slow_conv2d as for NCHW, and
  // measured the same bytes: the output 2*384*16*16*4 = 786,432 only; backward grad_input
  // 196,608, the bias gradient 1,536, the weight gradient 384*96*4 = 147,456, and no copy of the
  // channels-last incoming gradient.
  Graph g = conv(96, 16, 384, 1, 1, 0, 1);
  DeviceProfile cpu = DeviceProfile::cpu();
  RuleContext c{g, g.ops[1], cpu, true, true, {true, true, true}};
  EXPECT_EQ(allocs(forward_plan(c).events), (std::vector<int64_t>{-1}));
  BackwardPlan b = backward_plan(c, true);
  EXPECT_EQ(allocs(b.events, &b), (std::vector<int64_t>{196608, 1536, 147456}));
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
