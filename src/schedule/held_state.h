// The model state a training program ends with: the bytes of the parameter, gradient and
// optimizer-state buffers (categories Weights, Gradients, OptimizerState, as last retagged)
// still live after its last event.
//
// Why: what one rank keeps from step to step does not depend on how its step is cut up. The
// parameters, their optimizer states and the engines' gradients and gradient buffers (DDP's
// rebuilt buckets, ZeRO's partitions, Megatron's main_grad) are sized by the parameters alone,
// so every micro-batch and every recompute plan of one layout ends holding the same bytes; and a
// program's peak is at least what is live at any of its moments. So when one candidate's end
// state exceeds a budget, no candidate of its layout fits (plan/layout_fit.h), checked candidate
// by candidate for every engine and pipeline schedule in tests/held_state_test.cc. Activations,
// inputs, workspaces and autocast's weight copies are left out: their sizes follow the
// micro-batch or they are made anew each iteration. The end, not the whole last iteration: DDP
// rebuilds its buckets in its second forward, inside the last iteration when a step has one
// micro-batch and before it otherwise.
//
// Invariants: 0 for a program without training iterations; never more than the live bytes at
// the program's end, so never more than its peak.
#pragma once

#include <cstdint>

#include "schedule/program.h"

namespace headroom {

int64_t model_state_at_end(const Program& p);

}  // namespace headroom
