// What a run occupies on a real GPU: the CUDA context, NCCL when asked, and what PyTorch's caching
// allocator reserves when it replays the program's allocations (rounding, segments, caching,
// fragmentation; cuBLAS and cuDNN workspaces are allocations in that stream). The device total
// is what nvidia-smi shows for the process: context + NCCL + reserved peak.
//
// Defaults and their sources (docs/gpu.md):
//   CUDA context: with lazy module loading (CUDA >= 11.7, PyTorch's default since 1.13), the
//   measured H100 / CUDA 13.0 / PyTorch 2.11 stack's context for what the program uses
//   (estimate/cuda_context.h); 616 MiB with eager loading (pytorch/pytorch#86509);
//   --cuda-context overrides. kContextLazyBytes is an older published figure (CUDA 11.7).
//   NCCL: 512 MiB when asked (communicators take hundreds of MB to GBs; --nccl-memory overrides).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "schedule/program.h"
#include "sim/caching_allocator.h"
#include "sim/device_catalog.h"

namespace headroom {

inline constexpr int64_t kContextLazyBytes = 254LL << 20;
inline constexpr int64_t kContextEagerBytes = 616LL << 20;
inline constexpr int64_t kDefaultNcclBytes = 512LL << 20;

struct GpuOptions {
  std::string gpu;                      // catalog name; "" with gpu_memory for any other device
  std::optional<int64_t> gpu_memory;    // overrides the catalog's memory
  std::optional<int64_t> context_bytes; // overrides the CUDA context estimate
  bool lazy_module_loading = true;
  bool nccl = false;
  std::optional<int64_t> nccl_bytes;
  CachingAllocatorOptions allocator;    // capacity_bytes is set from the device
  double margin = 0.0;                  // fraction of device memory kept free (fit's --margin)
};

struct DeviceMemory {
  std::string gpu;               // catalog name, or "custom"
  int64_t capacity_bytes = 0;    // device memory
  int64_t context_bytes = 0;
  int64_t nccl_bytes = 0;
  int64_t allocated_peak_bytes = 0;  // rounded block sizes (torch.cuda.max_memory_allocated)
  int64_t reserved_peak_bytes = 0;   // segments (torch.cuda.max_memory_reserved)
  int64_t fragmentation_bytes = 0;   // reserved - allocated at the reserved peak
  int32_t segments = 0;              // at the end of the run
  int64_t device_total_bytes = 0;    // context + nccl + reserved peak
  int64_t usable_bytes = 0;          // capacity less the margin
  bool fits = false;
  int64_t headroom_bytes = 0;        // usable - total (negative: missing)
  bool allocator_oom = false;        // the allocator ran out even after freeing its cache
};

// The spec of a GPU option set: nullptr when only --gpu-memory was given.
const GpuSpec* gpu_spec(const GpuOptions& options);
// The cuBLAS workspace per handle of that GPU: 32 MiB on Hopper and later, 8,519,680 before.
int64_t cublas_workspace_for(const GpuSpec* spec);
// The SM counts of that GPU (the measured H100's without a spec, as for --gpu-memory alone).
ReduceDevice reduce_device_for(const GpuSpec* spec);

// Replays `p` on the caching allocator, with the context of what `p` uses. InputError for an
// unknown GPU or bad options.
DeviceMemory device_memory(const Program& p, const GpuOptions& options);

}  // namespace headroom
