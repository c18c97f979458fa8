// Gradient accumulation without interpreting every micro-batch. A training program of k
// micro-batches per step repeats one micro-batch's events: the interpreter never branches on a
// micro-batch's number (only on its state: the first micro-batch of a step allocates the
// gradients, later ones add into them; DDP rebuilds its buckets at the second forward of the run),
// so micro-batches 3 to k-1 of an iteration emit the same steps and events as micro-batch 3, on
// buffers of their own. build_program() interprets 4 micro-batches and lets this module write
// micro-batch 3 out k - 4 more times: the interpreter's cost no longer grows with k (a layout
// search of Llama-3.1-70B simulates up to 64 micro-batches per step, two steps per program).
//
// Invariants:
//  - the result is the program the interpreter builds for k micro-batches, buffer for buffer,
//    step for step and event for event (tests/micro_batch_fold_test.cc compares them for every
//    engine); buffer ids stay in creation order;
//  - where micro-batch 3 is not self-contained (a buffer it allocates outlives it, it frees a
//    buffer allocated before it, its buffers are not one block of ids, its steps are not one run,
//    or the program has offload transfers), nothing is folded: the caller interprets all k.
#pragma once

#include <optional>

#include "schedule/program.h"

namespace headroom {

// The micro-batches build_program() interprets before folding.
inline constexpr int kFoldedMicroBatches = 4;

// `four`: a training program of kFoldedMicroBatches micro-batches per iteration (not a pipeline
// stage's). Returns the same program with `micro_batches` per iteration, or nullopt where the
// invariants above do not hold. REQUIRES: micro_batches > kFoldedMicroBatches.
std::optional<Program> expand_micro_batches(const Program& four, int micro_batches);

}  // namespace headroom
