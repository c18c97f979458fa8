// PyTorch 1.13's CPU convolution (fp32, NCHW) as it allocates, measured op by op
// (docs/research/pytorch-cpu-op-traces.md section 3.1).
//
// Path choice (aten _convolution use_mkldnn):
//   oneDNN when (strided || dilated || N >= 16 || kernel != 1x1 || threads > 1)
//          and (groups > 1 || (kH > 3 && kW > 3) || N > 1 || N*C*H*W > 20480);
//   otherwise thnn (_slow_conv2d): nothing extra for 1x1, an im2col buffer
//   (Cin*kh*kw*Ho*Wo) for larger kernels.
// oneDNN forward, every call:   +srcB +WB +dstB -WB -srcB +out -dstB
//   srcB = N*cB(Cin)*H*W*4 (omitted for first-layer kernels with Cin <= 4, which read plain src),
//   dstB = N*cB(Cout)*Ho*Wo*4, cB(c) = c rounded up to the channel block,
//   WB = cB(Cout)*cB(Cin)*kh*kw*4 (dense), cB(Cout)*Cin*kh*kw*4 (plain src), cB(C)*kh*kw*4
//   (depthwise), Cout*(Cin/g)*kh*kw*4 (other grouped convs).
// oneDNN backward, data:    +gOutB +WB' +gInB -WB' -gOutB +grad_input -gInB
//                  weights: +gOutB +srcB +dWB [+db] -srcB -gOutB +b.grad +W.grad -dWB [-db]
//   (grouped convs: +dWB +W.grad -dWB). oneDNN scratchpads (a few KiB, kernel specific) are not
//   modelled.
// Convolutions the AVX-512 direct kernels refuse run through oneDNN's GEMM convolution on
// plain NCHW tensors (no source or weight reorder), with an im2col scratchpad per thread
// (measured on single convolutions; the conditions are oneDNN 2.6's, cited in cpu_conv.cc):
//   forward (left padding > min(Wo, 28)):  +dst -dst around the output, as above;
//   backward data (same condition):        +gIn  +scratch -scratch +grad_input -gIn,
//       scratch = threads * Cin/g*kh*kw*Ho*Wo*4 + 128;
//   backward weights (kernel wider than 14 columns, or dilated and either strided or with the
//   dilated kernel taller or wider than the input):
//                                          +dW +scratch [+db] -scratch [+b.grad] +W.grad -dW [-db],
//       scratch = threads * (Cin/g*kh*kw*Ho*Wo*4 + 4 * weight bytes) + 256.
//   DeepLabV3's ASPP (3x3 at dilation 12-36 on small maps) takes all three; its backbone's
//   dilation-4 blocks on an 8x8 map take the GEMM weights pass only, as does ViT's patch
//   embedding (16x16 or 32x32, stride = kernel; im2col = one image there).
// A channels-last input (ConvNeXt after its first LayerNorm2d) runs oneDNN's NHWC calls: no source
// or destination reorders, the output allocated first, a dense weight copied to channels_last for
// the call, measured scratchpads, and a depthwise weights pass with a C*kh*kw*1,024-byte buffer
// for kernels larger than 3x3 (the sequences in cpu_conv.cc, channels_last_backward). Dense calls
// whose channels are not multiples of the channel block, and other grouped ones, keep the rule
// above (not measured).
#pragma once

#include "training/op_rules.h"

namespace headroom {

bool cpu_conv_uses_onednn(const RuleContext& ctx);
ForwardPlan cpu_conv_forward(const RuleContext& ctx);
BackwardPlan cpu_conv_backward(const RuleContext& ctx, bool incoming_contiguous);

}  // namespace headroom
