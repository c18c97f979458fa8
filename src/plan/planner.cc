#include "plan/planner.h"

#include <algorithm>
#include <set>

#include "estimate/device_memory.h"
#include "sim/device_catalog.h"
#include "sim/simulate.h"

namespace headroom {
namespace {

std::vector<LayerDecision> decisions_of(const Graph& g, const Candidate& c, bool cuda) {
  std::vector<std::string> action(g.ops.size(), "keep");
  for (const CheckpointSegment& s : c.plan.checkpoints) {
    for (OpId o = s.first; o <= s.last; ++o) action[static_cast<size_t>(o)] = "recompute";
  }
  for (OpId o : c.plan.offload) action[static_cast<size_t>(o)] = "offload";
  std::set<OpId> no_ws(c.plan.no_conv_workspace.begin(), c.plan.no_conv_workspace.end());
  std::vector<LayerDecision> out;
  for (const Op& op : g.ops) {
    if (op.stage != OpStage::Model || (op.flops == 0 && op.bytes_moved == 0)) continue;  // views
    LayerDecision d{op.name, action[static_cast<size_t>(op.id)], "", op.id};
    if (cuda && op.kind == OpKind::Conv2d) d.conv_algorithm = no_ws.count(op.id) ? "memory-optimal" : "fastest";
    out.push_back(std::move(d));
  }
  return out;
}

bool faster(const StrategyResult& a, const StrategyResult& b) {
  if (a.eval.time.total_ms != b.eval.time.total_ms) return a.eval.time.total_ms < b.eval.time.total_ms;
  return a.eval.peak_bytes < b.eval.peak_bytes;
}

}  // namespace

Result<Plan> make_plan(const PlanRequest& request) {
  try {
    const EstimateOptions& run = request.run;
    if (run.mode != RunMode::Training) throw InputError("plan works on training steps (--mode train)");
    if (request.strategy != "auto" &&
        std::find(strategy_names().begin(), strategy_names().end(), request.strategy) == strategy_names().end()) {
      std::string known = "auto";
      for (const std::string& s : strategy_names()) known += ", " + s;
      throw InputError("unknown strategy '" + request.strategy + "' (known: " + known + ")");
    }
    EstimateOptions o = run;
    o.plan = {};
    int64_t budget = 0;
    if (request.budget_bytes && request.activation_fraction) throw InputError("give a budget or an activation fraction, not both");
    if (request.activation_fraction) {
      const double f = *request.activation_fraction;
      if (!(f > 0 && f <= 1)) throw InputError("the activation fraction must be in (0, 1]");
      if (!o.gpu && o.device == "cuda") throw InputError("an activation fraction needs --gpu");
    }
    if (request.budget_bytes) {
      budget = *request.budget_bytes;
      if (budget <= 0) throw InputError("--budget must be positive");
      if (o.device == "cuda" && !o.gpu) {
        GpuOptions g;
        g.gpu_memory = budget;
        g.context_bytes = 0;
        o.gpu = g;
      }
    } else {
      if (!o.gpu) throw InputError("plan needs --gpu NAME or --budget SIZE");
      const GpuSpec* spec = gpu_spec(*o.gpu);
      const int64_t capacity = o.gpu->gpu_memory.value_or(spec ? spec->memory_bytes : 0);
      if (capacity <= 0) throw InputError("plan needs the GPU's memory (--gpu NAME or --gpu-memory SIZE)");
      budget = capacity - static_cast<int64_t>(static_cast<double>(capacity) * o.gpu->margin);
    }
    if (request.activation_fraction) {
      // The keep-everything run on the whole device, then the budget from its activations.
      EstimateOptions probe = o;
      Result<Estimate> e = estimate(probe);
      if (!e.ok()) throw InputError(e.error());
      const CategoryBytes& at = e.value().breakdown_at_peak;
      const int64_t act = at[static_cast<size_t>(Category::SavedActivations)] + at[static_cast<size_t>(Category::Activations)];
      const int64_t peak = e.value().device ? e.value().device->device_total_bytes : e.value().peak_bytes;
      budget = peak - static_cast<int64_t>(static_cast<double>(act) * (1.0 - *request.activation_fraction));
    }
    std::string cost_gpu = request.cost_gpu;
    if (cost_gpu.empty()) cost_gpu = (o.gpu && !o.gpu->gpu.empty()) ? o.gpu->gpu : kDefaultCostGpu;
    const GpuSpec& cost_spec = DeviceCatalog::builtin().find(cost_gpu);

    PlanContext ctx(o, budget, CostModel(cost_spec, request.constants));
    Plan plan;
    plan.model = o.model;
    plan.batch = o.batch;
    plan.budget_bytes = budget;
    plan.cost_gpu = cost_spec.name;
    plan.run = o;
    plan.constants = request.constants;
    plan.baseline = ctx.evaluate(Candidate{});
    {
      Program base = ctx.program(Candidate{});
      SimResult sim = simulate(base);
      plan.baseline_activation_bytes = sim.at_peak[static_cast<size_t>(Category::SavedActivations)] +
                                       sim.at_peak[static_cast<size_t>(Category::Activations)];
    }
    plan.stages = chain_stages(ctx.graph(0));

    std::vector<std::string> names;
    if (request.strategy == "auto") names = strategy_names();
    else names = {request.strategy};
    for (const std::string& n : names) plan.alternatives.push_back(run_strategy(n, ctx, plan.stages, plan.baseline));

    StrategyResult none;
    none.name = "none";
    none.note = "keep everything";
    none.eval = plan.baseline;
    if (plan.baseline.feasible && request.strategy == "auto") {
      plan.chosen = none;
    } else {
      const StrategyResult* best = nullptr;
      for (const StrategyResult& r : plan.alternatives) {
        if (r.applicable && r.eval.feasible && (!best || faster(r, *best))) best = &r;
      }
      if (best) plan.chosen = *best;
    }
    plan.feasible = plan.chosen.eval.feasible;
    plan.strategy = plan.feasible ? plan.chosen.name : "";
    // The smallest memory anything reached.
    plan.smallest_peak_bytes = plan.baseline.peak_bytes;
    plan.smallest_peak_strategy = "none";
    for (const StrategyResult& r : plan.alternatives) {
      if (r.applicable && r.eval.peak_bytes < plan.smallest_peak_bytes) {
        plan.smallest_peak_bytes = r.eval.peak_bytes;
        plan.smallest_peak_strategy = r.name;
      }
    }
    plan.decisions = decisions_of(ctx.graph(plan.feasible ? plan.chosen.candidate.micro_batch : 0),
                                  plan.feasible ? plan.chosen.candidate : Candidate{}, o.device == "cuda");
    plan.evaluations = ctx.evaluations();

    // Numerics-changing options, listed, never applied.
    if (o.precision == Precision::Fp32) {
      for (Precision p : {Precision::AmpFp16, Precision::AmpBf16, Precision::Bf16}) {
        EstimateOptions alt = o;
        alt.precision = p;
        PlanContext actx(alt, budget, CostModel(cost_spec, request.constants));
        Evaluation e = actx.evaluate(Candidate{});
        plan.numerics.push_back({std::string(precision_name(p)), e.feasible, e.peak_bytes, e.time.total_ms});
      }
    }
    return plan;
  } catch (const InputError& e) {
    return Result<Plan>::failure(e.what());
  }
}

}  // namespace headroom
