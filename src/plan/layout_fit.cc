#include "plan/layout_fit.h"

#include <algorithm>

#include "schedule/transformer_blocks.h"

namespace headroom {

MemoryPlan recompute_plan(const Graph& g, Recompute level) {
  MemoryPlan plan;
  if (level == Recompute::Full) plan.checkpoints = transformer_blocks(g).segments;
  if (level == Recompute::Selective) plan.checkpoints = attention_cores(g);
  return plan;
}

EngineFit fit_engine(PlanContext& ctx, const std::vector<int64_t>& micro_batches, const std::vector<Recompute>& ladder,
                     const std::function<double(const Evaluation&, int64_t)>& step_ms, bool fit_assured) {
  EngineFit best;
  bool seen = false;
  auto consider = [&](const Evaluation& e, int64_t m, Recompute level, const MemoryPlan& plan) {
    const double ms = step_ms(e, m);
    if (best.found && ms >= best.step_ms) return;
    best.found = true;
    best.micro_batch = m;
    best.checkpointed = level != Recompute::None;
    best.recompute = level;
    best.plan = plan;
    best.evaluation = e;
    best.step_ms = ms;
  };
  auto smallest = [&](int64_t peak, int64_t m, Recompute level) {
    if (seen && peak >= best.smallest_peak_bytes) return;
    best.smallest_peak_bytes = peak;
    best.smallest_peak_micro_batch = m;
    best.smallest_peak_recompute = level;
    seen = true;
  };
  // The lightest recompute level that fitted at a larger micro-batch (ladder index).
  size_t fitted_level = ladder.size();
  for (int64_t m : micro_batches) {
    for (size_t i = 0; i < ladder.size() && i < fitted_level; ++i) {
      const Recompute level = ladder[i];
      MemoryPlan plan = recompute_plan(ctx.graph(m), level);
      if (level != Recompute::None && plan.checkpoints.empty()) continue;
      Evaluation e = ctx.evaluate(Candidate{plan, m, fit_assured});
      ++best.evaluations;
      smallest(e.peak_bytes, m, level);
      if (e.optimizer_step_bytes > ctx.budget_bytes()) {
        best.model_state_over_budget = e;
        return best;
      }
      if (!e.feasible) continue;
      consider(e, m, level, plan);
      if (level == Recompute::None) return best;
      fitted_level = i;
      break;
    }
  }
  return best;
}

EngineFit fit_engine(PlanContext& ctx, const std::vector<int64_t>& micro_batches, bool try_checkpointing,
                     const std::function<double(const Evaluation&, int64_t)>& step_ms) {
  return fit_engine(ctx, micro_batches, try_checkpointing ? std::vector<Recompute>{Recompute::None, Recompute::Full} : std::vector<Recompute>{Recompute::None},
                    step_ms);
}

}  // namespace headroom
