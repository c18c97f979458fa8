// What the CUDA context of a PyTorch process occupies on the device (NVML's used memory less
// what the caching allocator reserves), as a function of what the run uses.
//
// With lazy module loading (CUDA >= 11.7, PyTorch's default) the context starts at what
// cudaDeviceSynchronize creates and grows as kernels and libraries are first used: the first
// forward loads PyTorch's kernels and creates the main thread's cuBLAS handle; a convolution loads
// cuDNN; backward() creates the autograd engine's device thread, its cuBLAS handle and the
// backward kernels; a convolution's backward, cuDNN's backward kernels. Each growth is a constant
// of the measured stack (docs/gpu.md "CUDA context"): NVIDIA H100 80GB HBM3, driver 580.159.04,
// CUDA 13.0, cuDNN 9.19, PyTorch 2.11.0+cu130 (validation/measured_cuda.json, NVML per phase).
// Eager loading keeps the older published kContextEagerBytes (616 MiB, pytorch/pytorch#86509),
// without growth.
// Invariant: the context only grows with what a run uses (each term >= 0).
#pragma once

#include <cstdint>

#include "estimate/device_memory.h"
#include "schedule/program.h"

namespace headroom {

// The lazy context's terms on the measured stack (MiB multiples: NVML counts 2 MiB pages).
inline constexpr int64_t kContextInitBytes = 518LL << 20;              // 543,162,368 at init
inline constexpr int64_t kContextForwardBytes = 158LL << 20;           // first forward, cuBLAS handle
inline constexpr int64_t kContextConvolutionBytes = 10LL << 20;        // cuDNN, forward
inline constexpr int64_t kContextBackwardBytes = 64LL << 20;           // autograd thread, backward kernels
inline constexpr int64_t kContextConvolutionBackwardBytes = 8LL << 20;  // cuDNN, backward

// The context of a run that uses `use`, with lazy or eager module loading.
int64_t cuda_context_bytes(const ContextUse& use, bool lazy_module_loading);

}  // namespace headroom
