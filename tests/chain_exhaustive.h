// Test oracle: the cheapest persistent schedule of a small chain by exhaustive search, with no
// knowledge of the dynamic program. It explores every sequence of chain operations the one
// schedule simulator accepts (apply_remat_op on the chain's graph, chain_simulate.h) whose in-use memory stays within the budget, as a shortest-path
// search (Dijkstra; op times are non-negative) over simulator states. Persistent: a stored
// checkpoint stays until its own backward, so
//   - Fn_i may not consume x̄_i (that would drop the state B_{i-1} needs), and
//   - Fn_i may not consume a plain x_i that is pinned: x_0, or an x_i some Fck_i or Fall_i has
//     already read while keeping it (it is then a checkpoint, freed only by B_i).
// Every other order of ops is allowed: several checkpoints per sweep, sweeps interleaved with
// other sweeps, any forward at any time. The state is the live set, the pins and the next
// backward, so the search is exhaustive over schedules of any length. Small chains only
// (L <= 6: the state fits 3L+7 bits).
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <unordered_map>
#include <vector>

#include "plan/chain_simulate.h"

namespace headroom::testing {

struct ExhaustiveResult {
  bool feasible = false;
  double makespan_ms = 0;
  std::vector<ChainOp> schedule;
  size_t states = 0;  // states settled
};

inline ExhaustiveResult exhaustive_persistent(const Chain& chain, int64_t budget) {
  const int L = chain.length();
  const RematGraph graph = graph_of_chain(chain);
  const std::vector<std::vector<int>> consumers = remat_consumers(graph);
  struct Node {
    RematState state;
    std::vector<uint8_t> pinned;  // plain x_i that is a checkpoint
  };
  auto key_of = [L](const Node& n) {
    uint64_t k = 0;
    for (int i = 0; i <= L; ++i) k = k * 2 + n.state.plain[static_cast<size_t>(i)];
    for (int i = 1; i <= L; ++i) k = k * 2 + n.state.bar[static_cast<size_t>(i)];
    for (int i = 0; i <= L; ++i) k = k * 2 + n.pinned[static_cast<size_t>(i)];
    return k * 16 + static_cast<uint64_t>(n.state.next_backward + 1);
  };
  struct Entry {
    double dist;
    uint64_t key;
    bool operator>(const Entry& o) const {
      return dist > o.dist || (dist == o.dist && key > o.key);
    }
  };
  struct Visit {
    Node node;
    double dist;
    uint64_t parent;
    ChainOp op;
    bool settled = false;
  };
  std::unordered_map<uint64_t, Visit> seen;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;

  Node start{RematState::initial(graph), std::vector<uint8_t>(static_cast<size_t>(L) + 1, 0)};
  start.pinned[0] = 1;
  if (start.state.live > budget) return {};
  const uint64_t start_key = key_of(start);
  seen.emplace(start_key, Visit{start, 0.0, start_key, {}});
  queue.push({0.0, start_key});

  std::vector<ChainOp> moves;
  for (int i = 0; i < L; ++i) {
    moves.push_back({ChainOpKind::Fck, i});
    moves.push_back({ChainOpKind::Fn, i});
    moves.push_back({ChainOpKind::Fall, i});
    moves.push_back({ChainOpKind::B, i});
  }
  moves.push_back({ChainOpKind::Loss, 0});

  ExhaustiveResult result;
  while (!queue.empty()) {
    const Entry e = queue.top();
    queue.pop();
    Visit& v = seen.at(e.key);
    if (v.settled || e.dist > v.dist) continue;
    v.settled = true;
    ++result.states;
    const Node node = v.node;
    if (check_remat_finished(graph, node.state).empty()) {
      result.feasible = true;
      result.makespan_ms = v.dist;
      for (uint64_t k = e.key; k != start_key;) {
        const Visit& p = seen.at(k);
        result.schedule.insert(result.schedule.begin(), p.op);
        k = p.parent;
      }
      return result;
    }
    for (ChainOp op : moves) {
      const auto i = static_cast<size_t>(op.stage);
      if (op.kind == ChainOpKind::Fn) {
        if (!node.state.plain[i] && node.state.bar[i]) continue;  // would drop x̄_i
        if (node.state.plain[i] && node.pinned[i]) continue;      // would drop a checkpoint
      }
      Node next = node;
      int64_t in_use = 0;
      double t = 0;
      if (!apply_remat_op(graph, consumers, lower_chain_op(op), next.state, &in_use, &t).empty() ||
          in_use > budget)
        continue;
      if ((op.kind == ChainOpKind::Fck || op.kind == ChainOpKind::Fall) && node.state.plain[i])
        next.pinned[i] = 1;
      for (size_t k = 0; k < next.pinned.size(); ++k) next.pinned[k] &= next.state.plain[k];
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
