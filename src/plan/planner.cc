#include "plan/planner.h"

#include <algorithm>
#include <set>

#include "estimate/device_memory.h"
#include "plan/model_chain.h"
#include "sim/device_catalog.h"

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
    if (cuda && is_convolution_kind(op.kind)) d.conv_algorithm = no_ws.count(op.id) ? "memory-optimal" : "fastest";
    out.push_back(std::move(d));
  }
  return out;
}


}  // namespace

Result<Plan> make_plan(const PlanRequest& request) {
  try {
    const EstimateOptions& run = request.run;
    if (run.mode != RunMode::Training) throw InputError("plan works on training steps (--mode train)");
    if (run.micro_batch) throw InputError("plan chooses the micro-batch itself (strategy accumulate); --micro-batch is for estimate");
    if (!run.plan.empty() || !run.checkpoint_ranges.empty()) throw InputError("plan chooses checkpoints itself; --checkpoint is for estimate");
    if (!run.offload_ops.empty()) throw InputError("plan chooses offloads itself; --offload is for estimate");
    if (request.strategy != "auto" &&
        std::find(strategy_names().begin(), strategy_names().end(), request.strategy) == strategy_names().end()) {
      std::string known = "auto";
      for (const std::string& s : strategy_names()) known += ", " + s;
      throw InputError("unknown strategy '" + request.strategy + "' (known: " + known + ")");
    }
    EstimateOptions o = run;
    o.plan = {};
    o.plan.checkpoint_impl = run.plan.checkpoint_impl;  // how the candidates' checkpoints run
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
    plan.baseline_activation_bytes = plan.baseline.exact_at_peak[static_cast<size_t>(Category::SavedActivations)] +
                                     plan.baseline.exact_at_peak[static_cast<size_t>(Category::Activations)];
    plan.stages = chain_stages(ctx.graph(0));
    if (!plan.stages.empty()) plan.chain = model_chain(ctx, plan.stages);

    std::vector<std::string> names;
    if (request.strategy == "auto") names = strategy_names();
    else names = {request.strategy};
    for (const std::string& n : names) {
      if (request.progress) request.progress(n, static_cast<int>(plan.alternatives.size()) + 1, static_cast<int>(names.size()));
      plan.alternatives.push_back(run_strategy(n, ctx, plan.stages, plan.baseline));
    }
    // The foreach optimizer keeps two parameter-sized lists during Adam's update; the
    // single-tensor loop only one parameter's. Same numerics, more launches: when the optimizer
    // holds the peak or nothing fits, every strategy is tried again with it.
    const bool any_fits = plan.baseline.feasible ||
        std::any_of(plan.alternatives.begin(), plan.alternatives.end(), [](const StrategyResult& r) { return r.applicable && r.eval.feasible; });
    std::optional<PlanContext> single;
    if (!plan.baseline.feasible && ctx.foreach() && o.optimizer != OptimizerKind::Sgd &&
        (!any_fits || plan.baseline.peak_phase == Phase::Optimizer)) {
      EstimateOptions so = o;
      so.foreach = false;
      single.emplace(so, budget, CostModel(cost_spec, request.constants));
      StrategyResult keep;
      keep.name = "single-tensor";
      keep.note = "keep everything, single-tensor optimizer";
      keep.eval = single->evaluate(Candidate{});
      keep.single_tensor_optimizer = true;
      plan.alternatives.push_back(keep);
      for (const std::string& n : names) {
        if (request.progress) request.progress(n + "+single-tensor", static_cast<int>(plan.alternatives.size()) + 1, static_cast<int>(2 * names.size() + 1));
        StrategyResult r = run_strategy(n, *single, plan.stages, keep.eval);
        r.name += "+single-tensor";
        r.single_tensor_optimizer = true;
        plan.alternatives.push_back(r);
      }
    }

    StrategyResult none;
    none.name = "none";
    none.note = "keep everything";
    none.eval = plan.baseline;
    if (plan.baseline.feasible && request.strategy == "auto") {
      plan.chosen = none;
    } else {
      const StrategyResult* best = nullptr;
      for (const StrategyResult& r : plan.alternatives) {
        if (r.applicable && r.eval.feasible && (!best || better(r.eval, best->eval))) best = &r;
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
    const Graph& chosen_graph = ctx.graph(plan.feasible ? plan.chosen.candidate.micro_batch : 0);
    plan.decisions = decisions_of(chosen_graph, plan.feasible ? plan.chosen.candidate : Candidate{}, o.device == "cuda");
    if (plan.feasible) {
      for (const CheckpointSegment& s : plan.chosen.candidate.plan.checkpoints) {
        plan.checkpoint_regions.push_back(chosen_graph.op(s.first).name + ".." + chosen_graph.op(s.last).name);
      }
    }
    plan.foreach = plan.chosen.single_tensor_optimizer ? false : ctx.foreach();
    plan.evaluations = ctx.evaluations() + (single ? single->evaluations() : 0);

    // Numerics-changing options, listed, never applied.
    if (o.precision == Precision::Fp32) {
      for (Precision p : {Precision::AmpFp16, Precision::AmpBf16, Precision::Bf16}) {
        EstimateOptions alt = o;
        alt.precision = p;
        PlanContext actx(alt, budget, CostModel(cost_spec, request.constants));
        Evaluation e = actx.evaluate(Candidate{});
        NumericsOption n{std::string(precision_name(p)), e.feasible, e.peak_bytes, e.time.total_ms, "none"};
        if (!e.feasible) {
          // Not enough alone: the fastest of accumulation and checkpointing at that precision
          // (then with the single-tensor optimizer), so the list says what would make it fit.
          std::vector<PlanContext*> contexts = {&actx};
          std::optional<PlanContext> single_ctx;
          if (actx.foreach() && alt.optimizer != OptimizerKind::Sgd) {
            EstimateOptions st = alt;
            st.foreach = false;
            single_ctx.emplace(st, budget, CostModel(cost_spec, request.constants));
            contexts.push_back(&*single_ctx);
          }
          for (PlanContext* c : contexts) {
            for (const char* strategy : {"accumulate", "checkpoint"}) {
              StrategyResult r = run_strategy(strategy, *c, plan.stages, e);
              if (!r.applicable || !r.eval.feasible) continue;
              if (!n.feasible || r.eval.time.total_ms < n.step_time_ms) {
                n = {n.name, true, r.eval.peak_bytes, r.eval.time.total_ms,
                     std::string(strategy) + (c == &actx ? "" : "+single-tensor")};
              }
            }
            if (n.feasible) break;
          }
          if (!n.feasible) n.with = "nothing fits";
        }
        plan.numerics.push_back(n);
      }
    }
    return plan;
  } catch (const InputError& e) {
    return Result<Plan>::failure(e.what());
  }
}

}  // namespace headroom
