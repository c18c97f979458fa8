// The pieces of device_memory() (device_memory.h), for fit over many GPUs (fit_all.h), which
// replays a program once and reads the result for every GPU with room for it:
//   device_budget: what the options leave the allocator (the InputErrors of device_memory());
//   allocator_options: the caching allocator of that budget;
//   device_memory_from: the DeviceMemory of a replay on allocator_options(options, budget) that
//   ended with `stats`.
// device_memory(p, o) is device_memory_from(b, replay of p on allocator_options(o, b)) with
// b = device_budget(o, p.context_use).
#pragma once

#include <cstdint>
#include <string>

#include "estimate/device_memory.h"

namespace headroom {

struct DeviceBudget {
  std::string gpu;
  int64_t capacity_bytes = 0;
  int64_t context_bytes = 0;
  int64_t nccl_bytes = 0;
  int64_t allocator_bytes = 0;  // capacity less context and NCCL, at least 1 byte
  double margin = 0.0;
};
// `use`: what the run's program uses, which sets the CUDA context unless the options give one.
DeviceBudget device_budget(const GpuOptions& options, const ContextUse& use);
// The capacity less the margin: a run fits when context, NCCL and the reserved peak are within it.
int64_t usable_bytes(const DeviceBudget& budget);
CachingAllocatorOptions allocator_options(const GpuOptions& options, const DeviceBudget& budget);
DeviceMemory device_memory_from(const DeviceBudget& budget, const CachingAllocatorStats& stats);

}  // namespace headroom
