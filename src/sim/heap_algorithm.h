// The placement side of the heap simulation (XLA's HeapAlgorithm): the driver in simulate.h feeds
// it Alloc/Free in program order; the algorithm decides where bytes go and how much device memory
// that holds. ExactHeap is the lower bound (no rounding, no fragmentation: what
// torch.cuda.max_memory_allocated reports); allocator models such as PyTorch's caching allocator
// implement the same interface.
#pragma once

#include <cstdint>
#include <vector>

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

class ExactHeap final : public HeapAlgorithm {
 public:
  void alloc(BufferId id, int64_t bytes) override {
    if (static_cast<size_t>(id) >= sizes_.size()) sizes_.resize(static_cast<size_t>(id) + 1, 0);
    sizes_[static_cast<size_t>(id)] = bytes;
    live_ += bytes;
  }
  void free(BufferId id) override { live_ -= sizes_.at(static_cast<size_t>(id)); }
  int64_t footprint() const override { return live_; }

 private:
  std::vector<int64_t> sizes_;
  int64_t live_ = 0;
};

}  // namespace headroom
