// ExactHeap: the lower bound every allocator model is compared with. Each buffer takes exactly its
// bytes, nothing is rounded, cached or fragmented, so the footprint is the live sum (what
// torch.cuda.memory_allocated would report with a byte-exact allocator).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/heap_algorithm.h"

namespace headroom {

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
