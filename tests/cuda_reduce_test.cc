// The staging buffer of ATen's CUDA reductions (training/cuda_reduce.h): setReduceConfig's split
// worked by hand for the shapes the H100 traces show (PyTorch 2.11, 132 SMs, 2048 threads per
// SM), and where it shows up in the op rules (a bias gradient's sum over rows).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "estimate/estimate.h"
#include "ir/builder.h"
#include "kernel_event_sizes.h"
#include "training/cuda_reduce.h"
#include "training/device_profile.h"
#include "training/op_rules.h"
#include "op_named.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

CudaReduceStaging rows(int64_t outputs, int64_t inputs, int64_t sms = 132) {
  CudaReduction r;
  r.num_outputs = outputs;
  r.inputs_per_output = inputs;
  return cuda_reduce_staging(r, ReduceDevice{sms, 2048});
}

TEST(CudaReduce, BiasGradientOfAThousandRowsSplitsAcrossBlocks) {
  // sum over 1024 rows of [1024, 1024] fp32 (the mlp's Linear(1024, 1024) at batch 1024): 4
  // outputs per thread (1024 % 4 == 0), dim0 = 256 -> 128 (512 / 4 threads), dim1 = 1024 ->
  // 128; block 32 x 4 (128 threads); block.x splits the outputs (step_output 32); 1024 values
  // >= 4 * 16, so block.y splits the inputs: 256 values per thread. grid.x = 256 / 32 = 8 <=
  // 132 * (2048 / 128) = 2,112, and 256 >= 256: ctas_per_output = max(min(264, 16), 1) = 16.
  // Buffer 4 * 1024 * 16 * (32 * 4) = 8,388,608; semaphores 4 * 8 = 32 (measured: the
  // ckpt-nested-tail cases' 16 reductions).
  CudaReduceStaging s = rows(1024, 1024);
  EXPECT_EQ(s.buffer_bytes, 8'388'608);
  EXPECT_EQ(s.semaphore_bytes, 32);
}

TEST(CudaReduce, VitAndBertBiasGradients) {
  // vit_b_16 at batch 16: 16 x 197 = 3,152 rows; 788 values per thread after block.y.
  //  - C = 768 (out_proj, mlp.3): grid.x = 192 / 32 = 6, ctas = max(min(352, 50), 4) = 50:
  //    4 * 768 * 50 * 128 = 19,660,800 and 24 bytes;
  //  - C = 2304 (in_proj's bias, added in place): grid.x = 18, ctas = max(min(118, 50), 4) = 50:
  //    4 * 2304 * 50 * 128 = 58,982,400 and 72;
  //  - C = 3072 (mlp.0): grid.x = 24, ctas 50: 78,643,200 and 96.
  // bert-base at batch 8, sequence 128: 1,024 rows of C = 768: ctas = max(min(352, 16), 1) = 16:
  // 4 * 768 * 16 * 128 = 6,291,456 and 24. All measured on the H100 with 2.11.
  EXPECT_EQ(rows(768, 3152).buffer_bytes, 19'660'800);
  EXPECT_EQ(rows(768, 3152).semaphore_bytes, 24);
  EXPECT_EQ(rows(2304, 3152).buffer_bytes, 58'982'400);
  EXPECT_EQ(rows(2304, 3152).semaphore_bytes, 72);
  EXPECT_EQ(rows(3072, 3152).buffer_bytes, 78'643'200);
  EXPECT_EQ(rows(3072, 3152).semaphore_bytes, 96);
  EXPECT_EQ(rows(768, 1024).buffer_bytes, 6'291'456);
}

TEST(CudaReduce, ShortReductionsStayInOneBlock) {
  // 1,000 rows: 250 values per thread after block.y, under 256: no global reduce. 16 rows
  // (vit's pos_embedding gradient over the batch): block.y does not split either.
  EXPECT_EQ(rows(1024, 1000).buffer_bytes, 0);
  EXPECT_EQ(rows(1024, 1000).semaphore_bytes, 0);
  EXPECT_EQ(rows(197 * 768, 16).buffer_bytes, 0);
}

TEST(CudaReduce, TheSplitFollowsTheSmCount) {
  // C = 16,384, 4,096 rows: grid.x = 4,096 / 32 = 128, 1,024 values per thread (ctas2 = 64).
  // H100 (132 SMs): ctas1 = ceil(2,112 / 128) = 17 -> 4 * 16,384 * 17 * 128 = 142,606,336.
  // A100 (108 SMs): ctas1 = ceil(1,728 / 128) = 14 -> 4 * 16,384 * 14 * 128 = 117,440,512.
  EXPECT_EQ(rows(16384, 4096).buffer_bytes, 142'606'336);
  EXPECT_EQ(rows(16384, 4096, 108).buffer_bytes, 117'440'512);
}

TEST(CudaReduce, ReducingEverythingStagesOnePartialPerBlock) {
  // sum of 131,072 values into one: the reduction runs on the innermost dimension, loads
  // vectorized (dim0 131,072 / 4 = 32,768 -> 512 threads in x, 1 in y); 256 values per thread;
  // target 132 * (2048 / 512) = 528, grid.x = 1: ctas = max(min(528, 16), 1) = 16; block.x
  // reduces, so the buffer is one accumulator per block: 4 * 1 * 16 = 64; semaphores 4.
  CudaReduction r;
  r.num_outputs = 1;
  r.inputs_per_output = 131072;
  CudaReduceStaging s = cuda_reduce_staging(r, kMeasuredGpu);
  EXPECT_EQ(s.buffer_bytes, 64);
  EXPECT_EQ(s.semaphore_bytes, 4);
}

using testing::op_named;

TEST(CudaReduce, BiasGradientsBorrowTheStagingOnCudaOnly) {
  // Linear(1024, 1024) on x [1024, 1024] fp32 (4,194,304 bytes), as in the mlp cases at batch
  // 1024. addmm's backward on CUDA: grad_input (4,194,304), grad_weight (4,194,304), the bias
  // gradient (4,096), then the reduction's staging (8,388,608) and semaphores (32), both
  // returned at once (measured: +4,096 +8,388,608 +32 -32 -8,388,608). The CPU profile has none.
  GraphBuilder b("mlp");
  TensorId x = b.parameter("x", {1024, 1024});
  TensorId h = b.linear("fc", x, 1024, /*bias=*/true);
  b.add("shift", h, b.parameter("beta", {1024}));
  Graph g = b.finish();
  DeviceProfile cpu = DeviceProfile::cpu(), cuda = DeviceProfile::cuda();
  auto back = [&](const DeviceProfile& d, const std::string& op, std::vector<bool> need) {
    BackwardPlan p = backward_plan(RuleContext{g, op_named(g, op), d, true, true, std::move(need)}, true);
    return allocs(p);
  };
  EXPECT_EQ(back(cuda, "fc", {true, true, true}),
            (std::vector<int64_t>{4'194'304, 4'194'304, 4'096, 8'388'608, 32, 0, 0}));
  EXPECT_EQ(back(cpu, "fc", {true, true, true}), (std::vector<int64_t>{4'194'304, 4'194'304, 4'096}));
  // x + beta: the sum over rows of beta's broadcast (sum_to) is the same reduction; x's
  // gradient is the incoming one.
  EXPECT_EQ(back(cuda, "shift", {true, true}), (std::vector<int64_t>{4'096, 8'388'608, 32, 0, 0}));
  EXPECT_EQ(back(cpu, "shift", {true, true}), (std::vector<int64_t>{4'096}));
}

TEST(CudaReduce, ANamedGpuStagesWithItsOwnSmCounts) {
  // The mlp (16 x Linear(1024, 1024) + GELU, Adam) at batch 16,384: each bias gradient sums
  // 16,384 rows of C = 1,024. grid.x = 8 (as at batch 1,024 above), 4,096 values per thread
  // (ctas2 = 256, ctas3 = 16), 128 threads per block:
  //  - H100-SXM, and no GPU named (the measured H100): ctas1 = ceil(132 * 16 / 8) = 264 -> 256:
  //    4 * 1,024 * 256 * 128 = 134,217,728 and 32 bytes of semaphores;
  //  - A100 (108 SMs): ctas1 = ceil(1,728 / 8) = 216: 4 * 1,024 * 216 * 128 = 113,246,208;
  //  - T4 (40 SMs of 1,024 threads): ctas1 = ceil(40 * 8 / 8) = 40: 20,971,520.
  // The backward's peak holds the first bias gradient's staging on the H100 and the A100, so
  // their peaks differ by 134,217,728 - 113,246,208 = 20,971,520. On the T4 the staging is no
  // longer the largest transient: the peak moves to the next op, with no temporary.
  EstimateOptions o;
  o.model = "mlp";
  o.batch = 16384;
  o.optimizer = OptimizerKind::Adam;
  o.cublas_workspace_bytes = 0;  // the same program on every GPU but for the staging
  auto on = [&](const std::string& gpu) {
    EstimateOptions e = o;
    if (!gpu.empty()) {
      e.gpu = GpuOptions{};
      e.gpu->gpu = gpu;
    }
    Result<Estimate> r = estimate(e);
    EXPECT_TRUE(r.ok()) << r.error();
    return r.ok() ? r.value() : Estimate{};
  };
  const size_t temporaries = static_cast<size_t>(Category::Temporaries);
  const Estimate h100 = on("H100-SXM"), a100 = on("A100-SXM4-80GB"), t4 = on("T4"), none = on("");
  EXPECT_EQ(h100.breakdown_at_peak[temporaries], 134'217'728 + 32);
  EXPECT_EQ(a100.breakdown_at_peak[temporaries], 113'246'208 + 32);
  EXPECT_EQ(t4.breakdown_at_peak[temporaries], 0);
  EXPECT_EQ(h100.peak_bytes - a100.peak_bytes, 20'971'520);
  EXPECT_LT(t4.peak_bytes, a100.peak_bytes);
  EXPECT_EQ(none.peak_bytes, h100.peak_bytes);
  EXPECT_EQ(none.breakdown_at_peak, h100.breakdown_at_peak);
  CudaReduction bias;
  bias.num_outputs = 1024;
  bias.inputs_per_output = 16384;
  EXPECT_EQ(cuda_reduce_staging(bias, ReduceDevice{40, 1024}).buffer_bytes, 20'971'520);
}

TEST(CudaReduce, AProgramListsTheReductionsItStaged) {
  // One bias gradient per Linear: the mlp's 16, with their shapes (Program::cuda_reductions,
  // what fit --gpu all compares across SM counts). The CPU stages nothing and lists nothing.
  EstimateOptions o;
  o.model = "mlp";
  o.batch = 64;
  o.keep_program = true;
  Result<Estimate> cuda = estimate(o);
  ASSERT_TRUE(cuda.ok()) << cuda.error();
  ASSERT_EQ(cuda.value().program.cuda_reductions.size(), 16u);
  for (const CudaReduction& r : cuda.value().program.cuda_reductions) {
    EXPECT_EQ(r.num_outputs, 1024);
    EXPECT_EQ(r.inputs_per_output, 64);
    EXPECT_FALSE(r.innermost);
  }
  o.device = "cpu";
  Result<Estimate> cpu = estimate(o);
  ASSERT_TRUE(cpu.ok()) << cpu.error();
  EXPECT_TRUE(cpu.value().program.cuda_reductions.empty());
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
