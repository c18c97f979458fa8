// The data of the plan page (report/plan_html.h): one training step of the keep-everything
// baseline and of each applicable strategy's candidate, rebuilt from the Plan (a PlanContext on
// Plan::run, the same interpreter and cost model the planner used), as exact live tensor bytes
// against predicted time.
//
// The step plotted is the timed one (Plan::run.iterations, the steady state): its forward,
// backward (all micro-batches) and optimizer steps. Each program step is plotted at its
// high-water mark (memory_timeline, as in the estimate report) over [start, end) of the step on
// the cost model's timeline (step_times), in ms from the step's start, so recomputation and
// copy stalls widen the curve. Long steps are downsampled like the report: runs of
// ceil(steps / max_points) consecutive steps, each plotting its highest step (the peak survives).
//
// Units: the curves are exact live bytes (torch.cuda.memory_allocated); the budget is compared
// with device totals on CUDA (context + NCCL + what the caching allocator reserves), so the line
// the curves are drawn against is budget - context - NCCL (`overhead_bytes`; 0 on the CPU and for
// --budget without --gpu). The allocator's rounding and caching come on top of the live bytes:
// a curve under the line can still not fit (Evaluation::feasible says).
//
// Invariants: deterministic; curves[0] is the baseline ("none"), then the applicable strategies
// in Plan::alternatives order; at most one curve is chosen (the plan's, when one fits).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "plan/planner.h"

namespace headroom {

struct PlanCurvePoint {
  int32_t step = 0;        // the program step plotted (Program::steps index)
  int32_t first_step = 0;  // the run of steps it stands for
  int32_t last_step = 0;
  int64_t bytes = 0;       // exact live bytes at `step`'s high-water mark
  double start_ms = 0;     // start of first_step .. end of last_step, from the iteration's start
  double end_ms = 0;
};

struct PlanCurve {
  std::string strategy;    // "none" for the keep-everything baseline
  int strategy_index = -1; // index in strategy_names(); -1 for the baseline (colours)
  std::string note;
  bool chosen = false;
  const Evaluation* eval = nullptr;  // into the Plan: peak (budget units), time, feasibility
  int32_t first_step = 0;  // the iteration's steps in the program
  int32_t last_step = 0;
  double total_ms = 0;     // end of its last step: eval->time.total_ms up to rounding
  std::vector<PlanCurvePoint> points;
  size_t peak_point = 0;   // the first point with the most bytes
};

struct PlanCurves {
  int iteration = 0;            // the training step plotted
  int64_t overhead_bytes = 0;   // CUDA context + NCCL (0 on the CPU)
  int64_t line_bytes = 0;       // budget - overhead: what the live bytes are drawn against
  std::vector<PlanCurve> curves;
};

// REQUIRES: `plan` comes from make_plan (Plan::run set) and outlives the result.
PlanCurves plan_curves(const Plan& plan, size_t max_points = 600);

}  // namespace headroom
