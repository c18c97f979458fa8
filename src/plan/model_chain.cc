#include "plan/model_chain.h"

#include <algorithm>

#include "plan/strategies.h"

namespace headroom {

Chain model_chain(PlanContext& ctx, const std::vector<Stage>& stages, const Candidate& base) {
  const Graph& g = ctx.graph(base.micro_batch);
  std::vector<SegmentStage> stats = stage_statistics(ctx, base, stages);
  Chain c;
  const size_t n = stages.size();
  int64_t inputs = 0, outputs = 0;
  for (TensorId t : g.inputs) inputs += g.tensor(t).bytes();
  for (TensorId t : g.outputs) outputs += g.tensor(t).bytes();
  c.x_bytes.push_back(inputs);
  for (size_t i = 1; i < n; ++i) c.x_bytes.push_back(stages[i].boundary_bytes);
  c.x_bytes.push_back(outputs);
  for (size_t i = 0; i < n; ++i) {
    double bwd = 0;
    for (OpId o = stages[i].first; o <= stages[i].last; ++o) bwd += ctx.cost().op_cost(g, g.op(o)).backward_ms;
    c.fwd_ms.push_back(stats[i].forward_ms);
    c.bwd_ms.push_back(bwd);
    c.xbar_bytes.push_back(std::max(stats[i].kept_bytes, c.x_bytes[i + 1]));
    c.fwd_tmp_bytes.push_back(0);
    c.bwd_tmp_bytes.push_back(0);
  }
  for (const Op& op : g.ops) {
    if (op.stage != OpStage::Loss) continue;
    OpCost oc = ctx.cost().op_cost(g, op);
    c.loss_ms += oc.forward_ms + oc.backward_ms;
  }
  validate_chain(c);
  return c;
}

}  // namespace headroom
