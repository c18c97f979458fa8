// Gradient accumulation and pipeline schedules without interpreting every micro-batch. A training
// step of k micro-batches runs each micro-batch as actions (its forward and its backward; under
// the interleaved pipeline schedule one of each per model chunk) in an order: one after the other
// for plain accumulation, a schedule's order on a pipeline stage (schedule/pipeline_schedule.h).
// The interpreter never branches on a micro-batch's number, only on its state: the first
// backward of a step allocates the gradients and later ones add into them, DDP rebuilds its
// buckets at the run's second forward. So an action of micro-batch 3 emits the same steps and
// events as the same action of any micro-batch from 3 to k - 1, on buffers of its own.
// build_program() interprets a few micro-batches (4; for the interleaved schedule the smallest
// multiple of P from 4 on) in the same schedule and writes the step out in the order for k:
// micro-batches 1, 2 and the last from their own actions, every other one from micro-batch 3's.
// The interpreter's cost no longer grows with k (a layout search of Llama-3.1-70B simulates up to
// 64 micro-batches per step, two steps per program).
//
// Invariants:
//  - the result is the program the interpreter builds for k micro-batches, buffer for buffer,
//    step for step and event for event (tests/micro_batch_fold_test.cc compares them for every
//    engine and schedule); buffer ids stay in allocation order;
//  - where the built program does not show that independence, nothing is folded and the caller
//    interprets all k: an action that frees or uses another micro-batch's buffer (other than one
//    of micro-batch 1, 2 or the last that is never freed: the gradients), a step outside the
//    actions that uses micro-batch 3's buffers, buffers not allocated in id order, actions not
//    found as one run of steps each in the order given, or offload transfers.
#pragma once

#include <optional>
#include <vector>

#include "schedule/pipeline_schedule.h"
#include "schedule/program.h"

namespace headroom {

// The micro-batch whose actions are written out for the middle micro-batches.
inline constexpr int kFoldTemplateMicroBatch = 3;

// Plain accumulation's order: forward and backward of micro-batch 1, then 2, ...
std::vector<PipelineAction> accumulation_order(int micro_batches);

// `built`: a training program interpreted with `built_order` over `built_micro_batches`
// micro-batches per iteration. Returns the program of `order`, the same schedule over
// `micro_batches`, or nullopt where the invariants above do not hold.
// REQUIRES: micro_batches > built_micro_batches > kFoldTemplateMicroBatch.
std::optional<Program> expand_micro_batches(const Program& built, const std::vector<PipelineAction>& built_order, int built_micro_batches,
                                            const std::vector<PipelineAction>& order, int micro_batches);

}  // namespace headroom
