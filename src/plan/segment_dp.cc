#include "plan/segment_dp.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/error.h"

namespace headroom {
namespace {

int64_t slots_of(int64_t bytes, int64_t unit) { return bytes <= 0 ? 0 : (bytes + unit - 1) / unit; }

}  // namespace

SegmentPlan solve_segments(const std::vector<SegmentStage>& stages, int64_t budget_bytes, int slots) {
  HEADROOM_CHECK(budget_bytes >= 0 && slots >= 1, "segment DP needs a budget and slots");
  SegmentPlan out;
  const int n = static_cast<int>(stages.size());
  if (n == 0) {
    out.feasible = true;
    return out;
  }
  const int64_t unit = std::max<int64_t>(1, budget_bytes / slots);
  const int S = static_cast<int>(std::min<int64_t>(slots, budget_bytes / unit));
  std::vector<int64_t> kept(static_cast<size_t>(n)), boundary(static_cast<size_t>(n));
  std::vector<double> prefix_ms(static_cast<size_t>(n) + 1, 0);
  std::vector<int64_t> prefix_kept(static_cast<size_t>(n) + 1, 0);
  for (int i = 0; i < n; ++i) {
    kept[static_cast<size_t>(i)] = slots_of(stages[static_cast<size_t>(i)].kept_bytes, unit);
    boundary[static_cast<size_t>(i)] = slots_of(stages[static_cast<size_t>(i)].boundary_bytes, unit);
    prefix_ms[static_cast<size_t>(i) + 1] = prefix_ms[static_cast<size_t>(i)] + stages[static_cast<size_t>(i)].forward_ms;
    prefix_kept[static_cast<size_t>(i) + 1] = prefix_kept[static_cast<size_t>(i)] + kept[static_cast<size_t>(i)];
  }
  const double inf = std::numeric_limits<double>::infinity();
  // cost[i][m]: least recompute time with stages < i decided and m slots kept by them.
  const size_t width = static_cast<size_t>(S) + 1;
  std::vector<double> cost((static_cast<size_t>(n) + 1) * width, inf);
  std::vector<int> from_stage((static_cast<size_t>(n) + 1) * width, -1);  // segment start (or i-1 stored)
  std::vector<int> from_mem((static_cast<size_t>(n) + 1) * width, -1);
  std::vector<char> checkpointed((static_cast<size_t>(n) + 1) * width, 0);
  auto at = [&](int i, int64_t m) { return static_cast<size_t>(i) * width + static_cast<size_t>(m); };
  cost[at(0, 0)] = 0;
  for (int i = 0; i < n; ++i) {
    for (int64_t m = 0; m <= S; ++m) {
      const double c = cost[at(i, m)];
      if (c == inf) continue;
      // Store stage i.
      const int64_t stored = m + kept[static_cast<size_t>(i)];
      if (stored <= S && c < cost[at(i + 1, stored)]) {
        cost[at(i + 1, stored)] = c;
        from_stage[at(i + 1, stored)] = i;
        from_mem[at(i + 1, stored)] = static_cast<int>(m);
        checkpointed[at(i + 1, stored)] = 0;
      }
      // Checkpoint stages i..j: keep the input; the backward re-holds the segment's activations.
      const int64_t after = m + boundary[static_cast<size_t>(i)];
      if (after > S) continue;
      for (int j = i; j < n; ++j) {
        const int64_t full = prefix_kept[static_cast<size_t>(j) + 1] - prefix_kept[static_cast<size_t>(i)];
        if (m + full > S) break;
        const double nc = c + prefix_ms[static_cast<size_t>(j) + 1] - prefix_ms[static_cast<size_t>(i)];
        if (nc < cost[at(j + 1, after)]) {
          cost[at(j + 1, after)] = nc;
          from_stage[at(j + 1, after)] = i;
          from_mem[at(j + 1, after)] = static_cast<int>(m);
          checkpointed[at(j + 1, after)] = 1;
        }
      }
    }
  }
  int64_t best_m = -1;
  for (int64_t m = 0; m <= S; ++m) {
    if (cost[at(n, m)] < inf && (best_m < 0 || cost[at(n, m)] < cost[at(n, best_m)])) best_m = m;
  }
  if (best_m < 0) return out;
  out.feasible = true;
  out.recompute_ms = cost[at(n, best_m)];
  int i = n;
  int64_t m = best_m;
  while (i > 0) {
    const size_t k = at(i, m);
    if (checkpointed[k]) out.segments.push_back({from_stage[k], i - 1});
    const int prev_i = from_stage[k];
    m = from_mem[k];
    i = prev_i;
  }
  std::reverse(out.segments.begin(), out.segments.end());
  return out;
}

std::vector<SegmentRange> sqrt_segments(int stage_count) {
  std::vector<SegmentRange> out;
  if (stage_count < 2) return out;
  const int count = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(stage_count))));
  for (int k = 0; k + 1 < count; ++k) {
    const int first = stage_count * k / count;
    const int last = stage_count * (k + 1) / count - 1;
    if (last >= first) out.push_back({first, last});
  }
  return out;
}

}  // namespace headroom
