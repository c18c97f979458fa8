// The few behaviours in which PyTorch's CUDA and CPU kernels differ in memory, kept in one place.
// Each field says what it changes and where the fact comes from (see docs/memory-model.md).
#pragma once

#include <cstdint>
#include <string>

#include "ir/dtype.h"
#include "training/cuda_reduce.h"

namespace headroom {

// How many bytes a cuDNN convolution borrows as workspace (through the caching allocator, freed
// when the call returns). The real size depends on the algorithm cuDNN's heuristics pick.
enum class ConvWorkspace : uint8_t {
  None,        // memory-optimal algorithms (implicit GEMM): no workspace
  Activation,  // the default estimate: forward borrows the output's size, each backward pass the
               // size of the gradient it writes (a typical GEMM-based algorithm's need)
  Fixed,       // every call borrows `conv_workspace_bytes` (a cap, as cudnn's workspace limit)
  Cudnn9,      // cuDNN 9.19 under PyTorch 2.11 (fp32, NCHW): the operand copies of the engines its
               // heuristics pick, by the call's geometry (training/cudnn_workspace.h)
};

struct DeviceProfile {
  std::string name;  // "cuda" or "cpu"
  // CPU convolution (PyTorch 1.13, fp32, NCHW): oneDNN reorders source, weight and destination
  // into channel-blocked layouts (block `onednn_block`) on every call, forward and backward; the
  // thnn path (1x1 stride-1 convs with a small batch on one thread) allocates nothing extra.
  // See training/cpu_conv.h. The same flag selects the CPU transposed convolution
  // (slow_conv_transpose2d, training/cpu_conv_transpose.h).
  bool onednn_conv = false;
  int onednn_block = 16;  // 16 with AVX-512, 8 with AVX2
  int threads = 1;        // intra-op threads (torch.get_num_threads())
  // CPU batch norm: four per-channel fp32 temporaries in training (two in eval), and a backward
  // that allocates the input gradient twice (one copy dies at once).
  bool batch_norm_cpu_temporaries = false;
  // CPU layer norm backward: a 2 * threads * D fp32 temporary.
  bool layer_norm_backward_temp = false;
  // torch.optim in 1.13 wraps step() and zero_grad() in record_function: a 4-byte handle and a
  // 288-byte holder, allocated and freed on the CPU at the start of each call.
  bool optimizer_record_function = false;
  // A Python float passed to a tensor op becomes a 0-dim float64 CPU tensor (8 bytes), cast to
  // the op's dtype (4 bytes) while the op runs. On CUDA these live in host memory; on the CPU
  // they count. Modelled where they sit on a peak: Adam's division by the bias correction.
  bool python_scalar_tensors = false;
  // Training-mode dropout: CUDA runs the fused native_dropout and keeps a bool mask (1 byte per
  // element); the CPU path computes input * (bernoulli(1-p) / (1-p)) and keeps a mask of the
  // input's dtype.
  bool dropout_mask_same_dtype = false;
  // torch.optim's `step` state is torch.tensor(0.) (a CPU tensor) unless capturable or fused
  // (torch/optim/adam.py Adam._init_group): device memory only when the device is the CPU.
  bool optimizer_step_on_device = false;
  // torch.optim as of PyTorch 2.x (the CUDA profile, measured with 2.11): a rule's `foreach_v2`
  // program replaces `foreach` (training/optimizer_rules.h); 1.13's differ (the CPU profile).
  bool torch_optim_v2 = true;
  // Optimizer implementation when --foreach/--no-foreach is not given. PyTorch >= 2.0 picks
  // foreach for CUDA tensors; 1.13 (and the CPU) uses the single-tensor loop.
  bool default_foreach = true;
  // mean.dim's autograd node keeps `self` in PyTorch 1.13 (measured on the CPU: the input of a
  // mean lives until its backward); 2.x's derivatives.yaml entry, mean_backward(grad,
  // self.sym_sizes(), dim, self.sym_numel(), keepdim), keeps only sizes, so the input is freed
  // when nothing else holds it (measured on the H100 with 2.11: LlamaRMSNorm's pow(2) output
  // dies right after the mean). Also the 1x1 adaptive_avg_pool2d, which is that mean.
  bool mean_keeps_input = false;
  // nn.MultiheadAttention(need_weights=False) runs scaled_dot_product_attention (PyTorch >= 2.0,
  // torch/nn/functional.py multi_head_attention_forward; the eval fast path's
  // native_multi_head_attention in aten/src/ATen/native/transformers/cuda/attention.cu too);
  // 1.13 materializes the scores (bmm, softmax, bmm). The graph builders read it through
  // BuildConfig::mha_sdpa.
  bool mha_sdpa = false;
  // The autograd engine sums two gradients of one tensor into the first one in place when the
  // engine holds its last reference and it is dense (torch/csrc/autograd/input_buffer.cpp
  // accumulate / can_accumulate_inplace: old_var.add_(var)); otherwise old_var + var, a new
  // buffer. Measured on the H100 with 2.11 (no sum buffer at vit's and llama's residual
  // streams); the CPU 1.13 measurements match a new buffer for every sum.
  bool grad_accumulate_inplace = false;
  // A Linear without bias (mm, through at::matmul) computes its weight's gradient before its
  // input's in the backward; with a bias (addmm) the input's comes first. Measured on the H100
  // with 2.11 (llama's projections and lm_head: the weight gradient, then the input gradient);
  // 1.13 on the CPU makes the input's first either way.
  bool mm_weight_grad_first = false;
  // softmax's backward on CUDA (aten/src/ATen/native/cuda/SoftMax.cu softmax_backward_cuda_out)
  // computes `tmp = grad * output` after grad_input is made and frees it when it returns: one
  // temporary of the output's size per call (measured on the H100 with 2.11 in llama's, bert's
  // and gpt2's attention). The CPU kernel writes grad_input only; log_softmax has none on either.
  bool softmax_backward_temp = false;
  // Max pooling under no_grad still computes the int64 indices and drops them at once
  // (measured on CPU; CUDA's max_pool2d_with_indices does the same).
  bool max_pool_indices_without_grad = true;
  // torch.utils.checkpoint (reentrant, preserve_rng_state=True) stashes torch.get_rng_state(), a
  // CPU ByteTensor (5056 bytes: the mt19937 state plus the normal-distribution cache), in each
  // checkpoint's ctx, and fork_rng takes another while the segment is recomputed. The stashed
  // CUDA RNG state is a CPU tensor too, so none of it is device memory on CUDA.
  int64_t checkpoint_rng_state_bytes = 0;

  // cuBLAS workspace per (handle, stream), allocated through the caching allocator by the first
  // cuBLAS call of a thread and kept: 8,519,680 bytes before Hopper, 32 MiB on Hopper
  // (aten/src/ATen/cuda/CublasHandlePool.cpp). The forward runs on the main thread and the
  // backward on the autograd engine's device thread, so training holds two.
  int64_t cublas_workspace_bytes = 0;
  // cuBLASLt workspace per (handle, stream): PyTorch 2.x's addmm runs a Linear with a 1-D bias
  // through cublasLt (gemm_and_bias), whose workspace getCUDABlasLtWorkspace() allocates through
  // the caching allocator at the thread's first such call and keeps. CUBLASLT_WORKSPACE_SIZE's
  // default, 1024 KiB, capped at the cuBLAS workspace (getCUDABlasLtWorkspaceSize's unified
  // default), so --cublas-workspace 0 has none (aten/src/ATen/cuda/CublasHandlePool.cpp).
  // 0 on the CPU and on 1.13, whose Lt path allocated its workspace per call.
  int64_t cublaslt_workspace_bytes = 0;
  // The SM counts ATen's CUDA reductions split their inputs by (training/cuda_reduce.h): the
  // named GPU's, else the measured H100's. Unused on the CPU, whose reductions borrow nothing.
  ReduceDevice reduce_device = kMeasuredGpu;
  ConvWorkspace conv_workspace = ConvWorkspace::None;
  int64_t conv_workspace_bytes = 0;  // for ConvWorkspace::Fixed

  static DeviceProfile cuda();
  static DeviceProfile cpu();
};

}  // namespace headroom
