#include "sim/allocated_lower_bound.h"

#include <algorithm>

#include "sim/caching_allocator.h"

namespace headroom {

int64_t rounded_live_peak(const Program& program) {
  int64_t live = 0, peak = 0;
  for (const Event& e : program.events) {
    const int64_t bytes = program.buffers[static_cast<size_t>(e.buffer)].bytes;
    const int64_t rounded = bytes == 0 ? 0 : cuda_caching::round_size(bytes);
    if (e.kind == Event::Kind::Alloc) {
      live += rounded;
      peak = std::max(peak, live);
    } else if (e.kind == Event::Kind::Free) {
      live -= rounded;
    }
  }
  return peak;
}

}  // namespace headroom
