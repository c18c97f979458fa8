// The operations of headroom's IR. One kind is one PyTorch call as eager code makes it
// (nn.Conv2d -> convolution, nn.ReLU(inplace=True) -> relu_, x.view(...) -> view), because
// memory behaviour (what is allocated, what autograd saves) is defined per call.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace headroom {

enum class OpKind : uint8_t {
  // Layers with parameters. ConvTranspose2d: nn.ConvTranspose2d's call, weight [Cin, Cout, kh, kw].
  Conv2d, BatchNorm2d, LayerNorm, Linear, Embedding, ConvTranspose2d,
  // Activations and elementwise math.
  Relu, Hardtanh, Gelu, Tanh, Sigmoid, Silu,
  Add, Sub, Mul, Div, AddScalar, MulScalar, DivScalar, PowScalar, Rsqrt, Neg, Where, Cast,
  // Reductions, normalizations and linear algebra.
  Softmax, LogSoftmax, MatMul, Mean, Sum,
  // Pooling.
  MaxPool2d, AvgPool2d, AdaptiveAvgPool2d,
  // F.interpolate of an [N,C,H,W] tensor (nearest or bilinear): a new output; the backward needs
  // only the sizes.
  Upsample2d,
  // F.pad (constant) and torch.roll: a new output; the backward needs only the sizes and makes a
  // new gradient of the input (constant_pad_nd_backward narrows and clones, roll rolls back).
  Pad, Roll,
  // torchvision.ops.roi_align / roi_pool (inputs: features [N,C,H,W], rois [K,4], batch indices
  // [K]): a new [K,C,oh,ow] output; the backward (torchvision's _roi_align_backward) takes the
  // rois and the features' sizes, not the features, so only the rois are kept.
  RoiAlign,
  // Regularization.
  Dropout,
  // Data movement: views alias their input's storage, the rest copy.
  View, Permute, Transpose, Slice, Select, Expand, Split, Contiguous, Cat,
  // Losses (mean reduction).
  NllLoss, MseLoss, BceWithLogitsLoss, L1Loss, SmoothL1Loss,
  // A unknown op from an importer treated as elementwise (allowed by the user).
  Opaque,
  // x @ W^T with W stored quantized (bitsandbytes int8 / nf4, GPTQ int4): inputs x and the
  // stored tensors; the kernel's temporaries are in OpAttrs (temp_bytes, aux_bytes).
  QuantLinear,
  // Megatron-LM sequence parallelism (megatron/core/tensor_parallel/mappings.py, layers.py), along
  // the sequence axis `attrs.dim` over `attrs.groups` tensor-parallel ranks.
  // AllGather: [.., s/t, ..] -> [.., s, ..]; attrs.inplace: into Megatron's persistent
  // GlobalMemoryBuffer ("mpu"), as a column-parallel linear's input (the interpreter owns that
  // buffer), else a new tensor (gather_from_sequence_parallel_region). ReduceScatter:
  // [.., s, ..] -> [.., s/t, ..], a new tensor (reduce_scatter_to_sequence_parallel_region, and
  // the embedding's scatter + clone, which allocates the same).
  AllGather, ReduceScatter,
};

std::string_view op_kind_name(OpKind k);
std::optional<OpKind> parse_op_kind(std::string_view name);

// Convolutions, direct or transposed: what a cuDNN workspace, an algorithm choice or vDNN's
// offloading applies to.
bool is_convolution_kind(OpKind k);

// True when the op's output shares its input's storage (no allocation).
bool is_view_kind(OpKind k);

}  // namespace headroom
