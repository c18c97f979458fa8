// The chain model (../shared/docs/chain-model.md) of a real model: its stages (stages.h) with
// forward and backward times from the cost model and sizes from the simulated program, so that
// `plan --chain` (Rotor's nested schedules) and `plan --graph` can be run on it.
//
// Sizes: x_0 = the model inputs; x_i (i >= 1) = the activations read across the cut before
// stage i; x_L = the model outputs; x̄_{i+1} = max(saved activations stage i leaves alive at the
// end of the forward, x_{i+1}) (an approximation: the stage's output is counted once whether or
// not something saves it). Transients are 0 (not measured per stage). The loss stage's time is
// the loss ops' forward and backward. On top of a base candidate (a micro-batch, offloaded ops:
// the joint strategies) the sizes and times are those of the base's run, and `stages` must be cut
// on the base's micro-batch graph (their boundary bytes are its). Invariant: the result passes
// validate_chain.
#pragma once

#include "plan/chain_model.h"
#include "plan/evaluate.h"
#include "plan/stages.h"

namespace headroom {

Chain model_chain(PlanContext& ctx, const std::vector<Stage>& stages, const Candidate& base = Candidate{});

}  // namespace headroom
