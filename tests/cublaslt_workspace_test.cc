// The cuBLASLt workspace of PyTorch 2.x on CUDA (Interpreter::blas_workspaces): a Linear with a
// 1-D bias runs addmm through cublasLt, whose 1,048,576-byte workspace (CUBLASLT_WORKSPACE_SIZE's
// 1024 KiB, capped at the cuBLAS workspace) the thread's first such call allocates right after
// the handle's cuBLAS workspace and keeps (aten/src/ATen/cuda/CublasHandlePool.cpp,
// getCUDABlasLtWorkspace). Measured on the H100 (validation/cuda_traces.tar.xz, every case with
// a biased Linear): 33,554,432 then 1,048,576 at the first Linear; none in the Llama cases.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "estimate/estimate.h"
#include "tiny_mlp_options.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

constexpr int64_t kCublas = 33554432;  // Hopper's cuBLAS workspace
constexpr int64_t kLt = 1048576;

// The workspace buffers of a run in allocation order: "name bytes".
std::vector<std::string> workspaces(const Program& p) {
  std::vector<std::string> out;
  for (const Event& e : p.events) {
    const Buffer& b = p.buffers[static_cast<size_t>(e.buffer)];
    if (e.kind == Event::Kind::Alloc && b.category == Category::Workspaces && b.op == kNone) {
      out.push_back(b.name + " " + std::to_string(b.bytes));
    }
  }
  return out;
}

EstimateOptions on_h100(EstimateOptions o) {
  o.cublas_workspace_bytes.reset();
  GpuOptions g;
  g.gpu = "h100-sxm";
  o.gpu = g;
  return o;
}

TEST(CublasLtWorkspace, BiasedLinearKeepsOneMiBAfterTheCublasWorkspace) {
  // mlp:layers=1,dim=4 at batch 2, inference: W 64 + b 16 + x 32 + linear out 32 + GELU out 32 =
  // 176 bytes of tensors at the GELU, with both workspaces of the main thread kept:
  // 176 + 33,554,432 + 1,048,576 = 34,603,184.
  EstimateOptions o = on_h100(testing::tiny_mlp_sgd_options(1));
  o.mode = RunMode::Inference;
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(workspaces(r.value().program),
            (std::vector<std::string>{"cuBLAS workspace (main thread) 33554432", "cuBLASLt workspace (main thread) 1048576"}));
  EXPECT_EQ(r.value().peak_bytes, 176 + kCublas + kLt);
}

TEST(CublasLtWorkspace, BackwardRunsMmWithoutLt) {
  // Training: the backward's mm calls (beta 0) take the autograd thread's cuBLAS workspace only.
  // Exact peak = the tensors' 324 bytes + 2 x 33,554,432 + 1,048,576 (gpu_fit_test's run).
  Result<Estimate> r = estimate(on_h100(testing::tiny_mlp_sgd_options(1)));
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(workspaces(r.value().program),
            (std::vector<std::string>{"cuBLAS workspace (main thread) 33554432", "cuBLASLt workspace (main thread) 1048576",
                                      "cuBLAS workspace (autograd thread) 33554432"}));
  EXPECT_EQ(r.value().peak_bytes, 324 + 2 * kCublas + kLt);
}

TEST(CublasLtWorkspace, CheckpointReRunTakesTheAutogradThreadsOwn) {
  // mlp:layers=2 with ops 2..3 (the second linear and its GELU) checkpointed: the re-run in the
  // backward runs addmm on the autograd thread, whose handle gets its own Lt workspace (measured:
  // two kept 1 MiB blocks in every checkpointed mlp, bert and gpt2 case).
  EstimateOptions o = on_h100(testing::tiny_mlp_sgd_options(2));
  o.plan.checkpoints = {{2, 3}};
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(workspaces(r.value().program),
            (std::vector<std::string>{"cuBLAS workspace (main thread) 33554432", "cuBLASLt workspace (main thread) 1048576",
                                      "cuBLAS workspace (autograd thread) 33554432",
                                      "cuBLASLt workspace (autograd thread) 1048576"}));
}

TEST(CublasLtWorkspace, NoBiasNoLt) {
  // Llama's projections have no bias: addmm is not called (at::linear runs matmul), no Lt.
  EstimateOptions o = on_h100(testing::tiny_mlp_sgd_options(1));
  o.model = "llama:hidden=8,layers=1,heads=2,kv_heads=2,ffn=16,vocab=10";
  o.seq = 4;
  o.mode = RunMode::Inference;
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(workspaces(r.value().program), (std::vector<std::string>{"cuBLAS workspace (main thread) 33554432"}));
}

TEST(CublasLtWorkspace, CappedAtTheCublasWorkspace) {
  // getCUDABlasLtWorkspaceSize caps the Lt workspace at the cuBLAS one: CUBLAS_WORKSPACE_CONFIG=
  // :0:0 (--cublas-workspace 0) leaves neither, :256:2 (524,288 bytes) gives both 524,288.
  EstimateOptions o = on_h100(testing::tiny_mlp_sgd_options(1));
  o.mode = RunMode::Inference;
  o.cublas_workspace_bytes = 0;
  Result<Estimate> none = estimate(o);
  ASSERT_TRUE(none.ok()) << none.error();
  EXPECT_TRUE(workspaces(none.value().program).empty());
  EXPECT_EQ(none.value().peak_bytes, 176);
  o.cublas_workspace_bytes = 524288;
  Result<Estimate> small = estimate(o);
  ASSERT_TRUE(small.ok()) << small.error();
  EXPECT_EQ(workspaces(small.value().program),
            (std::vector<std::string>{"cuBLAS workspace (main thread) 524288", "cuBLASLt workspace (main thread) 524288"}));
}

TEST(CublasLtWorkspace, NoneOnTheCpu) {
  EstimateOptions o = testing::tiny_mlp_sgd_options(1);
  o.device = "cpu";
  o.cublas_workspace_bytes.reset();
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_TRUE(workspaces(r.value().program).empty());
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
