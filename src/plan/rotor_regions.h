// Rotor's persistent checkpointing schedule (chain_dp.h) as nested checkpoint regions, the form
// torch.utils.checkpoint (reentrant) runs it in and the interpreter replays (memory_plan.h).
//
// In Rotor's recursion a segment [s, t] either keeps stage s (Fall_s) and solves [s+1, t], or
// takes a leaf j: stages s..j-1 run without history keeping only a_s (Fck_s, Fn_{s+1} ..
// Fn_{j-1}), [j, t] is solved, then [s, j-1] is solved again with δ_j. The sweep s..j-1 is one
// checkpoint call; its re-run is the recursive solution of [s, j-1], whose own sweeps are calls
// made inside it: regions nested in s..j-1. So the regions are exactly the schedule's sweeps
// (an Fck followed by the Fn's that continue it), and they are well nested by construction.
#pragma once

#include <vector>

#include "plan/chain_model.h"
#include "plan/segment_dp.h"

namespace headroom {

// The sweeps of `schedule` as stage ranges, outer before inner (first ascending, last
// descending), each range once. REQUIRES: schedule from solve_chain_dp (or its tokens).
std::vector<SegmentRange> rotor_regions(const std::vector<ChainOp>& schedule);

}  // namespace headroom
