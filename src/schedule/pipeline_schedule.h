// The order in which one pipeline rank runs the forwards and backwards of its micro-batches in
// one optimizer step, per schedule (docs/distributed.md, "Pipeline parallelism"). The
// interpreter replays this order on the rank's stage graph (schedule/interpreter_pipeline.cc), so
// what a schedule keeps in flight is simulated, not counted by a formula.
//
//   gpipe        all m forwards, then all m backwards (GPipe, Huang et al. 2019): m micro-batches
//                of activations are held before the first backward;
//   1f1b         Megatron's forward_backward_pipelining_without_interleaving
//                (megatron/core/pipeline_parallel/schedules.py): stage i runs
//                min(P - i - 1, m) warm-up forwards, then one forward and one backward in turn,
//                then the remaining backwards; min(P - i, m) micro-batches are in flight when the
//                first backward runs.
//
// Invariants: every micro-batch 1..m appears once as a forward and once as a backward, its
// forward first; backwards run in micro-batch order.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace headroom {

enum class PipelineScheduleKind : uint8_t { OneFOneB, GPipe, Interleaved };
std::optional<PipelineScheduleKind> parse_pipeline_schedule(std::string_view s);
std::string_view pipeline_schedule_name(PipelineScheduleKind k);

struct PipelineAction {
  bool forward = true;
  int micro = 1;  // 1-based micro-batch
  friend bool operator==(const PipelineAction&, const PipelineAction&) = default;
};

// REQUIRES: stages >= 1, 0 <= stage < stages, micro_batches >= 1; kind is OneFOneB or GPipe.
std::vector<PipelineAction> pipeline_order(PipelineScheduleKind kind, int stages, int stage, int micro_batches);

// The most micro-batches whose forward has run and whose backward has not, over the order.
int max_in_flight(const std::vector<PipelineAction>& order);

// What the interpreter needs to run a pipeline rank's program (ScheduleOptions::pipeline).
struct PipelineRun {
  bool active = false;
  std::vector<PipelineAction> order;  // one optimizer step's forwards and backwards
  TensorId received = kNone;          // the stage graph's received hidden state (not the first stage)
  bool sends = false;                 // graph.loss is the hidden state sent on (not the last stage)
};

}  // namespace headroom
