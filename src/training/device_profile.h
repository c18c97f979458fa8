// The few behaviours in which PyTorch's CUDA and CPU kernels differ in memory, kept in one place.
// Each field says what it changes and where the fact comes from (see docs/memory-model.md).
#pragma once

#include <string>

#include "ir/dtype.h"

namespace headroom {

struct DeviceProfile {
  std::string name;  // "cuda" or "cpu"
  // CPU (oneDNN/mkldnn) convolution writes its result into a scratch buffer of the output's size
  // and copies it into the NCHW output: one output-sized temporary per convolution forward.
  bool conv_forward_output_scratch = false;
  // Training-mode dropout: CUDA runs the fused native_dropout and keeps a bool mask (1 byte per
  // element); the CPU path computes input * (bernoulli(1-p) / (1-p)) and keeps a mask of the
  // input's dtype.
  bool dropout_mask_same_dtype = false;
  // Optimizer implementation when --foreach/--no-foreach is not given. PyTorch >= 2.0 picks
  // foreach for CUDA tensors; 1.13 (and the CPU) uses the single-tensor loop.
  bool default_foreach = true;
  // Max pooling under no_grad: the CPU kernel computes no indices; CUDA computes them and drops
  // them (an output-sized int64 temporary).
  bool max_pool_indices_without_grad = true;

  static DeviceProfile cuda();
  static DeviceProfile cpu();
};

}  // namespace headroom
