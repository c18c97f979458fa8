#include "report/plan_curves.h"

#include <algorithm>

#include "estimate/device_memory.h"
#include "report/html_report.h"
#include "sim/device_catalog.h"
#include "util/error.h"

namespace headroom {
namespace {

PlanCurve curve_of(PlanContext& ctx, const Candidate& c, int iteration, size_t max_points) {
  Program p = ctx.program(c);
  const int64_t micro = c.micro_batch > 0 ? c.micro_batch : ctx.options().batch;
  StepTimes t = step_times(ctx.cost(), ctx.graph(micro), p, c.plan, ctx.options().optimizer, iteration);
  // Every step's high-water mark; downsampling happens here, within the iteration only.
  Timeline all = memory_timeline(p, nullptr, std::max<size_t>(p.steps.size(), 2));
  PlanCurve curve;
  std::vector<size_t> steps;
  for (size_t s = 0; s < p.steps.size(); ++s) {
    if (p.steps[s].iteration == iteration && p.steps[s].phase != Phase::Setup) steps.push_back(s);
  }
  HEADROOM_CHECK(!steps.empty(), "the plan's program has no training step to plot");
  curve.first_step = static_cast<int32_t>(steps.front());
  curve.last_step = static_cast<int32_t>(steps.back());
  const double t0 = t.start_ms[steps.front()];
  curve.total_ms = t.end_ms[steps.back()] - t0;
  const size_t run = (steps.size() + max_points - 1) / max_points;
  for (size_t first = 0; first < steps.size(); first += run) {
    const size_t last = std::min(steps.size(), first + run) - 1;
    size_t best = first;
    for (size_t i = first; i <= last; ++i) {
      if (all.points[steps[i]].total > all.points[steps[best]].total) best = i;
    }
    PlanCurvePoint pt;
    pt.step = static_cast<int32_t>(steps[best]);
    pt.first_step = static_cast<int32_t>(steps[first]);
    pt.last_step = static_cast<int32_t>(steps[last]);
    pt.bytes = all.points[steps[best]].total;
    pt.start_ms = t.start_ms[steps[first]] - t0;
    pt.end_ms = t.end_ms[steps[last]] - t0;
    curve.points.push_back(pt);
  }
  for (size_t i = 0; i < curve.points.size(); ++i) {
    if (curve.points[i].bytes > curve.points[curve.peak_point].bytes) curve.peak_point = i;
  }
  return curve;
}

}  // namespace

PlanCurves plan_curves(const Plan& plan, size_t max_points) {
  HEADROOM_CHECK(max_points >= 2, "a plan curve needs at least 2 points");
  HEADROOM_CHECK(plan.run.mode == RunMode::Training, "plan_curves needs a plan from make_plan");
  const GpuSpec& cost_gpu = DeviceCatalog::builtin().find(plan.cost_gpu);
  PlanContext ctx(plan.run, plan.budget_bytes, CostModel(cost_gpu, plan.constants));
  PlanCurves out;
  out.iteration = plan.run.iterations;
  if (plan.run.device == "cuda" && plan.run.gpu) {
    // The context and NCCL are the same for every candidate (the same kinds of ops run forward
    // and backward): the baseline's replay tells them, with the planner's device (its capacity
    // is the budget, as PlanContext::evaluate sets it).
    GpuOptions g = *plan.run.gpu;
    g.gpu_memory = plan.budget_bytes;
    g.margin = 0;
    DeviceMemory d = device_memory(ctx.program(Candidate{}), g);
    out.overhead_bytes = d.context_bytes + d.nccl_bytes;
  }
  out.line_bytes = plan.budget_bytes - out.overhead_bytes;

  PlanCurve base = curve_of(ctx, Candidate{}, out.iteration, max_points);
  base.strategy = "none";
  base.note = "keep everything";
  base.eval = &plan.baseline;
  base.chosen = plan.feasible && plan.strategy == "none";
  out.curves.push_back(std::move(base));
  const std::vector<std::string>& names = strategy_names();
  for (const StrategyResult& r : plan.alternatives) {
    if (!r.applicable) continue;
    PlanCurve c = curve_of(ctx, r.candidate, out.iteration, max_points);
    c.strategy = r.name;
    c.strategy_index = static_cast<int>(std::find(names.begin(), names.end(), r.name) - names.begin());
    c.note = r.note;
    c.eval = &r.eval;
    c.chosen = plan.feasible && plan.strategy == r.name;
    out.curves.push_back(std::move(c));
  }
  return out;
}

}  // namespace headroom
