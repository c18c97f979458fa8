// The optimum of Checkmate's model (plan/checkmate_graph.h) by exhaustive search, for tests: a
// shortest path over stages whose state is the held set S[t]; every computed set R[t] (node t and
// any subset of the earlier ones) and every next held set S[t+1] (a subset of what is held or
// computed in t) is tried and evaluated with checkmate_stage_peak. It knows nothing of the integer
// programs. Exponential: for T <= 8.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "plan/checkmate_graph.h"

namespace headroom::testing {

struct CheckmateExhaustive {
  bool feasible = false;
  int64_t cost = 0;
};

inline std::vector<uint8_t> checkmate_mask_bits(uint32_t mask, int T) {
  std::vector<uint8_t> v(static_cast<size_t>(T), 0);
  for (int i = 0; i < T; ++i) v[static_cast<size_t>(i)] = (mask >> i) & 1U;
  return v;
}

inline CheckmateExhaustive checkmate_exhaustive(const CheckmateGraph& g, int64_t budget) {
  const int T = g.T;
  std::map<uint32_t, int64_t> layer{{0U, 0}};  // held set -> least cost so far
  for (int t = 0; t < T && !layer.empty(); ++t) {
    std::map<uint32_t, int64_t> next;
    const uint32_t own = 1U << t;
    for (const auto& [held, so_far] : layer) {
      for (uint32_t earlier = 0; earlier < own; ++earlier) {
        const uint32_t computed = earlier | own;
        bool inputs = true;
        for (auto [u, v] : g.edges)
          if (((computed >> v) & 1U) && !(((computed | held) >> u) & 1U)) inputs = false;
        if (!inputs) continue;
        int64_t cost = so_far;
        for (int i = 0; i <= t; ++i)
          if ((computed >> i) & 1U) cost += g.cost[static_cast<size_t>(i)];
        const std::vector<uint8_t> r = checkmate_mask_bits(computed, T), h = checkmate_mask_bits(held, T);
        const uint32_t can_hold = t + 1 < T ? (computed | held) & ((own << 1) - 1) : 0U;
        // Every subset of can_hold, can_hold itself included.
        for (uint32_t keep = can_hold;; keep = (keep - 1) & can_hold) {
          if (checkmate_stage_peak(g, t, r, h, checkmate_mask_bits(keep, T)) <= budget) {
            auto it = next.find(keep);
            if (it == next.end() || cost < it->second) next[keep] = cost;
          }
          if (keep == 0) break;
        }
      }
    }
    layer = std::move(next);
  }
  auto it = layer.find(0U);
  if (it == layer.end()) return {};
  return {true, it->second};
}

}  // namespace headroom::testing
