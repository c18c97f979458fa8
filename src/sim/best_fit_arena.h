// BestFitArena: one linear address space in which every buffer keeps the offset it was given until
// it is freed (nothing moves, nothing is cached per size). A new buffer goes into the smallest gap
// between live buffers that holds it (ties: lowest offset); when no gap does, it goes after the
// highest live buffer. This is TFLite's SimpleMemoryArena::Allocate and the best-fit idea of XLA's
// heap simulator, driven online in program order (no look-ahead, no sorting by size).
//
//   offset ->  0      64     192    256
//   time 0     [a:64 ][b:128 ][c:64 ]        footprint 256
//   time 1     [     ][b:128 ][c:64 ]        -a: gap [0, 64)
//   time 2     [d:48 ][b:128 ][c:64 ]        +d:48 fits the 64-byte gap (offset 0)
//
// Invariant: live buffers never overlap; every offset is a multiple of `alignment`.
// footprint() is the arena's high-water mark (the highest end offset ever used): an arena is
// allocated once at its final size.
#pragma once

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "sim/heap_algorithm.h"

namespace headroom {

struct BestFitArenaOptions {
  // Every offset is a multiple of this many bytes (TFLite's kDefaultTensorAlignment is 64).
  // Sizes are not rounded. Must be >= 1 (InputError otherwise).
  int64_t alignment = 64;
};

struct ArenaPlacement {
  BufferId buffer = -1;
  int64_t offset = 0;
  int64_t bytes = 0;
};

class BestFitArena final : public HeapAlgorithm {
 public:
  explicit BestFitArena(BestFitArenaOptions options = {});

  // REQUIRES: bytes >= 0, id not live. A zero-byte buffer gets offset 0 and occupies nothing.
  void alloc(BufferId id, int64_t bytes) override;
  // REQUIRES: id live.
  void free(BufferId id) override;
  int64_t footprint() const override { return high_water_; }

  // The offset given to `id` (its last placement). REQUIRES: id was allocated.
  int64_t offset(BufferId id) const;
  // Live buffers, ordered by offset.
  std::vector<ArenaPlacement> live() const;

 private:
  BestFitArenaOptions options_;
  std::set<std::pair<int64_t, BufferId>> live_;  // (offset, buffer) of live, non-empty buffers
  std::vector<ArenaPlacement> placements_;       // by BufferId
  std::vector<bool> is_live_;
  int64_t high_water_ = 0;
};

}  // namespace headroom
