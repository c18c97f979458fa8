// A first incumbent for Checkmate's MILP (checkmate_ilp.h): a checkpoint-set schedule chosen
// greedily. For a set C of checkpointed nodes, stage t computes node t and, recursively, every
// input that is not an earlier node of C (nodes outside C are recomputed where they are needed);
// a node of C is held from its own stage up to the last stage that reads it. C starts as every node (the store-all schedule); while the peak is over the budget,
// the node whose removal lowers the peak the most per unit of added cost leaves C. The result is
// checked by checkmate_evaluate, never trusted: it is returned only when valid and within budget.
#pragma once

#include <cstdint>
#include <optional>

#include "plan/checkmate_graph.h"

namespace headroom {

// The schedule of checkpoint set `checkpointed` (one flag per node) under the rules above.
CheckmateSchedule checkmate_checkpoint_schedule(const CheckmateGraph& graph, const std::vector<uint8_t>& checkpointed);

// Uniform checkpoint sets (the √n rule of Chen et al., "Training Deep Nets with Sublinear Memory
// Cost", 2016): every `every`-th forward node in index order, starting with the first, and every
// node that is not a forward one (the loss, the gradients). REQUIRES: every >= 1.
std::vector<uint8_t> checkmate_uniform_checkpoints(const CheckmateGraph& graph, int every);

// The greedy's schedule, or nothing when it found none within the budget.
std::optional<CheckmateSchedule> checkmate_greedy_start(const CheckmateGraph& graph, int64_t budget_bytes);

}  // namespace headroom
