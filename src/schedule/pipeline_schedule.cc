#include "schedule/pipeline_schedule.h"

#include <algorithm>

#include "util/error.h"

namespace headroom {

std::optional<PipelineScheduleKind> parse_pipeline_schedule(std::string_view s) {
  for (PipelineScheduleKind k : {PipelineScheduleKind::OneFOneB, PipelineScheduleKind::GPipe, PipelineScheduleKind::Interleaved}) {
    if (pipeline_schedule_name(k) == s) return k;
  }
  return std::nullopt;
}

std::string_view pipeline_schedule_name(PipelineScheduleKind k) {
  switch (k) {
    case PipelineScheduleKind::OneFOneB: return "1f1b";
    case PipelineScheduleKind::GPipe: return "gpipe";
    case PipelineScheduleKind::Interleaved: return "interleaved";
  }
  return "?";
}

namespace {

// forward_backward_pipelining_with_interleaving's get_model_chunk_id and
// get_microbatch_id_in_model_chunk (micro-batches 1-based here).
PipelineAction interleaved_action(bool forward, int k, int stages, int chunks) {
  const int in_group = k % (stages * chunks);
  int chunk = in_group / stages;
  if (!forward) chunk = chunks - chunk - 1;
  return {forward, (k / (stages * chunks)) * stages + k % stages + 1, chunk};
}

std::vector<PipelineAction> interleaved_order(int stages, int stage, int micro_batches, int chunks) {
  HEADROOM_CHECK(chunks >= 2 && micro_batches % stages == 0, "bad interleaved order request");
  const int total = micro_batches * chunks;
  const int warmup = micro_batches == stages ? total : std::min((stages - stage - 1) * 2 + (chunks - 1) * stages, total);
  std::vector<PipelineAction> order;
  for (int k = 0; k < warmup; ++k) order.push_back(interleaved_action(true, k, stages, chunks));
  for (int k = 0; k < total - warmup; ++k) {
    order.push_back(interleaved_action(true, k + warmup, stages, chunks));
    order.push_back(interleaved_action(false, k, stages, chunks));
  }
  for (int k = total - warmup; k < total; ++k) order.push_back(interleaved_action(false, k, stages, chunks));
  return order;
}

}  // namespace

std::vector<PipelineAction> pipeline_order(PipelineScheduleKind kind, int stages, int stage, int micro_batches, int virtual_stages) {
  HEADROOM_CHECK(stages >= 1 && stage >= 0 && stage < stages && micro_batches >= 1, "bad pipeline order request");
  if (kind == PipelineScheduleKind::Interleaved) return interleaved_order(stages, stage, micro_batches, virtual_stages);
  std::vector<PipelineAction> order;
  // GPipe: every forward is a warm-up forward.
  const int warmup = kind == PipelineScheduleKind::GPipe ? micro_batches : std::min(stages - stage - 1, micro_batches);
  int next_forward = 1, next_backward = 1;
  for (int k = 0; k < warmup; ++k) order.push_back({true, next_forward++});
  // Steady state (forward_backward_pipelining_without_interleaving's num_microbatches_remaining).
  for (int k = 0; k < micro_batches - warmup; ++k) {
    order.push_back({true, next_forward++});
    order.push_back({false, next_backward++});
  }
  // Cool-down: the warm-up micro-batches' backwards.
  while (next_backward <= micro_batches) order.push_back({false, next_backward++});
  return order;
}

int max_in_flight(const std::vector<PipelineAction>& order) {
  int live = 0, most = 0;
  for (const PipelineAction& a : order) {
    live += a.forward ? 1 : -1;
    most = std::max(most, live);
  }
  return most;
}

}  // namespace headroom
