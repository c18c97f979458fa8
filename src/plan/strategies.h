// The strategies of the planner, each a search over candidates (memory plan + micro-batch) that
// the PlanContext re-simulates; a strategy never estimates memory itself. Each returns the
// fastest feasible candidate it found or, when none fits, the one with the smallest peak.
//
//   accumulate    the largest micro-batch that divides the batch and fits (same effective batch)
//   sqrt          Chen et al.'s sqrt(n) segments over the model's stages (checkpoint_sequential)
//   checkpoint    Rotor's optimal persistent schedule on the model's chain as nested regions, or
//                 the optimal single-level segments (segment_dp), whichever re-simulates faster
//   accumulate+checkpoint  optimal segments at each micro-batch dividing the batch
//   offload       vDNN-style offloading of the layers whose copies hide best behind compute,
//                 the smallest such prefix that fits
//   offload+checkpoint  the hidden offloads, then optimal segments on what is left
//   vdnn-all / vdnn-conv  vDNN's static policies: every layer's / every convolution's saved input
//   conv          workspace-free algorithms for the convolutions with the largest workspaces
#pragma once

#include <string>
#include <vector>

#include "plan/evaluate.h"
#include "plan/segment_dp.h"
#include "plan/stages.h"

namespace headroom {

struct StrategyResult {
  std::string name;
  bool applicable = true;  // false: nothing to do for this model/device (e.g. no convolutions)
  std::string note;        // why not applicable, or what was chosen ("micro-batch 8")
  Candidate candidate;
  Evaluation eval;
  bool single_tensor_optimizer = false;  // run with the single-tensor optimizer instead of foreach
};

// The better of two evaluations: feasible first, then faster, then smaller.
bool better(const Evaluation& a, const Evaluation& b);

// Per stage of `stages`: the saved activations it made that are alive at the end of the first
// forward of `base`'s program, its boundary bytes, and its forward time on the cost model.
std::vector<SegmentStage> stage_statistics(PlanContext& ctx, const Candidate& base, const std::vector<Stage>& stages);

// A strategy: its name (--strategy NAME), whether it applies to the run ("" when it does,
// otherwise why not: the row's note), and its search, which may still find nothing to do
// (returned as not applicable, e.g. a model without convolutions for vdnn-conv).
struct Strategy {
  using Applies = std::string (*)(PlanContext& ctx, const std::vector<Stage>& stages);
  using Search = StrategyResult (*)(const std::string& name, PlanContext& ctx, const std::vector<Stage>& stages,
                                    const Evaluation& baseline);
  std::string name;
  Applies applies;
  Search search;
};

// Every strategy, in the order the comparison table lists them (a new one is one entry there:
// DEVELOPERS.md).
const std::vector<Strategy>& strategy_registry();

// The names --strategy accepts (the registry's, in its order).
const std::vector<std::string>& strategy_names();

// REQUIRES: name in strategy_names(); `stages` = chain_stages(ctx.graph(0)).
StrategyResult run_strategy(const std::string& name, PlanContext& ctx, const std::vector<Stage>& stages,
                            const Evaluation& baseline);

}  // namespace headroom
