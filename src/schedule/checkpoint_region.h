// Whether one checkpoint region can be run by torch.utils.checkpoint (reentrant) and re-run from
// its inputs: the per-region half of validate_plan (memory_plan.h), for solvers that place
// regions and must skip the ones PyTorch could not run.
#pragma once

#include <string>

#include "schedule/memory_plan.h"

namespace headroom {

// Why region r alone cannot be checkpointed (ops, loss ops, in-place writes to its inputs,
// gradients under reentrant checkpoint), or "" when it can.
std::string checkpoint_region_problem(const Graph& g, const CheckpointSegment& r,
                                      CheckpointImpl impl = CheckpointImpl::Reentrant);

}  // namespace headroom
