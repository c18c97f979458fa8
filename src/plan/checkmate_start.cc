// The greedy checkpoint-set start of checkmate_start.h.
#include "plan/checkmate_start.h"
#include "util/index.h"

#include <functional>

namespace headroom {
namespace {

struct Score {
  int64_t excess = 0;  // Σ over stages of the peak's excess over the budget
  int64_t cost = 0;
};

Score score(const CheckmateGraph& g, const CheckmateSchedule& s, int64_t budget) {
  Score out;
  const std::vector<uint8_t> none(at(g.T), 0);
  for (int t = 0; t < g.T; ++t) {
    const int64_t peak = checkmate_stage_peak(g, t, s.R[at(t)], s.S[at(t)], t + 1 < g.T ? s.S[at(t) + 1] : none);
    out.excess += std::max<int64_t>(0, peak - budget);
    for (int i = 0; i <= t; ++i)
      if (s.R[at(t)][at(i)]) out.cost += g.cost[at(i)];
  }
  return out;
}

}  // namespace

CheckmateSchedule checkmate_checkpoint_schedule(const CheckmateGraph& g, const std::vector<uint8_t>& checkpointed) {
  const size_t n = at(g.T);
  CheckmateSchedule s{CheckmateMatrix(n, std::vector<uint8_t>(n, 0)), CheckmateMatrix(n, std::vector<uint8_t>(n, 0))};
  // Stage t computes node t and, recursively, every input that is not an earlier checkpoint; the
  // checkpoints it reads are held, each from its own stage up to the last stage that reads it.
  std::vector<int> last_use(n, -1);
  for (int t = 0; t < g.T; ++t) {
    std::vector<uint8_t>& r = s.R[at(t)];
    std::vector<uint8_t> reads(n, 0);
    // Inputs before the node: recursion depth is at most T (<= kMaxCheckmateNodes).
    std::function<void(int)> compute = [&](int v) {
      if (r[at(v)] || reads[at(v)]) return;
      if (v < t && checkpointed[at(v)]) {
        reads[at(v)] = 1;
        last_use[at(v)] = t;
        return;
      }
      for (int e : g.in_edges[at(v)]) compute(g.edges[at(e)].first);
      r[at(v)] = 1;
    };
    compute(t);
  }
  for (int c = 0; c < g.T; ++c)
    for (int t = c + 1; t <= last_use[at(c)]; ++t) s.S[at(t)][at(c)] = 1;
  return s;
}

std::vector<uint8_t> checkmate_uniform_checkpoints(const CheckmateGraph& g, int every) {
  std::vector<uint8_t> out(at(g.T), 1);
  int forward = 0;
  for (int i = 0; i < g.T; ++i)
    if (g.kind[at(i)] == CheckmateNodeKind::Forward) out[at(i)] = forward++ % every == 0;
  return out;
}

std::optional<CheckmateSchedule> checkmate_greedy_start(const CheckmateGraph& g, int64_t budget) {
  std::vector<uint8_t> checkpointed(at(g.T), 1);
  CheckmateSchedule s = checkmate_checkpoint_schedule(g, checkpointed);
  Score now = score(g, s, budget);
  while (now.excess > 0) {
    // The removal with the largest drop in excess per unit of added cost; when none lowers the
    // excess (a removal can pay off only with others), the one that raises it least. Each step
    // removes a node, so this ends within T steps.
    int best = -1, least_bad = -1;
    double best_rate = 0;
    Score best_score, least_bad_score;
    for (int c = 0; c < g.T; ++c) {
      if (!checkpointed[at(c)] || g.successors[at(c)].empty()) continue;
      checkpointed[at(c)] = 0;
      const Score next = score(g, checkmate_checkpoint_schedule(g, checkpointed), budget);
      checkpointed[at(c)] = 1;
      if (least_bad < 0 || next.excess < least_bad_score.excess) {
        least_bad = c;
        least_bad_score = next;
      }
      if (next.excess >= now.excess) continue;
      const double rate = static_cast<double>(now.excess - next.excess) /
                          static_cast<double>(std::max<int64_t>(0, next.cost - now.cost) + 1);
      if (best < 0 || rate > best_rate) {
        best = c;
        best_rate = rate;
        best_score = next;
      }
    }
    if (best < 0) {
      best = least_bad;
      best_score = least_bad_score;
    }
    if (best < 0) return std::nullopt;
    checkpointed[at(best)] = 0;
    now = best_score;
  }
  // Put back every checkpoint that still fits and saves cost (a removal may have become
  // unnecessary after later ones).
  for (int c = 0; c < g.T; ++c) {
    if (checkpointed[at(c)]) continue;
    checkpointed[at(c)] = 1;
    const Score next = score(g, checkmate_checkpoint_schedule(g, checkpointed), budget);
    if (next.excess == 0 && next.cost < now.cost) now = next;
    else checkpointed[at(c)] = 0;
  }
  s = checkmate_checkpoint_schedule(g, checkpointed);
  const CheckmateEvaluation ev = checkmate_evaluate(g, s);
  if (!ev.invalid.empty() || ev.peak_bytes > budget) return std::nullopt;
  return s;
}

}  // namespace headroom
