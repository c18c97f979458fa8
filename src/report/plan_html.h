// `headroom plan MODEL ... --html FILE`: the plan (plan/planner.h) as one self-contained HTML page
// (inline CSS and SVG, no script, nothing fetched), in the style of the estimate and pack pages:
//   1. the title: model, batch, optimizer and precision, the GPU, the budget, the GPU that times;
//   2. memory over one training step: exact live bytes against predicted time
//      (report/plan_curves.h): the chosen plan (or the smallest peak when nothing fits) against
//      keeping everything on the main chart, every other applicable strategy as a small multiple
//      on shared scales in a <details> toggle (no script), time cut for strategies slower than 3x
//      keeping everything (noted), one colour per strategy, the budget (less context and NCCL)
//      as a horizontal line, each curve's peak marked, a legend;
//   3. the strategies compared (fits, peak, step time, overhead, note), the chosen one
//      highlighted, and the numerics-changing options apart, not applied;
//   4. the chosen plan's per-layer decisions: a strip with one cell per layer and the runs of
//      keep / recompute / offload, with the convolution algorithms on CUDA.
// Deterministic: the same Plan gives byte-identical HTML.
//
// The plotted data is in the markup, for tests and tools (docs/report.md):
//   <g class="plan-chart" data-plot="x y w h" data-y-max="BYTES" data-x-max-ms="MS" data-iteration="N">
//         one per chart, the main one first
//   <path class="strategy-curve" data-strategy="S" data-chosen="true|false" data-feasible="..."
//         data-plot, data-y-max, data-x-max-ms (its chart's) [data-clipped="true"]
//         data-steps="s,..." data-first-steps="a,..." data-last-steps="b,..." data-bytes="b,..."
//         data-ms="t0,t1,...,tn" d="...">  point i spans [t_i, t_i+1) ms at bytes b_i; d has two
//         vertices per point: (t_i, b_i), (t_i+1, b_i)
//   <g class="curve-peak" data-strategy="S" data-bytes="B" data-step="s">
//   <path class="baseline-ghost">, <rect class="micro-batch">  (accumulation plans)
//   <line class="budget" data-budget="BUDGET" data-overhead="CONTEXT+NCCL" data-bytes="LINE">
//   <tr class="strategy[ chosen]" data-strategy="S" data-fits="yes|no|-">, <tr class="numerics" data-precision="P">
//   <rect class="decision" data-layer="NAME" data-action="keep|recompute|offload" [data-segment="K"] [data-conv="ALGO"]>
#pragma once

#include <string>

#include "plan/planner.h"

namespace headroom {

// REQUIRES: `plan` comes from make_plan.
std::string plan_html(const Plan& plan);

}  // namespace headroom
