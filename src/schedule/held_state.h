// The model state a training program holds: the bytes of the parameter, gradient and
// optimizer-state buffers (categories Weights, Gradients, OptimizerState, as last retagged),
// after its last event and during its last optimizer step.
//
// Why: what one rank keeps from step to step does not depend on how its step is cut up. The
// parameters, their optimizer states and the engines' gradients and gradient buffers (DDP's
// rebuilt buckets, ZeRO's partitions, Megatron's main_grad) are sized by the parameters alone,
// so every micro-batch and every recompute plan of one layout ends holding the same bytes; and a
// program's peak is at least what is live at any of its moments. So when one candidate's state
// exceeds a budget, no candidate of its layout fits (plan/layout_fit.h), checked candidate by
// candidate for every engine and pipeline schedule in tests/held_state_test.cc. Activations,
// inputs, workspaces and autocast's weight copies are left out: their sizes follow the
// micro-batch or they are made anew each iteration. The end, not the whole last iteration: DDP
// rebuilds its buckets in its second forward, inside the last iteration when a step has one
// micro-batch and before it otherwise.
//
// The optimizer step adds buffers of its own, sized by the parameters too: DeepSpeed's fp32
// gradient partition, the foreach optimizers' temporaries. By then every activation of the step
// is gone, so what is live there is the same for every candidate as well; `in_optimizer_step`
// counts it: the most model state live at any event of the last iteration's optimizer phase
// (from its first optimizer step to the program's end), plus the buffers that phase allocated
// itself and still holds, whatever their category.
//
// Invariants: both 0 for a program without training iterations; at_end <= in_optimizer_step <=
// the live bytes at some event, so never more than the program's peak.
#pragma once

#include <cstdint>

#include "schedule/program.h"

namespace headroom {

struct ModelStateBytes {
  int64_t at_end = 0;
  int64_t in_optimizer_step = 0;
};

ModelStateBytes model_state(const Program& p);

}  // namespace headroom
