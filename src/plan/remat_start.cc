// The bundled chain of remat_start.h and the translation of its DP schedule into graph ops.
#include "plan/remat_start.h"
#include "util/index.h"

#include <algorithm>

#include "plan/chain_dp.h"
#include "plan/remat_simulate.h"

namespace headroom {
namespace {

// carried[j]: K_j, the activations k < j that a stage >= j still reads.
std::vector<std::vector<int>> carried_sets(const RematGraph& g) {
  const int L = g.length();
  const auto consumers = remat_consumers(g);
  std::vector<std::vector<int>> K(at(L) + 1);
  for (int k = 0; k < L; ++k)
    for (int j = k + 1; j <= consumers[at(k)].back(); ++j) K[at(j)].push_back(k);
  return K;
}

}  // namespace

Chain remat_bundled_chain(const RematGraph& g) {
  const auto K = carried_sets(g);
  Chain c = g.sizes;
  for (int j = 0; j <= g.length(); ++j) {
    int64_t extra = 0;
    for (int k : K[at(j)]) extra += g.sizes.x(k);
    c.x_bytes[at(j)] += extra;
    if (j >= 1) c.xbar_bytes[at(j) - 1] += extra;
  }
  return c;
}

std::vector<RematOp> remat_bundled_chain_schedule(const RematGraph& g, int64_t memory,
                                                  const Deadline& deadline) {
  const int L = g.length();
  if (memory < 0 || memory > (int64_t{1} << 30) ||
      chain_dp_table_bytes(L, static_cast<int>(memory)) > kMaxChainTableBytes)
    return {};
  const ChainDpResult dp = solve_chain_dp(remat_bundled_chain(g), static_cast<int>(memory), 0, deadline);
  if (!dp.feasible) return {};

  const auto K = carried_sets(g);
  const auto consumers = remat_consumers(g);
  std::vector<int> min_consumer(at(L) + 1, L);  // the loss reads a_L
  for (int k = 0; k < L; ++k) min_consumer[at(k)] = consumers[at(k)].front();
  std::vector<uint8_t> cp(at(L) + 1, 0), cb(at(L) + 1, 0);  // chain buffers x'_j, x̄'_j live
  cp[0] = 1;
  RematState st = RematState::initial(g);
  std::vector<RematOp> ops;
  bool ok = true;
  auto emit = [&](RematOp op) {
    int64_t in_use = 0;
    double t = 0;
    if (!apply_remat_op(g, consumers, op, st, &in_use, &t).empty()) ok = false;
    ops.push_back(op);
  };
  // After each chain op: drop every graph activation (a_0 excepted: the backwards free it) that
  // no live chain buffer holds any more, or that no remaining backward needs.
  auto drop_unheld = [&] {
    std::vector<uint8_t> held(at(L) + 1, 0);
    for (int j = 0; j <= L; ++j) {
      if (!cp[at(j)] && !cb[at(j)]) continue;
      held[at(j)] = 1;
      for (int k : K[at(j)]) held[at(k)] = 1;
    }
    const int next = st.next_backward;  // L: the loss; -1: done
    for (int k = 1; k <= L; ++k) {
      if (!st.has(k)) continue;
      const bool needed = next >= min_consumer[at(k)] || (st.bar[at(k)] && next >= k - 1);
      if (!held[at(k)] || !needed) emit({RematOpKind::Free, k});
    }
  };
  for (const ChainOp& op : dp.schedule) {
    if (!ok) break;
    const int i = op.stage;
    switch (op.kind) {
      case ChainOpKind::Fck:
      case ChainOpKind::Fn:
      case ChainOpKind::Fall: {
        const bool hist = op.kind == ChainOpKind::Fall;
        // The graph runs the forward only if its output is needed: the chain recomputes a bundle
        // whose own activation may serve no remaining backward (no forward up to the next
        // backward reads a_k when k's first reader is past it).
        const int next = st.next_backward;
        const bool needed = next >= min_consumer[at(i) + 1] || (hist && next >= i);
        if (needed && st.has(i + 1) && hist && !st.bar[at(i) + 1])
          emit({RematOpKind::Free, i + 1});
        if (needed && !st.has(i + 1)) emit({hist ? RematOpKind::Fall : RematOpKind::Fck, i});
        (hist ? cb : cp)[at(i) + 1] = 1;
        if (op.kind == ChainOpKind::Fn) (cp[at(i)] ? cp : cb)[at(i)] = 0;
        break;
      }
      case ChainOpKind::Loss:
        emit({RematOpKind::Loss, 0});
        cp[at(L)] = 0;
        break;
      case ChainOpKind::B:
        emit({RematOpKind::B, i});
        cb[at(i) + 1] = 0;
        cp[at(i)] = 0;
        break;
    }
    if (ok) drop_unheld();
  }
  if (!ok) return {};
  Result<RematSimResult> sim = simulate_remat(g, ops);
  if (!sim.ok() || sim.value().peak > memory) return {};
  return ops;
}

}  // namespace headroom
