// The optimal single-level checkpointing of a chain of stages (what torch.utils.checkpoint can
// express: each checkpointed segment is re-run once, in the backward): which runs of
// consecutive stages to checkpoint so that the activation memory stays within a budget at the
// least recomputation time. Dynamic program over (stage, memory slots), O(L^2 * slots).
//
// Memory model (an approximation the planner corrects by re-simulating every plan):
//   a stored stage keeps `kept` bytes from its forward to its backward; a checkpointed segment
//   keeps only its input (`boundary` of its first stage) and, while its backward runs, holds
//   its stages' `kept` bytes again on top of everything stored before it. The budget must hold
//   the sum over the whole chain at the end of the forward, and every segment's backward.
//
// Invariants: segments are disjoint, sorted runs of stage indices; the result's
// recompute_ms is the sum of the checkpointed stages' forward times; infeasible budgets give
// feasible = false and no segments.
#pragma once

#include <cstdint>
#include <vector>

namespace headroom {

struct SegmentStage {
  int64_t kept_bytes = 0;      // saved activations of the stage alive at the end of the forward
  int64_t boundary_bytes = 0;  // what a segment starting at this stage keeps
  double forward_ms = 0;       // the price of recomputing it
};

struct SegmentRange {
  int first = 0;  // stage indices, inclusive
  int last = 0;
  friend bool operator==(const SegmentRange&, const SegmentRange&) = default;
};

struct SegmentPlan {
  bool feasible = false;
  double recompute_ms = 0;
  std::vector<SegmentRange> segments;
};

// REQUIRES: budget_bytes >= 0, slots >= 1.
SegmentPlan solve_segments(const std::vector<SegmentStage>& stages, int64_t budget_bytes, int slots = 500);

// Chen et al.'s sqrt(n) rule as torch.utils.checkpoint_sequential applies it: ceil(sqrt(L))
// segments of equal length, every one checkpointed but the last.
std::vector<SegmentRange> sqrt_segments(int stage_count);

}  // namespace headroom
