// `estimate --gpu` and `fit`: the caching allocator fed by the estimate's own events, and the
// search for the largest batch checked against a plain scan.
#include <gtest/gtest.h>

#include "estimate/estimate.h"
#include "estimate/fit.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

EstimateOptions tiny(RunMode mode) {
  EstimateOptions o;
  o.model = "mlp:layers=1,dim=4";
  o.batch = 2;
  o.mode = mode;
  o.optimizer = OptimizerKind::Sgd;
  o.foreach = false;
  o.cublas_workspace_bytes = 0;
  GpuOptions g;
  g.gpu_memory = 1LL << 30;
  o.gpu = g;
  return o;
}

TEST(GpuMemory, TinyInferenceOnOneSmallSegment) {
  // Every tensor of mlp:layers=1,dim=4 is under 1 MiB: each request rounds up to 512 bytes in the
  // small pool, and the first one reserves one 2 MiB segment that serves them all.
  // Peak: W, b, x, linear out, GELU out alive = 5 blocks = 2,560 allocated bytes.
  // Device total = the measured stack's context after a forward, 518 + 158 = 676 MiB
  // (708,837,376; estimate/cuda_context.h) + 2,097,152 = 710,934,528.
  Result<Estimate> r = estimate(tiny(RunMode::Inference));
  ASSERT_TRUE(r.ok()) << r.error();
  const DeviceMemory& d = *r.value().device;
  EXPECT_EQ(d.allocated_peak_bytes, 5 * 512);
  EXPECT_EQ(d.reserved_peak_bytes, 2097152);
  EXPECT_EQ(d.context_bytes, 708837376);
  EXPECT_EQ(d.device_total_bytes, 710934528);
  EXPECT_TRUE(d.fits);
  EXPECT_EQ(d.headroom_bytes, (1LL << 30) - 710934528);
}

TEST(GpuMemory, DoesNotFitSaysByHowMuch) {
  // The same run on a 200 MiB device: the context alone (676 MiB) is too much.
  EstimateOptions o = tiny(RunMode::Inference);
  o.gpu->gpu_memory = 200LL << 20;
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  const DeviceMemory& d = *r.value().device;
  EXPECT_FALSE(d.fits);
  EXPECT_EQ(d.headroom_bytes, (200LL << 20) - 710934528);
}

TEST(GpuMemory, CatalogGpuSetsCublasWorkspace) {
  // On an H100 the cuBLAS workspace is 32 MiB per handle; training holds two (forward and
  // autograd threads), and the forward's biased Linear adds the main thread's 1,048,576-byte
  // cuBLASLt workspace: exact peak = the tensors' 324 bytes + 2 x 33,554,432 + 1,048,576.
  EstimateOptions o = tiny(RunMode::Training);
  o.cublas_workspace_bytes.reset();
  o.gpu->gpu_memory.reset();
  o.gpu->gpu = "h100-sxm";
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r.value().peak_bytes, 324 + 2 * 33554432 + 1048576);
}

TEST(Fit, FindsABoundaryAtOrAfterTheFirstOneOfAPlainScan) {
  // resnet18 training on a 3 GiB device with a 5% margin. The caching allocator's segment sizes
  // make "fits" non-monotonic near the limit (here batch 81 does not fit but 90 does), so the
  // answer is a boundary: max fits and max + 1 does not, found by bisection; it is never below
  // the first boundary a plain scan from batch 1 meets, and the report flags the sizes below it
  // that do not fit.
  FitOptions f;
  f.estimate.model = "resnet18";
  f.estimate.optimizer = OptimizerKind::Sgd;
  GpuOptions g;
  g.gpu_memory = 3LL << 30;
  g.margin = 0.05;
  f.estimate.gpu = g;
  Result<FitResult> r = fit(f);
  ASSERT_TRUE(r.ok()) << r.error();
  const FitResult& fr = r.value();
  int64_t first_boundary = 0;
  for (int64_t b = 1;; ++b) {
    EstimateOptions e = f.estimate;
    e.batch = b;
    Result<Estimate> x = estimate(e);
    ASSERT_TRUE(x.ok());
    if (!x.value().device->fits) break;
    first_boundary = b;
  }
  EXPECT_GE(fr.max_value, first_boundary);
  ASSERT_TRUE(fr.at_max && fr.next);
  EXPECT_TRUE(fr.at_max->device.fits);
  EXPECT_FALSE(fr.next->device.fits);
  EXPECT_EQ(fr.next->value, fr.max_value + 1);
  if (fr.max_value > first_boundary && fr.max_value - first_boundary <= kFitCheckBelow) {
    EXPECT_EQ(fr.fails_below, first_boundary + 1);
  }
}

TEST(Fit, NothingFitsReportsTheSmallestFootprint) {
  FitOptions f;
  f.estimate.model = "resnet18";
  GpuOptions g;
  g.gpu_memory = 300LL << 20;
  f.estimate.gpu = g;
  Result<FitResult> r = fit(f);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r.value().max_value, 0);
  ASSERT_TRUE(r.value().next);
  EXPECT_EQ(r.value().next->value, 1);
  EXPECT_GT(r.value().next->device.device_total_bytes, 300LL << 20);
}

TEST(Fit, SequenceSearchStopsAtTheModelsPositions) {
  // gpt2 inference on an 80 GB device fits every sequence length up to n_positions = 1024;
  // 1025 is not a valid size, so the search ends there and says why.
  FitOptions f;
  f.estimate.model = "gpt2";
  f.estimate.mode = RunMode::Inference;
  f.axis = FitAxis::Seq;
  GpuOptions g;
  g.gpu = "a100-80gb";
  f.estimate.gpu = g;
  Result<FitResult> r = fit(f);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r.value().max_value, 1024);
  EXPECT_FALSE(r.value().next.has_value());
  EXPECT_NE(r.value().limit_reason.find("1025"), std::string::npos) << r.value().limit_reason;
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
