#include "estimate/device_memory.h"

#include "estimate/cuda_context.h"
#include "estimate/device_budget.h"
#include "sim/replay.h"
#include "util/error.h"

namespace headroom {

const GpuSpec* gpu_spec(const GpuOptions& o) {
  if (o.gpu.empty()) {
    if (!o.gpu_memory) throw InputError("no GPU given: use --gpu NAME or --gpu-memory SIZE");
    return nullptr;
  }
  return &DeviceCatalog::builtin().find(o.gpu);
}

int64_t cublas_workspace_for(const GpuSpec* spec) {
  bool hopper_or_later = spec && (spec->architecture == "hopper" || spec->architecture == "blackwell");
  return hopper_or_later ? 32LL << 20 : 4096 * 1024 * 2 + 16 * 1024 * 8;
}

ReduceDevice reduce_device_for(const GpuSpec* spec) {
  if (!spec) return kMeasuredGpu;
  return ReduceDevice{spec->multiprocessors, spec->max_threads_per_multiprocessor};
}

DeviceBudget device_budget(const GpuOptions& o, const ContextUse& use) {
  if (o.margin < 0.0 || o.margin > 0.9) throw InputError("margin must be between 0% and 90%");
  const GpuSpec* spec = gpu_spec(o);
  DeviceBudget b;
  b.gpu = spec ? spec->name : "custom";
  b.capacity_bytes = o.gpu_memory ? *o.gpu_memory : spec->memory_bytes;
  if (b.capacity_bytes <= 0) throw InputError("GPU memory must be positive");
  b.context_bytes = o.context_bytes ? *o.context_bytes : cuda_context_bytes(use, o.lazy_module_loading);
  b.nccl_bytes = o.nccl ? o.nccl_bytes.value_or(kDefaultNcclBytes) : 0;
  int64_t room = b.capacity_bytes - b.context_bytes - b.nccl_bytes;
  b.allocator_bytes = room > 0 ? room : 1;
  b.margin = o.margin;
  return b;
}

int64_t usable_bytes(const DeviceBudget& b) {
  return static_cast<int64_t>(static_cast<double>(b.capacity_bytes) * (1.0 - b.margin));
}

CachingAllocatorOptions allocator_options(const GpuOptions& o, const DeviceBudget& b) {
  CachingAllocatorOptions ao = o.allocator;
  ao.capacity_bytes = b.allocator_bytes;
  return ao;
}

DeviceMemory device_memory_from(const DeviceBudget& b, const CachingAllocatorStats& s) {
  DeviceMemory d;
  d.gpu = b.gpu;
  d.capacity_bytes = b.capacity_bytes;
  d.context_bytes = b.context_bytes;
  d.nccl_bytes = b.nccl_bytes;
  d.allocated_peak_bytes = s.peak_allocated_bytes;
  d.reserved_peak_bytes = s.peak_reserved_bytes;
  d.fragmentation_bytes = s.fragmentation_at_reserved_peak;
  d.segments = s.segments;
  d.allocator_oom = s.oom;
  d.device_total_bytes = d.context_bytes + d.nccl_bytes + d.reserved_peak_bytes;
  d.usable_bytes = usable_bytes(b);
  d.headroom_bytes = d.usable_bytes - d.device_total_bytes;
  d.fits = !d.allocator_oom && d.headroom_bytes >= 0;
  return d;
}

DeviceMemory device_memory(const Program& p, const GpuOptions& o) {
  const DeviceBudget b = device_budget(o, p.context_use);
  CachingAllocator alloc(allocator_options(o, b));
  replay_allocations(p, alloc);
  return device_memory_from(b, alloc.stats());
}

}  // namespace headroom
