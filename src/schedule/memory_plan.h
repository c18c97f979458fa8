// A MemoryPlan is a rewrite of the training schedule that trades time for memory, applied by
// build_program while it interprets the graph (docs/planning.md):
//
//  - checkpoint regions (torch.utils.checkpoint; reentrant semantics, 1.13's default, unless the
//    plan says non-reentrant, below). Regions
//    nest: a region may contain inner regions (a checkpointed function that itself calls
//    checkpoint). In the first forward an outermost region runs under no_grad and one node keeps
//    its inputs; the checkpoint calls inside it run under no_grad as well, so they keep nothing
//    (their inputs and RNG state live only while they run). When the backward reaches a region,
//    its forward is re-run with grad (steps marked `recompute`): its own ops record nodes, and its
//    directly nested regions now act as checkpoints (keep their inputs, run under no_grad, are
//    re-run themselves when the nested backward reaches them). The re-run outputs are held until
//    the region's backward is done.
//    Non-reentrant (use_reentrant=False, 1.13's _checkpoint_without_reentrant): every region, at
//    any depth, runs with grad under saved_tensors_hooks whose pack keeps nothing; its call's
//    closure keeps the region's inputs and RNG state until the last of its own nodes that saved
//    something has run. The first such node to unpack in the backward re-runs the region (nested
//    regions inside it run again, keeping nothing); the re-run keeps what the region's own nodes
//    save, each until its node has run, and drops everything else when it returns.
//  - offload (vDNN): the activations an op's node keeps for its backward are copied to host once
//    only autograd still references them, and freed on the device at the end of that step (the
//    copy must be done by then); they are copied back (prefetched) at the start of the backward
//    step before the node that needs them. Each copy is a Program::transfers entry.
//  - memory-optimal convolution: listed convolutions borrow no cuDNN workspace.
//
// Invariants (validate_plan, run by build_program on every plan): regions are well nested
// (disjoint or one inside the other), sorted outer before inner (first ascending, last
// descending), inside the model's forward (no loss ops), each one's parameters get gradients
// (reentrant only: a non-reentrant region records its graph in the forward), and no op of a
// region overwrites in place a tensor made before it; offloaded ops are model ops
// outside every region, listed once; workspace-free ops are convolutions; op ids are valid. An
// empty plan changes nothing: the program is identical to the one without a plan.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace headroom {

// One checkpoint region: ops first..last run inside one torch.utils.checkpoint call.
struct CheckpointSegment {
  OpId first = kNone;  // inclusive, graph op order
  OpId last = kNone;   // inclusive
  friend bool operator==(const CheckpointSegment&, const CheckpointSegment&) = default;
  bool contains(const CheckpointSegment& o) const { return first <= o.first && o.last <= last; }
};

// How torch.utils.checkpoint runs every region of a plan (its use_reentrant argument).
enum class CheckpointImpl : uint8_t { Reentrant, NonReentrant };

// "reentrant" or "non-reentrant" (the CLI's --checkpoint-impl), nullopt otherwise.
std::optional<CheckpointImpl> parse_checkpoint_impl(const std::string& text);
const char* checkpoint_impl_name(CheckpointImpl impl);

struct MemoryPlan {
  std::vector<CheckpointSegment> checkpoints;  // well nested, outer before inner
  std::vector<OpId> offload;            // ops whose saved activations go to host between passes
  std::vector<OpId> no_conv_workspace;  // convolutions run with a workspace-free algorithm
  CheckpointImpl checkpoint_impl = CheckpointImpl::Reentrant;  // of every region (last: aggregate inits)

  bool empty() const { return checkpoints.empty() && offload.empty() && no_conv_workspace.empty(); }
  friend bool operator==(const MemoryPlan&, const MemoryPlan&) = default;
};

// Whether torch.utils.checkpoint (reentrant) on ops first..last gives their parameters gradients:
// some tensor made before `first` and read by the segment requires grad. Only those tensors are
// CheckpointFunction's inputs (parameters are reached through the module); if none requires
// grad, its outputs do not either and 1.13 only warns (torch/utils/checkpoint.py:31).
bool checkpoint_gets_gradients(const Graph& g, OpId first, OpId last);

// Sorts regions into the plan's order (first ascending, then the enclosing region first).
void sort_checkpoints(std::vector<CheckpointSegment>& regions);

// Checks the invariants above; throws InputError naming the first problem (ops by name).
void validate_plan(const Graph& g, const MemoryPlan& plan);

// The plan as text, one decision a line, nested regions indented under their region:
//   checkpoint layer1.0.conv1..layer1.1.relu#2
//     checkpoint layer1.0.conv1..layer1.0.relu#2
//   offload conv1
//   no-workspace layer2.0.conv1
// REQUIRES: validate_plan(g, plan) passed.
std::string plan_text(const Graph& g, const MemoryPlan& plan);

}  // namespace headroom
