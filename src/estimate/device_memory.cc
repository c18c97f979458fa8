#include "estimate/device_memory.h"

#include "sim/simulate.h"
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

DeviceMemory device_memory(const Program& p, const GpuOptions& o) {
  if (o.margin < 0.0 || o.margin > 0.9) throw InputError("margin must be between 0% and 90%");
  const GpuSpec* spec = gpu_spec(o);
  DeviceMemory d;
  d.gpu = spec ? spec->name : "custom";
  d.capacity_bytes = o.gpu_memory ? *o.gpu_memory : spec->memory_bytes;
  if (d.capacity_bytes <= 0) throw InputError("GPU memory must be positive");
  d.context_bytes = o.context_bytes ? *o.context_bytes : (o.lazy_module_loading ? kContextLazyBytes : kContextEagerBytes);
  d.nccl_bytes = o.nccl ? o.nccl_bytes.value_or(kDefaultNcclBytes) : 0;
  CachingAllocatorOptions ao = o.allocator;
  int64_t room = d.capacity_bytes - d.context_bytes - d.nccl_bytes;
  ao.capacity_bytes = room > 0 ? room : 1;
  CachingAllocator alloc(ao);
  simulate(p, &alloc);
  const CachingAllocatorStats& s = alloc.stats();
  d.allocated_peak_bytes = s.peak_allocated_bytes;
  d.reserved_peak_bytes = s.peak_reserved_bytes;
  d.fragmentation_bytes = s.fragmentation_at_reserved_peak;
  d.segments = s.segments;
  d.allocator_oom = s.oom;
  d.device_total_bytes = d.context_bytes + d.nccl_bytes + d.reserved_peak_bytes;
  d.usable_bytes = static_cast<int64_t>(static_cast<double>(d.capacity_bytes) * (1.0 - o.margin));
  d.headroom_bytes = d.usable_bytes - d.device_total_bytes;
  d.fits = !d.allocator_oom && d.headroom_bytes >= 0;
  return d;
}

}  // namespace headroom
