// The tiny MLPs the checkpointing tests work out by hand: mlp:layers=L,dim=4 at batch 2, fp32,
// one SGD step (single-tensor), on the cuda profile without a cuBLAS workspace, the program kept.
// Ops: linear, GELU per layer, then the MSE loss. Persistent: input 32 + L x (W 64 + b 16) +
// target 32 bytes. Every activation is 2x4 fp32 = 32 bytes.
#pragma once

#include <string>

#include "estimate/estimate.h"

namespace headroom::testing {

inline EstimateOptions tiny_mlp_sgd_options(int layers) {
  EstimateOptions o;
  o.model = "mlp:layers=" + std::to_string(layers) + ",dim=4";
  o.batch = 2;
  o.mode = RunMode::Training;
  o.optimizer = OptimizerKind::Sgd;
  o.foreach = false;
  o.device = "cuda";
  o.cublas_workspace_bytes = 0;
  o.iterations = 1;
  o.keep_program = true;
  return o;
}

}  // namespace headroom::testing
