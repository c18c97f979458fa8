#include "schedule/megatron_buffer.h"

#include <algorithm>
#include <numeric>

#include "util/checked.h"
#include "util/error.h"

namespace headroom {

namespace {

int64_t round_up(int64_t value, int64_t divisor) {
  return checked_mul((value + divisor - 1) / divisor, divisor, "Megatron buffer elements");
}

}  // namespace

MegatronBufferLayout megatron_buffer_layout(const std::vector<int64_t>& numels, int data_parallel, bool distributed_optimizer) {
  HEADROOM_CHECK(data_parallel >= 1, "data-parallel size must be positive");
  MegatronBufferLayout out;
  int64_t end = 0;
  for (int64_t n : numels) {
    // pad_param_start: round up to a multiple of 64 elements.
    const int64_t start = distributed_optimizer ? round_up(end, 64) : end;
    out.start.push_back(start);
    end = checked_add(start, n, "Megatron buffer elements");
  }
  // pad_bucket_end: a multiple of lcm(dp, 128), so that every rank's range has the same size.
  out.elements = distributed_optimizer ? round_up(end, std::lcm(static_cast<int64_t>(data_parallel), int64_t{128})) : end;
  return out;
}

std::vector<int64_t> megatron_rank_pieces(const MegatronBufferLayout& layout, const std::vector<int64_t>& numels, int data_parallel, int rank) {
  HEADROOM_CHECK(layout.start.size() == numels.size() && rank >= 0 && rank < data_parallel, "rank pieces of a layout");
  const int64_t size = layout.elements / data_parallel;  // max_gbuf_range_size
  const int64_t lo = static_cast<int64_t>(rank) * size, hi = lo + size;
  std::vector<int64_t> pieces(numels.size(), 0);
  for (size_t i = 0; i < numels.size(); ++i) {
    const int64_t s = std::max(lo, layout.start[i]), e = std::min(hi, layout.start[i] + numels[i]);
    if (e > s) pieces[i] = e - s;
  }
  return pieces;
}

int megatron_most_loaded_rank(const std::vector<MegatronBufferLayout>& layouts, const std::vector<std::vector<int64_t>>& numels, int data_parallel) {
  HEADROOM_CHECK(layouts.size() == numels.size(), "one numel list per layout");
  // Padding per rank: every gap between parameters, and the bucket's end, spread over the ranges
  // it spans (O(parameters + ranks) per buffer).
  std::vector<int64_t> padding(static_cast<size_t>(data_parallel), 0);
  for (size_t b = 0; b < layouts.size(); ++b) {
    const MegatronBufferLayout& l = layouts[b];
    const int64_t size = l.elements / data_parallel;
    if (size == 0) continue;
    auto add_gap = [&](int64_t from, int64_t to) {
      while (from < to) {
        const int64_t r = from / size, range_end = std::min(to, (r + 1) * size);
        padding[static_cast<size_t>(r)] += range_end - from;
        from = range_end;
      }
    };
    int64_t end = 0;
    for (size_t i = 0; i < numels[b].size(); ++i) {
      add_gap(end, l.start[i]);
      end = l.start[i] + numels[b][i];
    }
    add_gap(end, l.elements);
  }
  return static_cast<int>(std::min_element(padding.begin(), padding.end()) - padding.begin());
}

}  // namespace headroom
