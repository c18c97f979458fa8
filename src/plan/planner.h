// `headroom plan MODEL`: the fastest way to train within a memory budget. Every strategy of
// strategies.h is run against the same PlanContext (one simulator, one cost model); the plan is
// the feasible result with the least step time. Options that change numerics (mixed precision,
// bf16) are never applied: they are listed with their memory and time.
//
// When the optimizer step holds the peak (or nothing fits) and the run uses the foreach
// optimizer, every strategy is also tried with the single-tensor optimizer (same numerics, less
// memory during the update): those rows are named "NAME+single-tensor", after a
// "single-tensor" row that keeps everything.
//
// Invariants: a feasible plan's peak_bytes (re-simulated) is <= budget_bytes; `alternatives`
// has one entry per strategy run, in strategy_names() order (then the single-tensor pass);
// output is deterministic.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "estimate/estimate.h"
#include "plan/chain_model.h"
#include "cost/cost_model.h"
#include "plan/stages.h"
#include "plan/strategies.h"
#include "util/error.h"

namespace headroom {

inline constexpr const char* kDefaultCostGpu = "A100-SXM4-40GB";

struct PlanRequest {
  EstimateOptions run;  // model, batch, optimizer, precision, device, gpu (with --gpu)
  // The memory to fit in. Unset: the GPU's usable memory (run.gpu required). On CUDA it is
  // compared with the device total (context + reserved by the caching allocator); with --budget
  // and no --gpu the context is left out (the budget is what PyTorch's allocator may reserve).
  std::optional<int64_t> budget_bytes;
  // Instead of a size: the keep-everything peak less (1 - f) of the activations alive at it
  // (saved and other activations), the way checkpointing papers state budgets ("50 % of the
  // activation memory"). Compared on the device given by run.gpu (or the exact heap).
  std::optional<double> activation_fraction;
  std::string strategy = "auto";  // "auto" or one of strategy_names()
  std::string cost_gpu;           // the GPU whose roofline times the steps; "" = run.gpu or the default
  CostConstants constants;
  // Called before each strategy runs (name, index from 1, count): the CLI's progress line.
  std::function<void(const std::string&, int, int)> progress;
};

struct LayerDecision {
  std::string layer;   // op name
  std::string action;  // keep, recompute, offload
  std::string conv_algorithm;  // "fastest" or "memory-optimal" for convolutions on CUDA, else ""
  OpId op = kNone;     // in the graph of the chosen micro-batch (segments of the plan name op ids)
};

struct NumericsOption {
  std::string name;  // amp-fp16, amp-bf16, bf16
  bool feasible = false;
  int64_t peak_bytes = 0;
  double step_time_ms = 0;
  std::string with = "none";  // the strategy it needs besides ("none": keep everything)
};

struct Plan {
  bool feasible = false;
  std::string model;
  int64_t batch = 0;
  std::string strategy;      // the chosen strategy ("none" when everything fits as is)
  int64_t budget_bytes = 0;
  std::string cost_gpu;
  StrategyResult chosen;
  Evaluation baseline;       // keep everything, full batch
  std::vector<StrategyResult> alternatives;
  std::vector<NumericsOption> numerics;
  std::vector<LayerDecision> decisions;
  // The chosen plan's checkpoint regions as `--checkpoint FIRST..LAST` op names, outer before
  // inner (MemoryPlan order): nesting is containment, so estimate re-runs exactly this plan.
  std::vector<std::string> checkpoint_regions;
  std::vector<Stage> stages;
  // When nothing fits: the smallest peak any strategy reached, and which.
  int64_t smallest_peak_bytes = 0;
  std::string smallest_peak_strategy;
  int64_t baseline_activation_bytes = 0;  // activations alive at the keep-everything peak
  Chain chain;               // the model's chain model (model_chain.h), for plan --chain
  bool foreach = false;      // the optimizer implementation of the chosen plan
  int evaluations = 0;       // simulations run
  // The run as planned (GPU options resolved: a --budget without --gpu on CUDA is a device of
  // that size without context) and the cost constants: PlanContext(run, budget_bytes,
  // CostModel(cost_gpu, constants)) rebuilds any candidate's program, for reports.
  EstimateOptions run;
  CostConstants constants;
};

Result<Plan> make_plan(const PlanRequest& request);

}  // namespace headroom
