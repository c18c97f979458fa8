// PyTorch 1.13's CPU transposed convolution (fp32, NCHW, groups 1) as it allocates, measured op by
// op with validation/optrace.py (captured:conv-transpose, captured:unet; docs/accuracy.md).
//
// aten::_convolution sends every 2-D transposed convolution on the CPU to slow_conv_transpose2d
// (NaiveConvolutionTranspose2d.cpp), at 1 and at 2 threads alike (measured): no oneDNN path.
// Forward:  +output +columns [+ones] [-ones] -columns
//   columns = Cout*kh*kw * H*W * 4 (the input's spatial size, one batch element at a time),
//   ones    = Ho*Wo * 4, only with a bias (the bias is added through a GEMM against ones).
// Backward, input pass:  [+contiguous grad_output] +grad_input [+columns -columns] [-copy]
// weight pass:           [+contiguous grad_output] +grad_weight [+grad_bias] [+columns -columns] [-copy]
//   The columns of the backward are skipped when the convolution is a plain 1x1 (kernel 1, stride 1,
//   padding 0, dilation 1): the backward reads grad_output directly, the forward does not.
#pragma once

#include "training/op_rules.h"

namespace headroom {

ForwardPlan cpu_conv_transpose_forward(const RuleContext& ctx);
BackwardPlan cpu_conv_transpose_backward(const RuleContext& ctx, bool incoming_contiguous);

}  // namespace headroom
