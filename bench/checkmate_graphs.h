// Training graphs in Checkmate's form (plan/checkmate_graph.h) for the benchmark and the tests:
// a forward DAG, the loss, and one backward node per forward node, built as parasj/checkmate's
// gen_linear_graph builds its linear graphs (checkmate/core/utils/graph.py: node i+1 reads node i
// through the whole forward-loss-backward sequence, and backward node 2n - i also reads forward
// node i), generalized to skip edges: the backward of forward node i reads forward node i and
// the backward of every forward reader of i (or the loss, for the last forward node). Costs and
// sizes are drawn from a fixed seed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "plan/checkmate_graph.h"

namespace headroom::bench {

enum class CheckmateShape { Linear, ResNet, UNet };

// preds[i]: the forward nodes that forward node i reads (node 0 reads nothing).
inline std::vector<std::vector<int>> checkmate_forward_preds(CheckmateShape shape, int n) {
  std::vector<std::vector<int>> preds(static_cast<size_t>(n));
  for (int i = 1; i < n; ++i) {
    std::vector<int>& p = preds[static_cast<size_t>(i)];
    // ResNet: blocks of three nodes whose last one adds the block input (node i - 3).
    if (shape == CheckmateShape::ResNet && i >= 3 && i % 3 == 0) p.push_back(i - 3);
    // U-Net: the second half of the nodes also reads its mirror in the first half.
    if (shape == CheckmateShape::UNet && i > n / 2 && n - 1 - i < i - 1) p.push_back(n - 1 - i);
    p.push_back(i - 1);
  }
  return preds;
}

// T = 2n + 1 nodes: forward 0..n-1, the loss n, backward n+1..2n (the backward of forward node i
// is 2n - i). Costs 1-20 (a backward twice its forward), sizes 1-16 MiB (a gradient the size of
// its activation; the loss 1 MiB).
inline CheckmateGraph checkmate_training_graph(CheckmateShape shape, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> cost(1, 10), mib(1, 16);
  const std::vector<std::vector<int>> preds = checkmate_forward_preds(shape, n);
  CheckmateGraph g;
  g.T = 2 * n + 1;
  g.cost.assign(static_cast<size_t>(g.T), 0);
  g.size_bytes.assign(static_cast<size_t>(g.T), 0);
  g.kind.assign(static_cast<size_t>(g.T), CheckmateNodeKind::Forward);
  auto bwd = [&](int i) { return 2 * n - i; };
  std::vector<std::vector<int>> readers(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    for (int p : preds[static_cast<size_t>(i)]) readers[static_cast<size_t>(p)].push_back(i);
  for (int i = 0; i < n; ++i) {
    const int64_t c = cost(rng), s = mib(rng) << 20;
    g.cost[static_cast<size_t>(i)] = c;
    g.cost[static_cast<size_t>(bwd(i))] = 2 * c;
    g.size_bytes[static_cast<size_t>(i)] = s;
    g.size_bytes[static_cast<size_t>(bwd(i))] = s;
    g.kind[static_cast<size_t>(bwd(i))] = CheckmateNodeKind::Backward;
  }
  g.cost[static_cast<size_t>(n)] = 1;
  g.size_bytes[static_cast<size_t>(n)] = int64_t{1} << 20;
  g.kind[static_cast<size_t>(n)] = CheckmateNodeKind::Loss;
  for (int i = 0; i < n; ++i)
    for (int p : preds[static_cast<size_t>(i)]) g.edges.emplace_back(p, i);
  g.edges.emplace_back(n - 1, n);  // the loss reads the last forward node
  for (int i = n - 1; i >= 0; --i) {
    // The gradient of node i's output: from the loss or from its readers' backward nodes.
    if (i == n - 1) g.edges.emplace_back(n, bwd(i));
    for (int r : readers[static_cast<size_t>(i)]) g.edges.emplace_back(bwd(r), bwd(i));
    g.edges.emplace_back(i, bwd(i));
  }
  validate_checkmate_graph(g);
  return g;
}

// The least peak any schedule can have: node t and its inputs in memory at once, at the worst t.
inline int64_t checkmate_least_peak(const CheckmateGraph& g) {
  int64_t least = 0;
  for (int t = 0; t < g.T; ++t) {
    int64_t need = g.size_bytes[static_cast<size_t>(t)];
    for (int e : g.in_edges[static_cast<size_t>(t)])
      need += g.size_bytes[static_cast<size_t>(g.edges[static_cast<size_t>(e)].first)];
    least = std::max(least, need);
  }
  return least;
}

// The benchmark's budgets: `percent` of the way from the least peak to the store-all peak.
inline int64_t checkmate_budget_between(const CheckmateGraph& g, int64_t percent) {
  const int64_t least = checkmate_least_peak(g);
  const int64_t all = checkmate_evaluate(g, checkmate_store_all(g)).peak_bytes;
  return least + (all - least) * percent / 100;
}

}  // namespace headroom::bench
