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
//                first backward runs;
//   interleaved  Megatron's forward_backward_pipelining_with_interleaving: each rank holds v
//                model chunks (virtual stages c * P + i); forward k runs chunk
//                (k mod P v) div P on micro-batch (k div P v) * P + k mod P, backward k the
//                chunks in reverse; (P - i - 1) * 2 + (v - 1) * P warm-up forwards (all m v when
//                m == P), then one forward and one backward in turn. REQUIRES m % P == 0.
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
  int chunk = 0;  // the model chunk (interleaved; 0 otherwise)
  friend bool operator==(const PipelineAction&, const PipelineAction&) = default;
};

// REQUIRES: stages >= 1, 0 <= stage < stages, micro_batches >= 1; virtual_stages >= 2 and
// micro_batches % stages == 0 for Interleaved (1 otherwise).
std::vector<PipelineAction> pipeline_order(PipelineScheduleKind kind, int stages, int stage, int micro_batches, int virtual_stages = 1);

// The most (chunk, micro-batch) forwards whose backward has not run yet, over the order.
int max_in_flight(const std::vector<PipelineAction>& order);

// One model chunk of a pipeline rank's graph: ops first..last (inclusive) run its forward.
struct PipelineChunk {
  OpId first = 0, last = kNone;
  TensorId received = kNone;  // the hidden state received from the previous (virtual) stage; kNone on the model's first
  TensorId output = kNone;    // what the backward starts from: the hidden state sent on, or the model's loss
  bool sends = false;         // output is a hidden state sent to the next (virtual) stage
};

// What the interpreter needs to run a pipeline rank's program (ScheduleOptions::pipeline).
struct PipelineRun {
  bool active = false;
  std::vector<PipelineAction> order;  // one optimizer step's forwards and backwards
  std::vector<PipelineChunk> chunks;  // one, or v under the interleaved schedule
  // The schedule `order` is pipeline_order() of, so that the same schedule over fewer
  // micro-batches can be built (schedule/micro_batch_fold.h); stages 0: not known, not folded.
  PipelineScheduleKind kind = PipelineScheduleKind::OneFOneB;
  int stages = 0;
  int stage = 0;
};

}  // namespace headroom
