// Local improvement of a schedule of Checkmate's model (checkmate_graph.h), to give CBC a better
// first incumbent than the greedy checkpoint set (checkmate_start.h) on graphs with long skips.
//
// A schedule is described by its held sets alone: stage t holds H[t] when it starts, and computes
// node t and, recursively, every input that is not held (the least R[t] that H[t] allows), plus
// whatever H[t+1] takes over that was neither held nor computed (so every hold is available). A
// checkpoint-set schedule is one such description; so are the schedules that keep a recomputed
// node from one backward stage to a later one, which checkpoint sets cannot express.
//
// Moves:
//   keep:  where stage t recomputes node i, hold i instead from the last earlier stage that has it
//          (held or computed) through t. The best keep that fits the budget and lowers the cost is
//          taken, until none does (a descent).
//   kick:  give up one held interval of a node (it is recomputed where it is read), then descend
//          again; the first kick that ends cheaper than the current schedule is taken, and the
//          kicks start over from it, until none helps or an evaluation count is spent.
//   pair kick (when no single kick helps, while the caller's count of evaluations for them
//          lasts): the same after giving up two held intervals whose stages overlap or touch (the
//          41-node U-Net-like graph of the benchmark needs it to reach its optimum).
// After every move the description is cleaned: a hold that no node of its stage reads and that is
// not held on is dropped (with what was computed only to be held), so holds never stay in vain.
//
// Invariants: the result is a valid schedule (checkmate_evaluate finds nothing wrong) within the
// budget whose cost is at most the start's; it is checked by checkmate_evaluate before it is
// returned, never trusted. Deterministic: moves are tried in a fixed order, the best one taken.
#pragma once

#include <cstdint>

#include "plan/checkmate_graph.h"

namespace headroom {

// REQUIRES: `start` valid and within budget_bytes (checkmate_evaluate). Returns `start` itself
// when no move improves it.
// pair_kick_evaluations: how many schedules the pair kicks may still evaluate, decremented by
// what they spend (shared by the caller across starts); none without it.
CheckmateSchedule checkmate_improve(const CheckmateGraph& graph, const CheckmateSchedule& start,
                                    int64_t budget_bytes, int64_t* pair_kick_evaluations = nullptr);

}  // namespace headroom
