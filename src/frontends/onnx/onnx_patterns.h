// Decompositions the PyTorch exporter writes for one PyTorch call, found before lowering so that
// the call is recorded once, with its own memory rule, instead of as the ops it was spelled with:
//
//   GELU (exact)   y = x * (erf(x / sqrt(2)) + 1) * 0.5, as Div/Erf/Add/Mul/Mul in any operand
//                  order (also x * 0.5 first, and Mul by 1/sqrt(2))            -> gelu(x)
//   GELU (tanh)    y = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), the cube as
//                  Mul(x, Mul(x, x)) (nn.GELU(approximate="tanh")'s export; with Pow(x, 3) it
//                  is model code such as GPT-2's NewGELUActivation, several eager calls, and
//                  stays node by node), 0.5 and x in any of the GELU orders -> gelu(x, tanh)
//   SiLU / Swish   Sigmoid(x) -> Mul(x, .)                                   -> silu(x)
//   HardSwish      HardSigmoid(x, alpha 1/6, beta 1/2) -> Mul(x, .) (opsets < 14 have no
//                  HardSwish)                                                -> hardswish(x)
//   Mish           Softplus(x) -> Tanh -> Mul(x, .)                          -> mish(x)
//   layer norm     ReduceMean/Sub/Pow 2/ReduceMean/Add eps/Sqrt/Div/Mul w/Add b over the last
//                  axis (opsets < 17 have no LayerNormalization)               -> layer_norm(x, w,
//                  b)
//   linear         MatMul(x, W or Transpose(W)) + b with 2-D weight and 1-D bias
//                  initializers (nn.Linear on a 3-D input)                     -> linear(x, W, b)
//   padded average pool
//                  Pad(x, zeros on N and C, p on H and W, constant 0) -> AveragePool(pads 0,
//                  ceil_mode 0): torch.onnx (opsets 11-18) writes every F.avg_pool2d with
//                  count_include_pad=True this way, even when the padding is 0 (DenseNet's
//                  transitions, Inception's branch pools)               -> avg_pool2d(x, padding p)
//                  PyTorch pads inside the kernel: the padded copy is never allocated, so
//                  lowering the Pad as its own op would add a tensor that autograd keeps.
//   NMS indices    NonMaxSuppression -> Gather(axis 1, index 2): torchvision's nms symbolic
//                  (ops/_register_onnx_ops.py) reads the box index column of the [n, 3]
//                  (batch, class, box) rows; eager torchvision.ops.nms returns the [n] int64
//                  box indices themselves (csrc/ops/cpu/nms_kernel.cpp: keep_t), so the
//                  NonMaxSuppression emits those ([n], or [n, 1] for an index [2]) and the
//                  Gather is their alias: no [n, 3] rows, no gathered copy.
//   in-place merge ConstantOfShape -> Scatter(Elements|ND) -> Scatter(Elements|ND) ..., two or
//                  more, each writing into the previous one's output, which it alone reads:
//                  the export of a fresh tensor filled by indexed writes. torchvision's
//                  MultiScaleRoIAlign (ops/poolers.py, 0.14) is the case: eager
//                  _multiscale_roi_align makes `result = torch.zeros(...)` and writes each level
//                  in place (`result[idx_in_level] = ...`, index_put_), while the export path
//                  (_onnx_merge_levels) writes `res = res.scatter(0, index, level)` per level. Each
//                  Scatter becomes an in-place write into the one result (its output aliases
//                  the data input): no second result beside the previous one, and each level's
//                  rows are freed after their write, as in eager.
//
// Every intermediate must be read by the pattern alone, so a match never hides a tensor the
// rest of the graph reads. A node claimed by a pattern (Skip) names the node that emits the call
// (`owner`), so that readers of a tensor can be counted per PyTorch call.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "frontends/onnx/onnx_model.h"

namespace headroom::onnx_import {

struct Fusion {
  enum class Kind : uint8_t {
    None,           // lower the node as itself
    Skip,           // part of a pattern whose last node emits the call
    Gelu,           // emit gelu(x)
    GeluTanh,       // emit gelu(x, approximate="tanh")
    Silu,           // emit silu(x)
    HardSwish,      // emit hardswish(x): an Opaque op that keeps x, as hardswish_backward reads it
    Mish,           // emit mish(x): an Opaque op that keeps x, as mish_backward reads it
    LayerNorm,      // emit layer_norm(x, weight, bias)
    LinearBias,     // this MatMul is a linear with `bias` folded in
    Alias,          // this node's output is the value of tensor `alias` (the folded bias Add)
    PaddedAvgPool,  // emit avg_pool2d(x) with `pads` [top, left, bottom, right] added
    NmsIndices,     // this NonMaxSuppression emits its box indices [n] (`pads` {1}: [n, 1])
    InPlaceMerge,   // this Scatter writes into its data input in place (the output aliases it)
  };
  Kind kind = Kind::None;
  std::string x, weight, bias, alias;
  std::vector<int64_t> pads;  // PaddedAvgPool
  int owner = -1;             // Skip: the node that emits the call
};

struct PatternQueries {
  // The value of a one-element compile-time constant (Constant node or inline initializer).
  std::function<std::optional<double>(const std::string&)> scalar;
  // The declared dims of a floating-point initializer that becomes a parameter, if it is one.
  std::function<std::optional<std::vector<int64_t>>(const std::string&)> weight_dims;
  // The inferred rank of a tensor, if known.
  std::function<std::optional<size_t>(const std::string&)> rank;
  // The values of a compile-time integer constant (Constant node or inline initializer).
  std::function<std::optional<std::vector<int64_t>>(const std::string&)> ints;
};

// One entry per node of `g`.
std::vector<Fusion> find_fusions(const onnx::GraphProto& g, const Structure& st,
                                 const PatternQueries& q);

}  // namespace headroom::onnx_import
