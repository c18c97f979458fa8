#include "estimate/pipeline_estimate.h"

#include <optional>
#include <string>

#include "schedule/held_state.h"
#include "schedule/pipeline_plan.h"
#include "util/error.h"

namespace headroom {

namespace {

// The program of `rank` (cut from `model` as stage `stage` of `stages`) under `kind`: its
// program, checkpoints on its graph and micro-batches in flight.
void build_stage(const Graph& model, const RankGraph& rank, const ScheduleOptions& base, PipelineScheduleKind kind, int stages, int stage,
                 int micro_batches, Program& program, MemoryPlan& plan, int& in_flight) {
  ScheduleOptions so = base;
  so.micro_batches = micro_batches;
  so.pipeline.active = true;
  so.pipeline.order = pipeline_order(kind, stages, stage, micro_batches, static_cast<int>(rank.chunks.size()));
  so.pipeline.chunks = rank.chunks;
  so.pipeline.kind = kind;
  so.pipeline.stages = stages;
  so.pipeline.stage = stage;
  so.plan = plan_for_rank(model, rank.graph, base.plan);
  plan = so.plan;
  in_flight = max_in_flight(so.pipeline.order);
  program = build_program(rank.graph, so);
}

}  // namespace

PipelineStageRun pipeline_stage_program(const Graph& model, const ScheduleOptions& base, PipelineScheduleKind kind, int stages, int stage,
                                        int micro_batches, int virtual_stages) {
  PipelineStageRun r;
  r.rank = pipeline_rank_graph(model, stages, kind == PipelineScheduleKind::Interleaved ? virtual_stages : 1, stage);
  build_stage(model, r.rank, base, kind, stages, stage, micro_batches, r.program, r.plan, r.in_flight_micro_batches);
  return r;
}

const PipelineCut& PipelineCuts::get(const Graph& model) {
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::shared_ptr<Entry>& slot = entries_[&model];
    if (!slot) slot = std::make_shared<Entry>();
    entry = slot;
  }
  // A cut that throws leaves the entry empty: the next caller makes (and throws) again.
  std::lock_guard<std::mutex> lock(entry->making);
  if (!entry->cut) entry->cut = pipeline_cut(model);
  return *entry->cut;
}

const PipelineCut& RankGraphCache::cut(const Graph& model) {
  if (shared_) return shared_->get(model);
  auto it = cuts_.find(&model);
  if (it == cuts_.end()) it = cuts_.emplace(&model, pipeline_cut(model)).first;
  return it->second;
}

std::shared_ptr<const RankGraph> RankGraphCache::get(const Graph& model, int stages, int virtual_stages, int rank) {
  std::shared_ptr<const RankGraph>& slot = ranks_[{&model, stages, virtual_stages, rank}];
  if (!slot) slot = std::make_shared<const RankGraph>(pipeline_rank_graph(model, cut(model), stages, virtual_stages, rank));
  return slot;
}

PipelineStages simulate_pipeline_stages(const Graph& model, const ScheduleOptions& base, const ParallelOptions& p, int micro_batches,
                                        bool micro_batch_given, bool every_stage, RankGraphCache* ranks, const StageSearch& search) {
  const int stages = static_cast<int>(p.pipeline_parallel);
  if (!micro_batch_given) {
    throw InputError("--pipeline-parallel needs --micro-batch m (and --grad-accum k: the k micro-batches the schedule pipelines)");
  }
  if (!base.plan.offload.empty()) throw InputError("--offload with --pipeline-parallel is not modelled yet (checkpointing is: --checkpoint blocks or attention)");
  if (!base.plan.no_conv_workspace.empty()) throw InputError("convolution workspace choices with --pipeline-parallel are not modelled");
  const PipelineScheduleKind kind = p.schedule();
  RankGraphCache own;  // the stages' graphs when the caller keeps none
  RankGraphCache& cache = ranks ? *ranks : own;
  const int per_stage = blocks_per_stage(cache.cut(model), stages, model.model);  // the split's InputErrors before any stage is built
  int chunks = 1;
  if (kind == PipelineScheduleKind::Interleaved) {
    chunks = static_cast<int>(*p.virtual_stages);
    if (per_stage % chunks != 0) {
      throw InputError("--virtual-stages " + std::to_string(chunks) + ": the " + std::to_string(per_stage) + " layers of each pipeline stage do not split into " +
                       std::to_string(chunks) + " model chunks (Megatron: layers per stage divisible by the virtual pipeline size)");
    }
    if (micro_batches % stages != 0) {
      throw InputError("--pipeline-schedule interleaved: the " + std::to_string(micro_batches) + " micro-batches (--grad-accum) are not a multiple of --pipeline-parallel " +
                       std::to_string(stages) + " (Megatron's forward_backward_pipelining_with_interleaving requires it)");
    }
  }
  PipelineStages best;
  best.layers_per_stage = per_stage;
  for (int stage = 0; stage < stages; ++stage) {
    if (!every_stage && stage >= 2 && stage < stages - 1) continue;  // bounded by stage 1 (header)
    const int rank_chunks = kind == PipelineScheduleKind::Interleaved ? chunks : 1;
    const std::shared_ptr<const RankGraph> rank = cache.get(model, stages, rank_chunks, stage);
    Program program;
    MemoryPlan plan;
    int in_flight = 0;
    build_stage(model, *rank, base, kind, stages, stage, micro_batches, program, plan, in_flight);
    std::optional<ModelStateBytes> state;
    if (search.model_state_limit > 0) state = model_state(program);
    const bool over = state && state->in_optimizer_step > search.model_state_limit;
    SimResult sim;
    if (!over) {
      if (search.peak_only) sim.peak.bytes = live_peak_bytes(program);
      else sim = simulate(program);
      best.stage_peak_bytes.push_back(sim.peak.bytes);
    }
    const bool live_over = !over && search.live_limit > 0 && sim.peak.bytes > search.live_limit;
    if (over || live_over || stage == 0 || sim.peak.bytes > best.sim.peak.bytes) {
      best.graph = std::shared_ptr<const Graph>(rank, &rank->graph);
      best.program = std::move(program);
      best.sim = std::move(sim);
      best.stage = stage;
      best.in_flight_micro_batches = in_flight;
      best.plan = std::move(plan);
      best.model_state = state;
      best.live_over = live_over;
    }
    if (over || live_over) break;
  }
  return best;
}

void add_pipeline_summary(const PipelineStages& s, PerGpu& g) {
  g.stage = s.stage;
  g.in_flight_micro_batches = s.in_flight_micro_batches;
  g.layers_per_stage = s.layers_per_stage;
  g.stage_peak_bytes = s.stage_peak_bytes;
  g.layout += ", stage " + std::to_string(s.stage) + " of " + std::to_string(g.pipeline_parallel) + " (the highest peak; " +
              std::to_string(s.in_flight_micro_batches) + (s.in_flight_micro_batches == 1 ? " micro-batch" : " micro-batches") + " in flight)";
}

}  // namespace headroom
