// The workspaces cuBLAS and cuBLASLt keep per (handle, stream): one handle per thread, so the
// main thread (forward) and the autograd engine's device thread (backward, checkpoint re-runs
// included) each create their own at their first call, and neither is ever freed
// (aten/src/ATen/cuda/CublasHandlePool.cpp: setWorkspaceForHandle, getCUDABlasLtWorkspace).
#include "schedule/interpreter.h"

#include <algorithm>

namespace headroom::schedule_detail {

void Interpreter::cublas_workspace(BufferId& slot, int64_t bytes, const char* name) {
  if (slot != kNone || bytes <= 0) return;
  slot = new_buffer(bytes, Category::Workspaces, name, kNone);
  alloc(slot);
  ref(slot);
}

bool Interpreter::uses_cublaslt(const Op& op) const {
  // at::linear (aten/src/ATen/native/Linear.cpp) calls addmm(bias, x, W^T) for a 2-D input and,
  // through _flatten_nd_linear, for a contiguous input of any rank with a 1-D bias; GPT-2's
  // Conv1D calls addmm itself. addmm_out_cuda_impl (aten/src/ATen/native/cuda/Blas.cpp,
  // isInputCompliesAddmmCudaLt) takes the Lt path when beta is 1, the bias is contiguous and 1-D
  // (or squeezes to 1-D) with the output's width, the dtype is fp64/fp32/fp16/bf16 and the
  // weight has more than one row and column. The measured H100 runs take it with a one-row
  // input too (mlp/infer/b1). A strided input of rank 3 or more runs matmul + add_ instead.
  if (op.kind != OpKind::Linear || op.inputs.size() < 3 || op.outputs.empty()) return false;
  const Tensor& x = g_.tensor(op.inputs[0]);
  if (x.shape.size() != 2 && !x.contiguous) return false;
  const Tensor& weight = g_.tensor(op.inputs[1]);
  const Tensor& bias = g_.tensor(op.inputs[2]);
  const Tensor& out = g_.tensor(op.outputs[0]);
  if (weight.shape.size() != 2 || weight.shape[0] <= 1 || weight.shape[1] <= 1 || out.shape.empty()) return false;
  const int64_t width = out.shape.back();
  if (bias.shape.empty() || bias.shape.back() != width) return false;
  for (size_t i = 0; i + 1 < bias.shape.size(); ++i) {
    if (bias.shape[i] != 1) return false;  // a 2-D bias is copied into the output: plain cuBLAS
  }
  const DType t = weight.dtype;
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64;
}

void Interpreter::blas_workspaces(const Op& op) {
  if (!uses_cublas(op)) return;
  BufferId& blas = in_backward_ ? backward_workspace_ : forward_workspace_;
  BufferId& lt = in_backward_ ? backward_lt_workspace_ : forward_lt_workspace_;
  // getCUDABlasLtWorkspace() takes the thread's handle first, so the cuBLAS workspace comes
  // before the Lt one.
  cublas_workspace(blas, o_.device.cublas_workspace_bytes,
                   in_backward_ ? "cuBLAS workspace (autograd thread)" : "cuBLAS workspace (main thread)");
  if (!uses_cublaslt(op)) return;
  cublas_workspace(lt, std::min(o_.device.cublaslt_workspace_bytes, o_.device.cublas_workspace_bytes),
                   in_backward_ ? "cuBLASLt workspace (autograd thread)" : "cuBLASLt workspace (main thread)");
}

}  // namespace headroom::schedule_detail
