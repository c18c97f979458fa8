// One engine of the layout search (plan --gpus): the micro-batch, with or without activation
// checkpointing per transformer block, whose step is fastest among those that fit. Micro-batches
// are tried largest first; at each, the plain program, and when it does not fit the program with
// every block checkpointed (schedule/transformer_blocks.h, what Hugging Face's
// gradient_checkpointing_enable() does). The first plain fit ends the search (a smaller
// micro-batch only launches more kernels and communicates more often); a checkpointed fit at a
// larger micro-batch competes with it on step time, its recompute counted by the cost model.
//
// Invariants: every candidate is the rank's program re-simulated by PlanContext; a fit's peak
// is within the budget; the choice is deterministic (ties keep the larger micro-batch).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "plan/evaluate.h"

namespace headroom {

struct EngineFit {
  bool found = false;
  int64_t micro_batch = 0;
  bool checkpointed = false;
  MemoryPlan plan;      // the block checkpoints when checkpointed
  Evaluation evaluation;
  double step_ms = 0;
  int64_t smallest_peak_bytes = 0;  // the smallest peak seen (for a rejection's reason)
  int evaluations = 0;
};

// `micro_batches`: the sizes to try, largest first. `step_ms`: the step time of a fitting
// evaluation at micro-batch m (compute plus what the engine adds).
EngineFit fit_engine(PlanContext& ctx, const std::vector<int64_t>& micro_batches, bool try_checkpointing,
                     const std::function<double(const Evaluation&, int64_t)>& step_ms);

}  // namespace headroom
