// Automatic mixed precision as torch.autocast (CUDA op lists) runs a forward and loss:
// a graph pass that inserts the casts autocast makes and gives every tensor its dtype.
//   - lower-precision ops (convolution, linear, matmul): floating inputs are cast to fp16/bf16,
//     last argument first (the order the autocast kernel's casts run in, and the reverse of
//     the order the backward reaches them); a parameter is cast once per forward and the copy
//     is kept in autocast's cache until the autocast region ends (after the loss), and longer
//     when a backward node saved it (a convolution's or a Linear's weight copy);
//   - fp32 ops (softmax, log_softmax, layer_norm, pow, rsqrt, sum, mean, the losses): inputs are
//     cast to fp32, except a log_softmax that names its dtype (cross-entropy's), which runs in it;
//   - every other op runs in the widest floating dtype of its inputs (type promotion).
// Parameters, their gradients and the optimizer state stay fp32 (master weights). GradScaler's
// scale(loss) is one more multiplication of the loss.
#pragma once

#include "ir/graph.h"

namespace headroom {

// REQUIRES: g.validate() passes and all floating tensors are fp32; low is F16 or BF16.
Graph apply_autocast(const Graph& g, DType low, bool grad_scaler);

}  // namespace headroom
