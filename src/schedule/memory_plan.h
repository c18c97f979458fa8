// A MemoryPlan is a rewrite of the training schedule that trades time for memory, applied by
// build_program while it interprets the graph (docs/planning.md):
//
//  - checkpoint segments (torch.utils.checkpoint, reentrant semantics): the ops of a segment run
//    under no_grad in the forward; one node keeps the segment's inputs. When the backward reaches
//    the segment, its forward is re-run with grad (steps marked `recompute`), then its nodes run
//    as usual; the recomputed outputs are held until the segment's backward is done.
//  - offload (vDNN): the activations an op's node keeps for its backward are copied to host once
//    only autograd still references them, and freed on the device at the end of that step (the
//    copy must be done by then); they are copied back (prefetched) at the start of the backward
//    step before the node that needs them. Each copy is a Program::transfers entry.
//  - memory-optimal convolution: listed convolutions borrow no cuDNN workspace.
//
// Invariants (checked by build_program): segments are disjoint, sorted, inside the model's
// forward (no loss ops), first <= last; op ids are valid. An empty plan changes nothing: the
// program is identical to the one without a plan.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace headroom {

struct CheckpointSegment {
  OpId first = kNone;  // inclusive, graph op order
  OpId last = kNone;   // inclusive
  friend bool operator==(const CheckpointSegment&, const CheckpointSegment&) = default;
};

struct MemoryPlan {
  std::vector<CheckpointSegment> checkpoints;
  std::vector<OpId> offload;            // ops whose saved activations go to host between passes
  std::vector<OpId> no_conv_workspace;  // convolutions run with a workspace-free algorithm

  bool empty() const { return checkpoints.empty() && offload.empty() && no_conv_workspace.empty(); }
};

// Whether torch.utils.checkpoint (reentrant) on ops first..last gives their parameters gradients:
// some tensor made before `first` and read by the segment requires grad. Only those tensors are
// CheckpointFunction's inputs (parameters are reached through the module); if none requires
// grad, its outputs do not either and 1.13 only warns (torch/utils/checkpoint.py:31).
bool checkpoint_gets_gradients(const Graph& g, OpId first, OpId last);

}  // namespace headroom
