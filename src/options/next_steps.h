// What to try when a run does not fit a GPU: the changes headroom can evaluate itself — mixed
// or lower precision, an 8-bit optimizer, LoRA and QLoRA on Hugging Face decoders, a plan
// (checkpointing, offload, accumulation), more GPUs with ZeRO-3 or tensor parallelism — each
// run through the same estimate (or planner) as the user's own options, never a formula.
//
// Invariants: a step is listed only when the changed options are valid for the model (a change
// the model rejects, e.g. LoRA on a CNN, is left out); steps come in a fixed order, so the
// output is deterministic; nothing here prints.
#pragma once

#include <vector>

#include "estimate/fit.h"
#include "estimate/next_step.h"
#include "options/run_args.h"

namespace headroom {

// `run`: the user's options with `gpu` naming one GPU (or --gpu-memory); the steps are
// evaluated at `value` on `axis` (the smallest size that did not fit).
std::vector<NextStep> next_steps(const RunArgs& run, FitAxis axis, int64_t value);

// fit's use: when no GPU of `results` fits even the smallest size, the steps on the largest GPU
// tried (at the size that did not fit); none when anything fits. `run.gpu` may be "all".
std::vector<NextStep> next_steps_if_nothing_fits(const RunArgs& run, const std::vector<FitResult>& results);

}  // namespace headroom
