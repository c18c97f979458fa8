#include "plan/evaluate.h"

#include <optional>
#include <utility>

#include "estimate/parallel.h"
#include "estimate/pipeline_estimate.h"
#include "schedule/held_state.h"
#include "sim/simulate.h"
#include "util/error.h"

namespace headroom {

PlanContext::PlanContext(EstimateOptions options, int64_t budget_bytes, CostModel cost)
    : options_(std::move(options)), budget_(budget_bytes), cost_(std::move(cost)) {
  // The run's plan is the candidates' to make; only how their checkpoints run is the user's.
  const CheckpointImpl impl = options_.plan.checkpoint_impl;
  options_.plan = {};
  options_.plan.checkpoint_impl = impl;
  schedule_ = schedule_options(options_);
}

PlanContext::PlanContext(EstimateOptions options, int64_t budget_bytes, CostModel cost, LayoutGraphs& shared)
    : PlanContext(std::move(options), budget_bytes, std::move(cost)) {
  shared_ = &shared;
  ranks_ = RankGraphCache(&shared.cuts());
}

std::shared_ptr<const Graph> LayoutGraphs::get(const EstimateOptions& options, int64_t batch) {
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::shared_ptr<Entry>& slot = entries_[{options.parallel.tensor_parallel, options.parallel.sequence_parallel, batch}];
    if (!slot) slot = std::make_shared<Entry>();
    entry = slot;
  }
  // A build that throws leaves the graph unset: the next caller builds (and throws) again.
  std::lock_guard<std::mutex> lock(entry->building);
  if (!entry->graph) entry->graph = std::make_shared<const Graph>(build_graph(options, batch));
  return entry->graph;
}

const Graph& PlanContext::graph(int64_t micro_batch) {
  const int64_t b = micro_batch > 0 ? micro_batch : options_.batch;
  auto it = graphs_.find(b);
  if (it == graphs_.end()) {
    it = graphs_.emplace(b, shared_ ? shared_->get(options_, b) : std::make_shared<const Graph>(build_graph(options_, b))).first;
  }
  return *it->second;
}

Program PlanContext::program(const Candidate& c) { return build(c, /*names=*/true); }

Program PlanContext::build(const Candidate& c, bool names) {
  const int64_t micro = c.micro_batch > 0 ? c.micro_batch : options_.batch;
  HEADROOM_CHECK(options_.batch % micro == 0, "micro-batch must divide the batch");
  ScheduleOptions s = schedule_;
  s.micro_batches = static_cast<int>(options_.batch / micro);
  s.plan = c.plan;
  s.plan.checkpoint_impl = options_.plan.checkpoint_impl;
  s.names = names;
  const Graph& g = graph(micro);
  resolve_fsdp_wrap(options_.parallel, g, s.sharding);  // FSDP families: one unit per block
  return build_program(g, s);
}

namespace {

bool same_candidate(const Candidate& a, const Candidate& b) {
  return a.micro_batch == b.micro_batch && a.plan == b.plan;
}

}  // namespace

Evaluation PlanContext::evaluate(const Candidate& c) {
  ++evaluations_;
  for (auto& [asked, answer] : evaluated_) {
    if (!same_candidate(asked, c)) continue;
    if (!answer.peak_is_lower_bound || c.fit_only) return answer;
    answer = simulate_candidate(c);
    ++resimulated_;
    return answer;
  }
  Evaluation e = simulate_candidate(c);
  evaluated_.emplace_back(c, e);
  return e;
}

Evaluation PlanContext::simulate_candidate(const Candidate& c) {
  const int64_t micro = c.micro_batch > 0 ? c.micro_batch : options_.batch;
  // A pipeline layout is the program of its stage with the highest peak (estimate/pipeline_estimate.h).
  std::optional<PipelineStages> stages;
  if (options_.parallel.pipeline_parallel > 1) {
    ScheduleOptions s = schedule_;
    s.plan = c.plan;
    const int micro_batches = static_cast<int>(options_.batch / micro);
    s.micro_batches = micro_batches;
    s.names = false;  // an evaluation reads peaks and times only
    StageSearch search;
    if (layout_search_) search = {.model_state_limit = budget_, .live_limit = c.fit_only ? budget_ : 0, .peak_only = true};
    stages = simulate_pipeline_stages(graph(micro), s, options_.parallel, micro_batches, /*micro_batch_given=*/true, /*every_stage=*/false,
                                      &ranks_, search);
  }
  Program p = stages ? std::move(stages->program) : build(c, /*names=*/false);
  Evaluation e;
  e.micro_batch = micro;
  e.micro_batches = static_cast<int>(options_.batch / micro);
  const ModelStateBytes state = stages && stages->model_state ? *stages->model_state : model_state(p);
  e.held_bytes = state.at_end;
  e.optimizer_step_bytes = state.in_optimizer_step;
  if (layout_search_ && e.optimizer_step_bytes > budget_) {
    e.peak_bytes = e.optimizer_step_bytes;
    return e;
  }
  if (stages && stages->live_over) {
    // Any device total holds at least the live bytes (the allocator's blocks, the context).
    e.peak_bytes = stages->sim.peak.bytes;
    e.peak_is_lower_bound = true;
    return e;
  }
  const bool on_gpu = options_.device == "cuda" && options_.gpu;
  SimResult sim = stages ? std::move(stages->sim) : layout_search_ && on_gpu ? SimResult{} : simulate(p);
  e.exact_peak_bytes = sim.peak.bytes;
  e.exact_at_peak = sim.at_peak;
  if (sim.peak.step >= 0) {
    const Step& st = p.steps[static_cast<size_t>(sim.peak.step)];
    e.peak_phase = st.phase;
    // Built without names, an op step's label is its op's name (ScheduleOptions::names).
    const Graph& g = stages ? *stages->graph : graph(micro);
    e.peak_op = st.label.empty() && st.op != kNone ? g.op(st.op).name : st.label;
  }
  if (on_gpu) {
    GpuOptions g = *options_.gpu;
    g.gpu_memory = budget_;
    g.margin = 0;
    DeviceMemory d = device_memory(p, g);
    e.peak_bytes = d.device_total_bytes;
    e.allocator_oom = d.allocator_oom;
  } else {
    e.peak_bytes = sim.peak.bytes;
  }
  e.feasible = !e.allocator_oom && e.peak_bytes <= budget_;
  if (layout_search_ && !e.feasible) return e;
  // A stage's checkpoints are on its own graph (schedule/pipeline_plan.h).
  e.time = iteration_time(cost_, stages ? *stages->graph : graph(micro), p, stages ? stages->plan : c.plan, options_.optimizer,
                          options_.iterations);
  return e;
}

}  // namespace headroom
