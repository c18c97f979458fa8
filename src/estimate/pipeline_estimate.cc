#include "estimate/pipeline_estimate.h"

#include <string>

#include "schedule/held_state.h"
#include "schedule/pipeline_plan.h"
#include "util/error.h"

namespace headroom {

PipelineStageRun pipeline_stage_program(const Graph& model, const ScheduleOptions& base, PipelineScheduleKind kind, int stages, int stage,
                                        int micro_batches, int virtual_stages) {
  return pipeline_stage_program(model, pipeline_cut(model), base, kind, stages, stage, micro_batches, virtual_stages);
}

PipelineStageRun pipeline_stage_program(const Graph& model, const PipelineCut& cut, const ScheduleOptions& base, PipelineScheduleKind kind, int stages,
                                        int stage, int micro_batches, int virtual_stages) {
  PipelineStageRun r;
  r.rank = pipeline_rank_graph(model, cut, stages, kind == PipelineScheduleKind::Interleaved ? virtual_stages : 1, stage);
  ScheduleOptions so = base;
  so.micro_batches = micro_batches;
  so.pipeline.active = true;
  so.pipeline.order = pipeline_order(kind, stages, stage, micro_batches, static_cast<int>(r.rank.chunks.size()));
  so.pipeline.chunks = r.rank.chunks;
  so.pipeline.kind = kind;
  so.pipeline.stages = stages;
  so.pipeline.stage = stage;
  so.plan = plan_for_rank(model, r.rank.graph, base.plan);
  r.plan = so.plan;
  r.in_flight_micro_batches = max_in_flight(so.pipeline.order);
  r.program = build_program(r.rank.graph, so);
  return r;
}

PipelineStages simulate_pipeline_stages(const Graph& model, const ScheduleOptions& base, const ParallelOptions& p, int micro_batches,
                                        bool micro_batch_given, bool every_stage, int64_t model_state_limit) {
  const int stages = static_cast<int>(p.pipeline_parallel);
  if (!micro_batch_given) {
    throw InputError("--pipeline-parallel needs --micro-batch m (and --grad-accum k: the k micro-batches the schedule pipelines)");
  }
  if (!base.plan.offload.empty()) throw InputError("--offload with --pipeline-parallel is not modelled yet (checkpointing is: --checkpoint blocks or attention)");
  if (!base.plan.no_conv_workspace.empty()) throw InputError("convolution workspace choices with --pipeline-parallel are not modelled");
  const PipelineScheduleKind kind = p.schedule();
  const PipelineCut cut = pipeline_cut(model);
  const int per_stage = blocks_per_stage(cut, stages, model.model);  // the split's InputErrors before any stage is built
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
    PipelineStageRun run = pipeline_stage_program(model, cut, base, kind, stages, stage, micro_batches, chunks);
    const bool over = model_state_limit > 0 && model_state(run.program).in_optimizer_step > model_state_limit;
    SimResult sim = over ? SimResult{} : simulate(run.program);
    if (!over) best.stage_peak_bytes.push_back(sim.peak.bytes);
    if (over || stage == 0 || sim.peak.bytes > best.sim.peak.bytes) {
      best.graph = std::move(run.rank.graph);
      best.program = std::move(run.program);
      best.sim = std::move(sim);
      best.stage = stage;
      best.in_flight_micro_batches = run.in_flight_micro_batches;
      best.plan = std::move(run.plan);
    }
    if (over) break;
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
