// Patch-embedding convolutions (kernel = stride, kernel wider than 14) on the CPU profile
// (training/cpu_conv.h): oneDNN 2.6's AVX-512 backward-weights kernel refuses kw > 14, so the
// weight gradient comes from its GEMM convolution. Pinned against single convolutions measured
// with the validation harness (PyTorch 1.13, oneDNN 2.6, AVX-512; batch 2, with bias, input not
// needing a gradient as an image's does not; traced with validation/memtrace.py's Recorder).
#include <gtest/gtest.h>

#include "ir/builder.h"
#include "training/device_profile.h"
#include "kernel_event_sizes.h"
#include "training/op_rules.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

Graph patch_conv(int64_t cin, int64_t hw, int64_t cout, int64_t kh, int64_t kw, int64_t stride) {
  GraphBuilder b("patch");
  TensorId x = b.input("x", {2, cin, hw, hw}, DType::F32);
  Conv2dSpec spec;
  spec.kernel_h = kh;
  spec.kernel_w = kw;
  spec.stride = stride;
  b.mark_output(b.conv2d("c", x, cout, spec));
  return b.finish();
}

TEST(ConvPatchCpu, VitB32PatchEmbeddingWeightsPassIsGemm) {
  // vit_b_32's conv_proj: 3 -> 768, 32x32, stride 32, 224x224 -> 7x7. Weight 768*3*32*32*4 =
  // 9,437,184; im2col for one image 3*32*32*7*7*4 = 602,112. Measured: diff_weights 9,437,184;
  // scratchpad 602,112 + 4 * 9,437,184 + 256 = 38,351,104; diff_bias 768*4 = 3,072; scratchpad
  // freed; bias.grad 3,072; W.grad 9,437,184; diff_weights freed; diff_bias freed. No diff_dst
  // reorder (the direct kernel's would be 2*768*7*7*4 = 301,056).
  Graph g = patch_conv(3, 224, 768, 32, 32, 32);
  DeviceProfile cpu = DeviceProfile::cpu();
  RuleContext c{g, g.ops[0], cpu, true, true, {false, true, true}};
  EXPECT_EQ(allocs(backward_plan(c, true)),
            (std::vector<int64_t>{9437184, 38351104, 3072, 0, 3072, 9437184, 0, 0}));
  // Two threads: one im2col and four weight buffers per thread: 2 * (602,112 + 37,748,736) +
  // 256 = 76,701,952 (measured).
  cpu.threads = 2;
  RuleContext c2{g, g.ops[0], cpu, true, true, {false, true, true}};
  EXPECT_EQ(backward_plan(c2, true).events[1].bytes, 76701952);
}

TEST(ConvPatchCpu, VitB16PatchEmbeddingWeightsPassIsGemm) {
  // vit_b_16's conv_proj: 3 -> 768, 16x16, stride 16 -> 14x14. Weight 2,359,296; im2col
  // 3*16*16*14*14*4 = 602,112; scratchpad 602,112 + 4 * 2,359,296 + 256 = 10,039,552 (measured).
  Graph g = patch_conv(3, 224, 768, 16, 16, 16);
  DeviceProfile cpu = DeviceProfile::cpu();
  RuleContext c{g, g.ops[0], cpu, true, true, {false, true, true}};
  EXPECT_EQ(allocs(backward_plan(c, true)),
            (std::vector<int64_t>{2359296, 10039552, 3072, 0, 3072, 2359296, 0, 0}));
}

TEST(ConvPatchCpu, OnlyTheKernelWidthDecides) {
  DeviceProfile cpu = DeviceProfile::cpu();
  auto plan = [&](int64_t cin, int64_t hw, int64_t kh, int64_t kw, int64_t stride) {
    Graph g = patch_conv(cin, hw, 64, kh, kw, stride);
    RuleContext c{g, g.ops[0], cpu, true, true, {false, true, true}};
    return allocs(backward_plan(c, true));
  };
  // All measured, 3 -> 64 unless said. 15x15 stride 15 at 224 -> 14x14: weight 172,800, im2col
  // 3*225*196*4 = 529,200; scratchpad 529,200 + 4 * 172,800 + 256 = 1,220,656.
  EXPECT_EQ(plan(3, 224, 15, 15, 15), (std::vector<int64_t>{172800, 1220656, 256, 0, 256, 172800, 0, 0}));
  // The stride need not equal the kernel: 16x16 stride 8 at 224 -> 27x27: weight 196,608,
  // im2col 3*256*729*4 = 2,239,488; 2,239,488 + 786,432 + 256 = 3,026,176.
  EXPECT_EQ(plan(3, 224, 16, 16, 8), (std::vector<int64_t>{196608, 3026176, 256, 0, 256, 196608, 0, 0}));
  // 16 input channels, 32x32 stride 32 at 64 -> 2x2: weight 64*16*1024*4 = 4,194,304, im2col
  // 16*1024*4*4 = 262,144; 262,144 + 16,777,216 + 256 = 17,039,616.
  EXPECT_EQ(plan(16, 64, 32, 32, 32), (std::vector<int64_t>{4194304, 17039616, 256, 0, 256, 4194304, 0, 0}));
  // 14 tall, 16 wide, stride 16 at 64 -> 4x4: weight 64*3*14*16*4 = 172,032, im2col
  // 3*14*16*4*4*4 = 43,008; 43,008 + 4 * 172,032 + 256 = 731,392.
  EXPECT_EQ(plan(3, 64, 14, 16, 16), (std::vector<int64_t>{172032, 731392, 256, 0, 256, 172032, 0, 0}));
  // Only the width: 16 tall, 14 wide stays on the direct kernel (diff_dst reorder 2*64*4*4*4 =
  // 8,192 at stride 14 on 64 -> 4x4; weight 64*3*16*14*4 = 172,032), and so does 14x14 stride 14
  // at 224 (diff_dst 2*64*16*16*4 = 131,072, weight 150,528).
  EXPECT_EQ(plan(3, 64, 16, 14, 14), (std::vector<int64_t>{8192, 172032, 256, 0, 256, 172032, 0, 0}));
  EXPECT_EQ(plan(3, 224, 14, 14, 14), (std::vector<int64_t>{131072, 150528, 256, 0, 256, 150528, 0, 0}));
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
