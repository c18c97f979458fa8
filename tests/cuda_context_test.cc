// The CUDA context of the measured stack (estimate/cuda_context.h): NVML's used memory of the
// process less the caching allocator's reserved bytes, at each phase mark of
// validation/measured_cuda.json (H100 80GB HBM3, driver 580.159.04, CUDA 13.0, cuDNN 9.19,
// PyTorch 2.11.0+cu130, lazy loading). In all 191 cases: 518 MiB at init (543,162,368 bytes);
// after the first forward 676-678 MiB without a convolution and 684-686 MiB with one; after the
// first backward 740-742 MiB and 758-762 MiB.
#include <gtest/gtest.h>

#include "estimate/cuda_context.h"
#include "estimate/estimate.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

constexpr int64_t kMiB = 1LL << 20;

TEST(CudaContext, GrowsWithWhatTheRunUses) {
  ContextUse use;
  EXPECT_EQ(cuda_context_bytes(use, true), 543162368);  // 518 MiB: context_nvml_process_bytes
  use.forward = true;
  EXPECT_EQ(cuda_context_bytes(use, true), 676 * kMiB);  // 518 + 158: mlp, BERT inference
  use.convolution = true;
  EXPECT_EQ(cuda_context_bytes(use, true), 686 * kMiB);  // + 10: the CNNs' inference
  use.backward = true;
  use.convolution_backward = true;
  EXPECT_EQ(cuda_context_bytes(use, true), 758 * kMiB);  // + 64 + 8: resnet18 training
  use.convolution = use.convolution_backward = false;
  EXPECT_EQ(cuda_context_bytes(use, true), 740 * kMiB);  // 676 + 64: mlp training
  EXPECT_EQ(cuda_context_bytes(use, false), kContextEagerBytes);  // eager: no growth modelled
}

EstimateOptions on_h100(const std::string& model, RunMode mode) {
  EstimateOptions o;
  o.model = model;
  o.batch = 1;
  o.mode = mode;
  o.optimizer = OptimizerKind::Sgd;
  o.device = "cuda";
  GpuOptions g;
  g.gpu = "NVIDIA H100 80GB HBM3";
  o.gpu = g;
  return o;
}

int64_t context_of(const EstimateOptions& o) {
  Result<Estimate> r = estimate(o);
  EXPECT_TRUE(r.ok()) << r.error();
  return r.ok() ? r.value().device->context_bytes : -1;
}

TEST(CudaContext, ReadFromTheProgram) {
  // The interpreter records what ran: linear and GELU ops (mlp), convolutions (resnet18), and
  // the backward of each in training.
  EXPECT_EQ(context_of(on_h100("mlp:layers=1,dim=4", RunMode::Inference)), 676 * kMiB);
  EXPECT_EQ(context_of(on_h100("mlp:layers=1,dim=4", RunMode::Training)), 740 * kMiB);
  EXPECT_EQ(context_of(on_h100("resnet18", RunMode::Inference)), 686 * kMiB);
  EXPECT_EQ(context_of(on_h100("resnet18", RunMode::Training)), 758 * kMiB);
}

TEST(CudaContext, OptionsOverrideIt) {
  EstimateOptions o = on_h100("mlp:layers=1,dim=4", RunMode::Training);
  o.gpu->context_bytes = 300 * kMiB;  // --cuda-context 300MiB
  EXPECT_EQ(context_of(o), 300 * kMiB);
  o.gpu->context_bytes.reset();
  o.gpu->lazy_module_loading = false;  // --eager-module-loading
  EXPECT_EQ(context_of(o), kContextEagerBytes);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
