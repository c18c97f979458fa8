// Which tensors require grad when every op of the graph runs under grad mode, propagated once
// over the whole graph, and the reentrant-checkpoint check that reads it. The check of one
// region used to propagate from the graph's start on every call; callers that check many regions
// of one graph (validate_plan, transformer_blocks) propagate once and check each region in
// O(its ops).
//
// Invariant: the ops are in topological order (Graph::validate), so the flag of a tensor made by
// op p depends only on ops 0..p: one propagation gives every prefix's answer.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace headroom {

// Indexed by TensorId: a parameter that is not frozen, a pipeline stage's received hidden state,
// or an output of an op with a differentiable input that requires grad.
std::vector<bool> forward_requires_grad(const Graph& g);

// checkpoint_gets_gradients(g, first, last) of memory_plan.h, with `requires_grad` from
// forward_requires_grad(g).
bool checkpoint_gets_gradients(const Graph& g, const std::vector<bool>& requires_grad, OpId first, OpId last);

}  // namespace headroom
