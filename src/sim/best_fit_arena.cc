#include "sim/best_fit_arena.h"

#include <fmt/format.h>

#include <limits>

#include "util/checked.h"
#include "util/error.h"

namespace headroom {

namespace {
int64_t align_offset_up(int64_t v, int64_t a) {
  return checked_mul((checked_add(v, a - 1, "arena offset")) / a, a, "arena offset");
}
}  // namespace

BestFitArena::BestFitArena(BestFitArenaOptions options) : options_(options) {
  if (options_.alignment < 1) {
    throw InputError(fmt::format("arena alignment must be >= 1 byte, got {}", options_.alignment));
  }
}

void BestFitArena::alloc(BufferId id, int64_t bytes) {
  HEADROOM_CHECK(id >= 0 && bytes >= 0, "allocation of a negative size or id");
  if (static_cast<size_t>(id) >= placements_.size()) {
    placements_.resize(static_cast<size_t>(id) + 1);
    is_live_.resize(static_cast<size_t>(id) + 1, false);
  }
  HEADROOM_CHECK(!is_live_[static_cast<size_t>(id)], "buffer allocated twice");
  is_live_[static_cast<size_t>(id)] = true;
  ArenaPlacement& p = placements_[static_cast<size_t>(id)];
  p = {id, 0, bytes};
  if (bytes == 0) return;

  // Walk the live buffers by offset; `cursor` is the first aligned offset after the previous one.
  int64_t cursor = 0;
  int64_t best = -1;
  int64_t best_gap = std::numeric_limits<int64_t>::max();
  for (const auto& [off, other] : live_) {
    const int64_t gap = off - cursor;
    if (gap >= bytes && gap < best_gap) {
      best = cursor;
      best_gap = gap;
    }
    const ArenaPlacement& o = placements_[static_cast<size_t>(other)];
    cursor = std::max(cursor,
                      align_offset_up(checked_add(o.offset, o.bytes, "arena offset"), options_.alignment));
  }
  if (best < 0) best = cursor;  // after the highest live buffer
  p.offset = best;
  live_.insert({best, id});
  high_water_ = std::max(high_water_, checked_add(best, bytes, "arena size"));
}

void BestFitArena::free(BufferId id) {
  HEADROOM_CHECK(
      id >= 0 && static_cast<size_t>(id) < is_live_.size() && is_live_[static_cast<size_t>(id)],
      "free of a buffer that is not live");
  is_live_[static_cast<size_t>(id)] = false;
  const ArenaPlacement& p = placements_[static_cast<size_t>(id)];
  if (p.bytes > 0) live_.erase({p.offset, id});
}

int64_t BestFitArena::offset(BufferId id) const {
  HEADROOM_CHECK(id >= 0 && static_cast<size_t>(id) < placements_.size(), "unknown buffer");
  return placements_[static_cast<size_t>(id)].offset;
}

std::vector<ArenaPlacement> BestFitArena::live() const {
  std::vector<ArenaPlacement> out;
  for (const auto& [off, id] : live_) out.push_back(placements_[static_cast<size_t>(id)]);
  return out;
}

}  // namespace headroom
