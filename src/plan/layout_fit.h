// One engine of the layout search (plan --gpus): the micro-batch, with or without activation
// recomputation, whose step is fastest among those that fit. Micro-batches are tried largest
// first; at each, the recompute levels of the family's ladder in order, the next only when the
// previous does not fit: nothing; Megatron's selective recompute (each block's attention core
// checkpointed, schedule/transformer_blocks.h attention_cores, --recompute-granularity
// selective); every block checkpointed (transformer_blocks, what Hugging Face's
// gradient_checkpointing_enable() and Megatron's --recompute-granularity full
// --recompute-method uniform --recompute-num-layers 1 do). The first fit without recompute ends
// the search (a smaller micro-batch only launches more kernels and communicates more often); a
// fit with recompute at a larger micro-batch competes with it on step time, its recompute counted
// by the cost model. Once a level fits at some micro-batch, it and heavier levels are not tried
// at smaller ones (they would only add steps).
//
// A candidate whose program holds more parameters, gradients and optimizer states than the budget
// in its last optimizer step, with that step's own buffers (Evaluation::optimizer_step_bytes),
// ends the search: every candidate of the layout holds the same (schedule/held_state.h), so none
// fits, and the rejection names that state.
//
// Invariants: every candidate is the rank's program re-simulated by PlanContext; a fit's peak
// is within the budget; the choice is deterministic (ties keep the larger micro-batch); a level
// whose regions the model lacks (no eager attention core) is skipped.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "plan/evaluate.h"

namespace headroom {

enum class Recompute : uint8_t { None, Selective, Full };

// The checkpoint regions of `level` on graph `g` (empty for None, or when the model has none).
MemoryPlan recompute_plan(const Graph& g, Recompute level);

struct EngineFit {
  bool found = false;
  int64_t micro_batch = 0;
  bool checkpointed = false;  // recompute != None
  Recompute recompute = Recompute::None;
  MemoryPlan plan;      // the checkpoints of `recompute`
  Evaluation evaluation;
  double step_ms = 0;
  // The smallest peak seen and the candidate it was seen at (for a rejection's reason).
  int64_t smallest_peak_bytes = 0;
  int64_t smallest_peak_micro_batch = 0;
  Recompute smallest_peak_recompute = Recompute::None;
  // The candidate whose optimizer step holds more than the budget, where the search stopped at one:
  // every candidate holds its held_bytes and optimizer_step_bytes.
  std::optional<Evaluation> model_state_over_budget;
  int evaluations = 0;
};

// `micro_batches`: the sizes to try, largest first. `ladder`: the recompute levels, lightest
// first. `step_ms`: the step time of a fitting evaluation at micro-batch m (compute plus what the
// engine adds). `fit_assured`: the caller knows one of the candidates fits (the layout search's
// pipeline probe), so no smallest peak is quoted and candidates are asked Candidate::fit_only.
EngineFit fit_engine(PlanContext& ctx, const std::vector<int64_t>& micro_batches, const std::vector<Recompute>& ladder,
                     const std::function<double(const Evaluation&, int64_t)>& step_ms, bool fit_assured = false);

// The ladder {None} or {None, Full}.
EngineFit fit_engine(PlanContext& ctx, const std::vector<int64_t>& micro_batches, bool try_checkpointing,
                     const std::function<double(const Evaluation&, int64_t)>& step_ms);

}  // namespace headroom
