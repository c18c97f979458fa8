#include "estimate/pipeline_estimate.h"

#include <string>

#include "util/error.h"

namespace headroom {

PipelineStageRun pipeline_stage_program(const Graph& model, const ScheduleOptions& base, PipelineScheduleKind kind, int stages, int stage,
                                        int micro_batches) {
  PipelineStageRun r;
  r.stage = pipeline_stage_graph(model, stages, stage);
  ScheduleOptions so = base;
  so.micro_batches = micro_batches;
  so.pipeline.active = true;
  so.pipeline.order = pipeline_order(kind, stages, stage, micro_batches);
  so.pipeline.received = r.stage.received;
  so.pipeline.sends = r.stage.sends;
  r.in_flight_micro_batches = max_in_flight(so.pipeline.order);
  r.program = build_program(r.stage.graph, so);
  return r;
}

PipelineStages simulate_pipeline_stages(const Graph& model, const ScheduleOptions& base, const ParallelOptions& p, int micro_batches,
                                        bool micro_batch_given) {
  const int stages = static_cast<int>(p.pipeline_parallel);
  if (!micro_batch_given) {
    throw InputError("--pipeline-parallel needs --micro-batch m (and --grad-accum k: the k micro-batches the schedule pipelines)");
  }
  if (!base.plan.empty()) throw InputError("--checkpoint and --offload with --pipeline-parallel are not modelled yet");
  const PipelineScheduleKind kind = p.schedule();
  if (kind == PipelineScheduleKind::Interleaved) {
    throw InputError("--pipeline-schedule interleaved is not simulated yet (1f1b and gpipe are)");
  }
  blocks_per_stage(model, stages, model.model);  // the split's InputErrors before any stage is built
  PipelineStages best;
  for (int stage = 0; stage < stages; ++stage) {
    PipelineStageRun run = pipeline_stage_program(model, base, kind, stages, stage, micro_batches);
    SimResult sim = simulate(run.program);
    best.stage_peak_bytes.push_back(sim.peak.bytes);
    if (stage == 0 || sim.peak.bytes > best.sim.peak.bytes) {
      best.graph = std::move(run.stage.graph);
      best.program = std::move(run.program);
      best.sim = std::move(sim);
      best.stage = stage;
      best.in_flight_micro_batches = run.in_flight_micro_batches;
    }
  }
  return best;
}

void add_pipeline_summary(const PipelineStages& s, PerGpu& g) {
  g.stage = s.stage;
  g.in_flight_micro_batches = s.in_flight_micro_batches;
  g.stage_peak_bytes = s.stage_peak_bytes;
  g.layout += ", stage " + std::to_string(s.stage) + " of " + std::to_string(s.stage_peak_bytes.size()) + " (the highest peak; " +
              std::to_string(s.in_flight_micro_batches) + " micro-batches in flight)";
}

}  // namespace headroom
