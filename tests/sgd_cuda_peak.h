// The peak of a graph run on the CUDA profile with SGD (training) or as inference: how the ONNX
// pattern, loss and random-op tests compare an import with its hand-written twin.
#pragma once

#include <cstdint>

#include "estimate/estimate.h"

namespace headroom::testing {

inline int64_t sgd_cuda_peak(const Graph& g, RunMode mode) {
  EstimateOptions o;
  o.mode = mode;
  o.optimizer = OptimizerKind::Sgd;
  o.device = "cuda";
  return simulate(build_program(g, schedule_options(o))).peak.bytes;
}

}  // namespace headroom::testing
