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

std::vector<PipelineAction> pipeline_order(PipelineScheduleKind kind, int stages, int stage, int micro_batches) {
  HEADROOM_CHECK(stages >= 1 && stage >= 0 && stage < stages && micro_batches >= 1, "bad pipeline order request");
  HEADROOM_CHECK(kind != PipelineScheduleKind::Interleaved, "the interleaved order is not a single-chunk order");
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
