#include "ir/op_kind.h"

#include <utility>

namespace headroom {
namespace {

constexpr std::pair<OpKind, std::string_view> kNames[] = {
    {OpKind::Conv2d, "conv2d"}, {OpKind::BatchNorm2d, "batch_norm"},
    {OpKind::LayerNorm, "layer_norm"}, {OpKind::Linear, "linear"},
    {OpKind::Embedding, "embedding"}, {OpKind::ConvTranspose2d, "conv_transpose2d"}, {OpKind::Relu, "relu"}, {OpKind::Hardtanh, "hardtanh"},
    {OpKind::Gelu, "gelu"}, {OpKind::Tanh, "tanh"}, {OpKind::Sigmoid, "sigmoid"},
    {OpKind::Silu, "silu"}, {OpKind::Add, "add"}, {OpKind::Sub, "sub"}, {OpKind::Mul, "mul"},
    {OpKind::Div, "div"}, {OpKind::AddScalar, "add_scalar"}, {OpKind::MulScalar, "mul_scalar"},
    {OpKind::DivScalar, "div_scalar"}, {OpKind::PowScalar, "pow_scalar"},
    {OpKind::Rsqrt, "rsqrt"}, {OpKind::Neg, "neg"}, {OpKind::Where, "where"},
    {OpKind::Cast, "to"}, {OpKind::Softmax, "softmax"}, {OpKind::LogSoftmax, "log_softmax"},
    {OpKind::MatMul, "matmul"}, {OpKind::Mean, "mean"}, {OpKind::Sum, "sum"},
    {OpKind::MaxPool2d, "max_pool2d"}, {OpKind::AvgPool2d, "avg_pool2d"},
    {OpKind::AdaptiveAvgPool2d, "adaptive_avg_pool2d"}, {OpKind::Upsample2d, "upsample2d"},
    {OpKind::Pad, "pad"}, {OpKind::Roll, "roll"}, {OpKind::RoiAlign, "roi_align"},
    {OpKind::Dropout, "dropout"},
    {OpKind::View, "view"}, {OpKind::Permute, "permute"}, {OpKind::Transpose, "transpose"},
    {OpKind::Slice, "slice"}, {OpKind::Select, "select"}, {OpKind::Expand, "expand"}, {OpKind::Split, "split"},
    {OpKind::Contiguous, "contiguous"}, {OpKind::Cat, "cat"},
    {OpKind::NllLoss, "nll_loss"}, {OpKind::MseLoss, "mse_loss"},
    {OpKind::BceWithLogitsLoss, "binary_cross_entropy_with_logits"}, {OpKind::L1Loss, "l1_loss"},
    {OpKind::SmoothL1Loss, "smooth_l1_loss"},
    {OpKind::Opaque, "opaque"}, {OpKind::QuantLinear, "quant_linear"},
    {OpKind::AllGather, "all_gather"}, {OpKind::ReduceScatter, "reduce_scatter"},
};

}  // namespace

std::string_view op_kind_name(OpKind k) {
  for (const auto& [kind, name] : kNames) {
    if (kind == k) return name;
  }
  return "?";
}

std::optional<OpKind> parse_op_kind(std::string_view name) {
  for (const auto& [kind, n] : kNames) {
    if (n == name) return kind;
  }
  return std::nullopt;
}

bool is_convolution_kind(OpKind k) { return k == OpKind::Conv2d || k == OpKind::ConvTranspose2d; }

bool is_view_kind(OpKind k) {
  switch (k) {
    case OpKind::View:
    case OpKind::Permute:
    case OpKind::Transpose:
    case OpKind::Slice:
    case OpKind::Select:
    case OpKind::Expand:
    case OpKind::Split: return true;
    default: return false;
  }
}

}  // namespace headroom
