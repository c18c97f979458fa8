// Test oracle: the cheapest graph schedule by exhaustive search, with no knowledge of the integer
// program. A shortest-path search (Dijkstra; op times are non-negative) over the states of the
// simulator (remat_simulate.h) over every op sequence it accepts within the budget, with the
// schedule space of docs/ilp.md ("The schedule space"):
//   - between two backwards (a stage), forwards run in increasing stage index;
//   - an activation live when a stage's first op runs (after any Free right after the previous
//     backward) is not recomputed in that stage, even if freed meanwhile;
// and, with `persistent`, also
//   - x̄_a is never freed before B_{a-1} (no Free of it, no Fn consuming it), and
//   - a plain x_a live at the first op of a stage, or read by a Fall, is never freed by Free or
//     Fn (it stays until the last backward that reads it frees it): the chain model's Fall never
//     frees its input.
// With stage_rule = false the first two rules are dropped: every op order (the general space).
// Moves: Fck, Fall, Free, Loss, B (Fn is Fck followed by Frees, same memory). Small graphs only
// (L <= 6).
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <unordered_map>
#include <vector>

#include "plan/remat_simulate.h"

namespace headroom::testing {

struct RematExhaustive {
  bool feasible = false;
  double makespan_ms = 0;
  std::vector<RematOp> schedule;
  size_t states = 0;
};

inline RematExhaustive exhaustive_remat(const RematGraph& g, int64_t budget, bool persistent,
                                        bool stage_rule = true) {
  const int L = g.length();
  const auto consumers = remat_consumers(g);
  struct Node {
    RematState state;
    std::vector<uint8_t> start;  // live when the current stage's first op ran
    std::vector<uint8_t> pinned;  // persistent: a plain input read by a Fall
    int last_forward = -1;       // in the current stage
    bool after_backward = false;  // no forward or backward since the last backward
  };
  auto key_of = [L](const Node& n) {
    uint64_t k = 0;
    for (int i = 0; i <= L; ++i) k = k * 2 + n.state.plain[static_cast<size_t>(i)];
    for (int i = 0; i <= L; ++i) k = k * 2 + n.state.bar[static_cast<size_t>(i)];
    for (int i = 0; i <= L; ++i) k = k * 2 + n.start[static_cast<size_t>(i)];
    for (int i = 0; i <= L; ++i) k = k * 2 + n.pinned[static_cast<size_t>(i)];
    k = k * 16 + static_cast<uint64_t>(n.last_forward + 1);
    k = k * 2 + (n.after_backward ? 1 : 0);
    return k * 16 + static_cast<uint64_t>(n.state.next_backward + 1);
  };
  struct Entry {
    double dist;
    uint64_t key;
    bool operator>(const Entry& o) const { return dist > o.dist || (dist == o.dist && key > o.key); }
  };
  struct Visit {
    Node node;
    double dist;
    uint64_t parent;
    RematOp op;
    bool settled = false;
  };
  std::unordered_map<uint64_t, Visit> seen;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
  const std::vector<uint8_t> none(static_cast<size_t>(L) + 1, 0);
  Node start{RematState::initial(g), none, none, -1, false};
  start.start[0] = 1;
  if (start.state.live > budget) return {};
  const uint64_t start_key = key_of(start);
  seen.emplace(start_key, Visit{start, 0.0, start_key, {}});
  queue.push({0.0, start_key});
  std::vector<RematOp> moves;
  for (int i = 0; i < L; ++i) {
    moves.push_back({RematOpKind::Fck, i});
    moves.push_back({RematOpKind::Fall, i});
    moves.push_back({RematOpKind::B, i});
  }
  for (int k = 0; k <= L; ++k) moves.push_back({RematOpKind::Free, k});
  moves.push_back({RematOpKind::Loss, 0});

  RematExhaustive result;
  while (!queue.empty()) {
    const Entry e = queue.top();
    queue.pop();
    Visit& v = seen.at(e.key);
    if (v.settled || e.dist > v.dist) continue;
    v.settled = true;
    ++result.states;
    const Node node = v.node;
    if (check_remat_finished(g, node.state).empty()) {
      result.feasible = true;
      result.makespan_ms = v.dist;
      for (uint64_t k = e.key; k != start_key;) {
        const Visit& p = seen.at(k);
        result.schedule.insert(result.schedule.begin(), p.op);
        k = p.parent;
      }
      return result;
    }
    for (RematOp op : moves) {
      Node next = node;
      const bool is_free = op.kind == RematOpKind::Free;
      if (!is_free && next.after_backward) {
        // The stage's first op: what is live now was kept across the backward.
        for (int k = 0; k <= L; ++k) next.start[static_cast<size_t>(k)] = next.state.has(k);
        next.after_backward = false;
      }
      const auto a = static_cast<size_t>(op.index);
      if (is_free && persistent) {
        if (next.state.bar[a]) continue;                      // x̄ stays until its backward
        // A plain activation kept into the current stage (x_0 from the start) stays; one created
        // in it may be dropped, up to right after the stage's backward.
        if (next.state.plain[a] && next.start[a]) continue;
        if (next.state.plain[a] && next.pinned[a]) continue;  // read by a Fall: a checkpoint
      }
      if (op.kind == RematOpKind::Fck || op.kind == RematOpKind::Fall) {
        if (stage_rule) {
          if (op.index <= next.last_forward) continue;
          if (next.start[a + 1]) continue;  // present at the stage start: not recomputed
        }
        next.last_forward = op.index;
      }
      int64_t in_use = 0;
      double t = 0;
      if (!apply_remat_op(g, consumers, op, next.state, &in_use, &t).empty() || in_use > budget)
        continue;
      if (persistent && op.kind == RematOpKind::Fall)
        for (int k : g.preds[a]) next.pinned[static_cast<size_t>(k)] |= next.state.plain[static_cast<size_t>(k)];
      for (int k = 0; k <= L; ++k) next.pinned[static_cast<size_t>(k)] &= next.state.plain[static_cast<size_t>(k)];
      if (op.kind == RematOpKind::Loss || op.kind == RematOpKind::B) {
        next.after_backward = true;
        next.last_forward = -1;
      }
      // Only live buffers matter in `start` (a freed one may not come back in the stage).
      if (!stage_rule)
        for (int k = 0; k <= L; ++k) next.start[static_cast<size_t>(k)] &= next.state.has(k);
      const uint64_t k = key_of(next);
      const double d = v.dist + t;
      auto it = seen.find(k);
      if (it == seen.end()) {
        seen.emplace(k, Visit{next, d, e.key, op});
        queue.push({d, k});
      } else if (!it->second.settled && d < it->second.dist) {
        it->second.dist = d;
        it->second.parent = e.key;
        it->second.op = op;
        queue.push({d, k});
      }
    }
  }
  return result;
}

}  // namespace headroom::testing
