// The sequential structure of a model's forward, for checkpointing: the graph's model ops cut
// into consecutive stages at the points where the fewest activation tensors cross (a ResNet's
// block boundaries: only x; a transformer's layer boundaries: the hidden state and the mask).
// A checkpoint segment is a run of consecutive stages.
//
// Invariants: stages are non-empty, consecutive, in op order, cover every model-stage op exactly
// once, and never contain a loss op; at most `max_stages` (adjacent stages are merged evenly).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace headroom {

struct Stage {
  OpId first = kNone;  // inclusive
  OpId last = kNone;   // inclusive
  // Bytes of the activations made before the stage and read by it or later (what a checkpoint
  // segment starting here keeps).
  int64_t boundary_bytes = 0;
};

std::vector<Stage> chain_stages(const Graph& g, int max_stages = 200);

}  // namespace headroom
