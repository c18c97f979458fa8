// The placement side of the heap simulation (XLA's HeapAlgorithm): the driver in simulate.h feeds
// it Alloc/Free in program order; the algorithm decides where bytes go and how much device memory
// that holds. Implementations:
//  - ExactHeap (exact_heap.h): the lower bound (no rounding, no fragmentation: what
//    torch.cuda.max_memory_allocated reports up to PyTorch's 512-byte rounding);
//  - BestFitArena (best_fit_arena.h): one linear arena, best-fit gaps (TFLite / XLA style);
//  - CachingAllocator (caching_allocator.h): PyTorch's CUDA caching allocator.
#pragma once

#include <cstdint>

#include "schedule/program.h"

namespace headroom {

class HeapAlgorithm {
 public:
  virtual ~HeapAlgorithm() = default;
  virtual void alloc(BufferId id, int64_t bytes) = 0;
  virtual void free(BufferId id) = 0;
  // Bytes the heap holds from the device right now (for ExactHeap: the live bytes).
  virtual int64_t footprint() const = 0;
};

}  // namespace headroom

// Kept here so that code including only heap_algorithm.h still sees ExactHeap.
#include "sim/exact_heap.h"  // IWYU pragma: export
