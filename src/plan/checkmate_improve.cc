// The local search of checkmate_improve.h: schedules described by their held sets; keeps, kicks
// and pair kicks.
#include "plan/checkmate_improve.h"
#include "util/index.h"

#include <algorithm>
#include <array>
#include <optional>

namespace headroom {
namespace {

// Past this many schedules evaluated in one search, no new kick starts (a count, not a clock, so
// the result is the same on every machine). The 65-node U-Net-like graph of the benchmark needs
// about 5,000.
constexpr int64_t kMaxEvaluations = 50'000;

struct ImproveCandidate {
  CheckmateSchedule s;  // S: the cleaned held sets; R: derived from them
  int64_t cost = 0;
  int64_t peak = 0;
};

class Search {
 public:
  Search(const CheckmateGraph& g, int64_t budget) : g_(g), budget_(budget), n_(at(g.T)) {}

  // The schedule of held sets H (cleaned of holds in vain), its cost and peak.
  ImproveCandidate evaluate(CheckmateMatrix H) const {
    ImproveCandidate c;
    c.s.R.assign(n_, std::vector<uint8_t>(n_, 0));
    for (;;) {
      derive_computed(H, &c.s.R);
      if (!drop_holds_in_vain(c.s.R, &H)) break;
    }
    c.s.S = std::move(H);
    const std::vector<uint8_t> none(n_, 0);
    for (int t = 0; t < g_.T; ++t) {
      const auto& r = c.s.R[at(t)];
      for (int i = 0; i <= t; ++i)
        if (r[at(i)]) c.cost += g_.cost[at(i)];
      c.peak = std::max(c.peak, checkmate_stage_peak(g_, t, r, c.s.S[at(t)],
                                                     t + 1 < g_.T ? c.s.S[at(t) + 1] : none));
    }
    return c;
  }

  bool fits(const ImproveCandidate& c) const { return c.peak <= budget_; }

  // keep: stage t recomputes i (i < t, not held); hold i instead from the last earlier stage that
  // has it through t. Nothing when there is no such recomputation.
  std::optional<ImproveCandidate> keep(const ImproveCandidate& from, int i, int t) const {
    if (i >= t || !from.s.R[at(t)][at(i)] || from.s.S[at(t)][at(i)]) return std::nullopt;
    int a = t - 1;
    while (a >= i && !from.s.R[at(a)][at(i)] && !from.s.S[at(a)][at(i)]) --a;
    if (a < i) return std::nullopt;  // stage i computes i, so this does not happen
    CheckmateMatrix H = from.s.S;
    for (int u = a + 1; u <= t; ++u) H[at(u)][at(i)] = 1;
    return evaluate(std::move(H));
  }

  // The held intervals (node, first stage, last stage), each maximal, in (node, stage) order.
  std::vector<std::array<int, 3>> held_intervals(const ImproveCandidate& c) const {
    std::vector<std::array<int, 3>> out;
    for (int i = 0; i < g_.T; ++i) {
      for (int t = i + 1; t < g_.T; ++t) {
        if (!c.s.S[at(t)][at(i)] || c.s.S[at(t) - 1][at(i)] == 1) continue;
        int q = t;
        while (q + 1 < g_.T && c.s.S[at(q) + 1][at(i)]) ++q;
        out.push_back({i, t, q});
      }
    }
    return out;
  }

  ImproveCandidate drop(const ImproveCandidate& from, const std::array<int, 3>& interval) const {
    CheckmateMatrix H = from.s.S;
    for (int t = interval[1]; t <= interval[2]; ++t) H[at(t)][at(interval[0])] = 0;
    return evaluate(std::move(H));
  }

 private:
  // R[t]: node t and, recursively, every input not held in t; plus, recursively, whatever H[t+1]
  // holds that H[t] does not (so that every hold is available).
  void derive_computed(const CheckmateMatrix& H, CheckmateMatrix* R) const {
    std::vector<int> stack;
    for (int t = 0; t < g_.T; ++t) {
      std::vector<uint8_t>& r = (*R)[at(t)];
      std::fill(r.begin(), r.end(), 0);
      const std::vector<uint8_t>& held = H[at(t)];
      auto compute = [&](int root) {
        // Iterative post-order: a node is marked once all its unheld inputs are.
        stack.assign(1, root);
        while (!stack.empty()) {
          const int v = stack.back();
          if (r[at(v)] || (v < t && held[at(v)])) {
            stack.pop_back();
            continue;
          }
          bool ready = true;
          for (int e : g_.in_edges[at(v)]) {
            const int u = g_.edges[at(e)].first;
            if (!r[at(u)] && !held[at(u)]) {
              stack.push_back(u);
              ready = false;
            }
          }
          if (ready) {
            r[at(v)] = 1;
            stack.pop_back();
          }
        }
      };
      compute(t);
      if (t + 1 < g_.T)
        for (int i = 0; i <= t; ++i)
          if (H[at(t) + 1][at(i)] && !held[at(i)] && !r[at(i)]) compute(i);
    }
  }

  // Drops every hold that no computed node of its stage reads and that is not held on, last
  // stage first (so a chain of such holds goes at once). True when one was dropped.
  bool drop_holds_in_vain(const CheckmateMatrix& R, CheckmateMatrix* H) const {
    bool dropped = false;
    for (int t = g_.T - 1; t >= 1; --t) {
      for (int i = 0; i < t; ++i) {
        if (!(*H)[at(t)][at(i)]) continue;
        if (t + 1 < g_.T && (*H)[at(t) + 1][at(i)]) continue;
        bool read = false;
        for (int j : g_.successors[at(i)])
          if (j <= t && R[at(t)][at(j)]) read = true;
        if (read) continue;
        (*H)[at(t)][at(i)] = 0;
        dropped = true;
      }
    }
    return dropped;
  }

  const CheckmateGraph& g_;
  int64_t budget_;
  size_t n_;
};

// The best keep, repeated while one fits and lowers the cost. A drop may leave the budget
// exceeded; keeps only raise memory, so such a candidate stays over it (the caller checks).
ImproveCandidate descend(const Search& search, const CheckmateGraph& g, ImproveCandidate now,
                  int64_t* evaluations) {
  for (;;) {
    std::optional<ImproveCandidate> best;
    for (int t = 1; t < g.T; ++t) {
      for (int i = 0; i < t; ++i) {
        std::optional<ImproveCandidate> c = search.keep(now, i, t);
        if (!c) continue;
        ++*evaluations;
        if (c->cost >= now.cost || !search.fits(*c)) continue;
        if (!best || c->cost < best->cost) best = std::move(c);
      }
    }
    if (!best) return now;
    now = std::move(*best);
  }
}

}  // namespace

CheckmateSchedule checkmate_improve(const CheckmateGraph& g, const CheckmateSchedule& start,
                                    int64_t budget, int64_t* pair_kick_evaluations) {
  const CheckmateEvaluation start_ev = checkmate_evaluate(g, start);
  if (!start_ev.invalid.empty() || start_ev.peak_bytes > budget) return start;
  const Search search(g, budget);
  ImproveCandidate now = search.evaluate(start.S);
  if (!search.fits(now) || now.cost > start_ev.cost) return start;
  int64_t evaluations = 0;
  now = descend(search, g, std::move(now), &evaluations);
  // Kicks: give up one held interval, descend again from there; the first that ends cheaper
  // than now is taken, and the kicks start over from it.
  int64_t unused = 0;
  int64_t& pair_left = pair_kick_evaluations ? *pair_kick_evaluations : unused;
  for (bool better = true; better && evaluations < kMaxEvaluations;) {
    better = false;
    const std::vector<std::array<int, 3>> intervals = search.held_intervals(now);
    for (const auto& interval : intervals) {
      if (evaluations >= kMaxEvaluations) break;
      ++evaluations;
      ImproveCandidate c = descend(search, g, search.drop(now, interval), &evaluations);
      if (search.fits(c) && c.cost < now.cost) {
        now = std::move(c);
        better = true;
        break;
      }
    }
    // Pair kicks, when no single one helps: give up two held intervals whose stages meet or
    // touch, then descend; each evaluation is taken from the caller's count.
    for (size_t x = 0; !better && pair_left > 0 && x < intervals.size(); ++x) {
      const ImproveCandidate first = search.drop(now, intervals[x]);
      for (size_t y = x + 1; !better && y < intervals.size(); ++y) {
        if (pair_left <= 0) break;
        const auto& a = intervals[x];
        const auto& b = intervals[y];
        if (b[1] > a[2] + 1 || a[1] > b[2] + 1) continue;
        int64_t spent = 1;
        ImproveCandidate c = descend(search, g, search.drop(first, b), &spent);
        pair_left -= spent;
        if (search.fits(c) && c.cost < now.cost) {
          now = std::move(c);
          better = true;
        }
      }
    }
  }
  const CheckmateEvaluation ev = checkmate_evaluate(g, now.s);
  if (!ev.invalid.empty() || ev.peak_bytes > budget || ev.cost > start_ev.cost) return start;
  return now.s;
}

}  // namespace headroom
