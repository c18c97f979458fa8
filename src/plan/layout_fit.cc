#include "plan/layout_fit.h"

#include <algorithm>

#include "schedule/transformer_blocks.h"

namespace headroom {

EngineFit fit_engine(PlanContext& ctx, const std::vector<int64_t>& micro_batches, bool try_checkpointing,
                     const std::function<double(const Evaluation&, int64_t)>& step_ms) {
  EngineFit best;
  bool seen = false;
  auto consider = [&](const Evaluation& e, int64_t m, bool checkpointed, const MemoryPlan& plan) {
    const double ms = step_ms(e, m);
    if (best.found && ms >= best.step_ms) return;
    best.found = true;
    best.micro_batch = m;
    best.checkpointed = checkpointed;
    best.plan = plan;
    best.evaluation = e;
    best.step_ms = ms;
  };
  auto smallest = [&](int64_t peak) {
    best.smallest_peak_bytes = seen ? std::min(best.smallest_peak_bytes, peak) : peak;
    seen = true;
  };
  bool checkpointed_fit = false;
  for (int64_t m : micro_batches) {
    Evaluation plain = ctx.evaluate(Candidate{{}, m});
    ++best.evaluations;
    smallest(plain.peak_bytes);
    if (plain.feasible) {
      consider(plain, m, false, {});
      break;
    }
    // Once blocks are checkpointed at some size, checkpointing a smaller one only adds steps.
    if (!try_checkpointing || checkpointed_fit) continue;
    MemoryPlan plan;
    plan.checkpoints = transformer_blocks(ctx.graph(m)).segments;
    if (plan.checkpoints.empty()) continue;
    Evaluation ck = ctx.evaluate(Candidate{plan, m});
    ++best.evaluations;
    smallest(ck.peak_bytes);
    if (ck.feasible) {
      consider(ck, m, true, plan);
      checkpointed_fit = true;
    }
  }
  return best;
}

}  // namespace headroom
