// A first incumbent for the graph integer program (remat_ilp.h): the chain DP (chain_dp.h) on the
// graph's "bundled chain", its schedule translated into graph ops.
//
// The bundled chain has the graph's stages in index order; its activation a'_j is a_j together
// with every earlier activation a_k that a stage >= j still reads (the carried set
// K_j = {k < j : max C(k) >= j}), so x'_j = x_j + Σ_{k in K_j} x_k and x̄'_j = x̄_j + Σ_{k in K_j} x_k;
// times and transients are the graph's. Every input of stage i is in a'_i (preds[i] ⊆ {i} ∪ K_i),
// so a chain schedule runs on the graph: a graph buffer is live while some live chain buffer
// holds it and a backward still needs it, and every chain buffer counts at least the graph buffers
// it holds, so the graph's peak is at most the chain's. The translation is checked, not trusted:
// the result is re-run in remat_simulate and returned only when it is valid and fits `memory`.
//
// On a chain (no skip edges) K_j is empty and this is the chain DP's own schedule, with Fn written
// as Fck followed by Free of the input.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/chain_dp.h"
#include "plan/remat_graph.h"

namespace headroom {

// The bundled chain of a graph (sizes in the graph's units).
Chain remat_bundled_chain(const RematGraph& graph);

// The translated optimal persistent schedule of the bundled chain at `memory` (the graph's units,
// in practice slots), or empty when the chain DP finds none, its table would be too large
// (kMaxChainTableBytes), the deadline passes first, or the translation does not fit (never
// expected; checked). Deterministic when it finishes before the deadline.
std::vector<RematOp> remat_bundled_chain_schedule(const RematGraph& graph, int64_t memory,
                                                  const Deadline& deadline = std::nullopt);

}  // namespace headroom
