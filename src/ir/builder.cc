#include "ir/builder.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "util/checked.h"
#include "util/error.h"

namespace headroom {
namespace {

int64_t numel_of(const std::vector<int64_t>& s, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : s) n = checked_mul(n, d, what);
  return n;
}

int64_t norm_dim(int64_t dim, size_t rank, const std::string& what) {
  int64_t r = static_cast<int64_t>(rank);
  if (dim < -r || dim >= r) {
    throw InputError(what + ": dimension " + std::to_string(dim) + " out of range for rank " +
                     std::to_string(r));
  }
  return dim < 0 ? dim + r : dim;
}

int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode,
                 const std::string& what) {
  int64_t eff = d * (k - 1) + 1;
  int64_t num = in + 2 * p - eff;
  if (num < 0) {
    throw InputError(what + ": input size " + std::to_string(in) + " is smaller than the kernel (" +
                     std::to_string(eff) + ")");
  }
  int64_t out = (ceil_mode ? (num + s - 1) / s : num / s) + 1;
  // PyTorch drops a last window that would start inside the right padding.
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

}  // namespace

std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                      const std::string& what) {
  size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      throw InputError(what + ": shapes " + shape_text(a) + " and " + shape_text(b) + " do not broadcast");
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

GraphBuilder::GraphBuilder(std::string model, DType activation_dtype) : act_(activation_dtype) {
  g_.model = std::move(model);
}

std::string GraphBuilder::unique_name(const std::string& name) {
  int& uses = name_uses_[name];
  ++uses;
  return uses == 1 ? name : name + "#" + std::to_string(uses);
}

TensorId GraphBuilder::add_tensor(const std::string& name, std::vector<int64_t> shape, DType dtype,
                                  TensorRole role, int batch_axis) {
  for (int64_t d : shape) {
    if (d < 0) throw InputError("tensor '" + name + "' has a negative dimension " + shape_text(shape));
  }
  Tensor t;
  t.id = static_cast<TensorId>(g_.tensors.size());
  t.name = name;
  t.shape = std::move(shape);
  t.dtype = dtype;
  t.role = role;
  t.batch_axis = static_cast<int8_t>(batch_axis);
  (void)t.bytes();  // overflow check
  g_.tensors.push_back(std::move(t));
  contiguous_.push_back(true);
  return g_.tensors.back().id;
}

TensorId GraphBuilder::input(const std::string& name, std::vector<int64_t> shape, DType dtype, int batch_axis) {
  TensorId id = add_tensor(name, std::move(shape), dtype, TensorRole::Input, batch_axis);
  g_.inputs.push_back(id);
  return id;
}

TensorId GraphBuilder::target(const std::string& name, std::vector<int64_t> shape, DType dtype, int batch_axis) {
  TensorId id = add_tensor(name, std::move(shape), dtype, TensorRole::Target, batch_axis);
  g_.targets.push_back(id);
  return id;
}

TensorId GraphBuilder::parameter(const std::string& name, std::vector<int64_t> shape) {
  // Parameters are stored in the model's dtype (model.to(torch.bfloat16) converts them too).
  return add_tensor(name, std::move(shape), act_, TensorRole::Parameter, -1);
}

TensorId GraphBuilder::buffer(const std::string& name, std::vector<int64_t> shape, DType dtype) {
  return add_tensor(name, std::move(shape), dtype, TensorRole::Buffer, -1);
}

TensorId GraphBuilder::tied_parameter(const std::string& name, TensorId other) {
  TensorId id = add_tensor(name, g_.tensor(other).shape, g_.tensor(other).dtype, TensorRole::Parameter, -1);
  g_.tensors[static_cast<size_t>(id)].tied_to = other;
  return id;
}

OpId GraphBuilder::add_op(OpKind kind, const std::string& name, std::vector<TensorId> inputs, OpAttrs attrs) {
  if (static_cast<int64_t>(g_.ops.size()) >= kMaxGraphOps) {
    // mlp:layers=100000000 once built until the machine ran out of memory.
    throw InputError("model '" + g_.model + "' has more than " + std::to_string(kMaxGraphOps) +
                     " ops, over headroom's limit (fewer layers, or a smaller ONNX graph)");
  }
  Op op;
  op.id = static_cast<OpId>(g_.ops.size());
  op.kind = kind;
  op.name = unique_name(name);
  op.inputs = std::move(inputs);
  op.attrs = std::move(attrs);
  op.stage = stage_;
  g_.ops.push_back(std::move(op));
  return g_.ops.back().id;
}

TensorId GraphBuilder::add_output(OpId op_id, std::vector<int64_t> shape, DType dtype, TensorId alias_of,
                                  bool contiguous) {
  Op& op = g_.ops[static_cast<size_t>(op_id)];
  int batch_axis = -1;
  if (!op.inputs.empty()) {
    const Tensor& in = g_.tensor(op.inputs[0]);
    if (in.batch_axis >= 0 && static_cast<size_t>(in.batch_axis) < shape.size() &&
        shape[static_cast<size_t>(in.batch_axis)] == in.shape[static_cast<size_t>(in.batch_axis)]) {
      batch_axis = in.batch_axis;
    }
  }
  std::string tname = op.name + (op.outputs.empty() ? "" : ":" + std::to_string(op.outputs.size()));
  TensorId id = add_tensor(tname, std::move(shape), dtype, TensorRole::Activation, batch_axis);
  Tensor& t = g_.tensors[static_cast<size_t>(id)];
  t.producer = op_id;
  t.alias_of = alias_of;
  contiguous_[static_cast<size_t>(id)] = contiguous;
  t.contiguous = contiguous;
  g_.ops[static_cast<size_t>(op_id)].outputs.push_back(id);
  return id;
}

void GraphBuilder::finish_op(OpId op_id, int64_t flops) {
  Op& op = g_.ops[static_cast<size_t>(op_id)];
  op.flops = flops;
  int64_t moved = 0;
  auto count = [&](TensorId id) {
    const Tensor& t = g_.tensor(id);
    if (t.alias_of == kNone || t.producer != op.id) moved = checked_add(moved, t.bytes(), "bytes moved");
  };
  if (!is_view_kind(op.kind)) {
    for (TensorId in : op.inputs) count(in);
    for (TensorId out : op.outputs) count(out);
  }
  op.bytes_moved = moved;
}

TensorId GraphBuilder::unary(OpKind kind, const std::string& name, TensorId x, OpAttrs attrs,
                             int64_t flops_per_elem) {
  bool inplace = attrs.inplace;
  OpId op = add_op(kind, name, {x}, std::move(attrs));
  TensorId out = add_output(op, shape(x), tensor(x).dtype, inplace ? x : kNone);
  if (is_channels_last(x)) set_channels_last(out);  // TensorIterator keeps the input's strides
  finish_op(op, checked_mul(tensor(x).numel(), flops_per_elem, "flops"));
  return out;
}

TensorId GraphBuilder::elementwise(OpKind kind, const std::string& name, std::vector<TensorId> inputs,
                                   OpAttrs attrs) {
  std::vector<int64_t> s = shape(inputs[0]);
  DType dt = tensor(inputs[0]).dtype;
  for (size_t i = 1; i < inputs.size(); ++i) {
    s = broadcast_shapes(s, shape(inputs[i]), name);
    if (kind != OpKind::Where || i == 2) {
      if (is_floating(tensor(inputs[i]).dtype) && dtype_size(tensor(inputs[i]).dtype) > dtype_size(dt)) {
        dt = tensor(inputs[i]).dtype;
      }
    }
  }
  if (kind == OpKind::Where) dt = tensor(inputs[1]).dtype;
  bool inplace = attrs.inplace;
  if (inplace && s != shape(inputs[0])) {
    throw InputError(name + ": in-place result shape " + shape_text(s) + " differs from its input " +
                     shape_text(shape(inputs[0])));
  }
  OpId op = add_op(kind, name, std::move(inputs), std::move(attrs));
  TensorId x0 = g_.ops[static_cast<size_t>(op)].inputs[0];
  TensorId out = add_output(op, s, dt, inplace ? x0 : kNone);
  // TensorIterator gives the output the strides of its first full-size operand (an in-place
  // op writes into inputs[0]): channels-last when that operand is.
  for (TensorId in : g_.ops[static_cast<size_t>(op)].inputs) {
    if (shape(in) != s) continue;
    if (is_channels_last(in)) set_channels_last(out);
    break;
  }
  finish_op(op, numel_of(s, name));
  return out;
}

TensorId GraphBuilder::conv2d(const std::string& module, TensorId x, int64_t out_channels, const Conv2dSpec& spec) {
  const std::vector<int64_t> s = shape(x);
  if (s.size() != 4) throw InputError(module + ": conv2d expects [N,C,H,W], got " + shape_text(s));
  if (spec.groups <= 0 || s[1] % spec.groups != 0 || out_channels % spec.groups != 0) {
    throw InputError(module + ": channels " + std::to_string(s[1]) + "->" + std::to_string(out_channels) +
                     " not divisible by groups " + std::to_string(spec.groups));
  }
  TensorId w = parameter(module + ".weight", {out_channels, s[1] / spec.groups, spec.kernel_h, spec.kernel_w});
  std::vector<TensorId> ins{x, w};
  if (spec.bias) ins.push_back(parameter(module + ".bias", {out_channels}));
  OpAttrs a;
  a.kernel = {spec.kernel_h, spec.kernel_w};
  a.stride = {spec.stride, spec.stride};
  a.padding = {spec.padding_h, spec.padding_w};
  a.dilation = {spec.dilation, spec.dilation};
  a.groups = spec.groups;
  int64_t ho = pool_out(s[2], spec.kernel_h, spec.stride, spec.padding_h, spec.dilation, false, module);
  int64_t wo = pool_out(s[3], spec.kernel_w, spec.stride, spec.padding_w, spec.dilation, false, module);
  OpId op = add_op(OpKind::Conv2d, module, ins, a);
  TensorId out = add_output(op, {s[0], out_channels, ho, wo}, tensor(x).dtype);
  // aten::_convolution runs in the input's suggest_memory_format().
  if (is_channels_last(x)) set_channels_last(out);
  int64_t outs = numel_of(shape(out), module);
  int64_t macs = checked_mul(outs, (s[1] / spec.groups) * spec.kernel_h * spec.kernel_w, module + " flops");
  finish_op(op, checked_mul(macs, 2, module + " flops"));
  return out;
}

TensorId GraphBuilder::batch_norm2d(const std::string& module, TensorId x, bool training) {
  const std::vector<int64_t> s = shape(x);
  if (s.size() != 4) throw InputError(module + ": batch_norm2d expects [N,C,H,W], got " + shape_text(s));
  int64_t c = s[1];
  TensorId w = parameter(module + ".weight", {c});
  TensorId b = parameter(module + ".bias", {c});
  TensorId rm = buffer(module + ".running_mean", {c}, act_);
  TensorId rv = buffer(module + ".running_var", {c}, act_);
  buffer(module + ".num_batches_tracked", {}, DType::I64);
  OpAttrs a;
  a.training = training;
  OpId op = add_op(OpKind::BatchNorm2d, module, {x, w, b, rm, rv}, a);
  add_output(op, s, tensor(x).dtype);
  finish_op(op, checked_mul(tensor(x).numel(), 4, "flops"));
  return g_.ops[static_cast<size_t>(op)].outputs[0];
}

TensorId GraphBuilder::layer_norm(const std::string& module, TensorId x, bool bias) {
  int64_t d = shape(x).back();
  std::vector<TensorId> ins{x, parameter(module + ".weight", {d})};
  if (bias) ins.push_back(parameter(module + ".bias", {d}));
  OpId op = add_op(OpKind::LayerNorm, module, ins, {});
  TensorId out = add_output(op, shape(x), tensor(x).dtype);
  finish_op(op, checked_mul(tensor(x).numel(), 5, "flops"));
  return out;
}

TensorId GraphBuilder::linear(const std::string& module, TensorId x, int64_t out_features, bool bias) {
  int64_t in = shape(x).empty() ? 0 : shape(x).back();
  TensorId w = parameter(module + ".weight", {out_features, in});
  TensorId b = bias ? parameter(module + ".bias", {out_features}) : kNone;
  return linear_with(module, x, w, b);
}

TensorId GraphBuilder::linear_with(const std::string& module, TensorId x, TensorId weight, TensorId bias) {
  const std::vector<int64_t> s = shape(x);
  const std::vector<int64_t> ws = shape(weight);
  if (s.empty() || ws.size() != 2 || s.back() != ws[1]) {
    throw InputError(module + ": linear input " + shape_text(s) + " does not match weight " + shape_text(ws));
  }
  std::vector<TensorId> ins{x, weight};
  if (bias != kNone) ins.push_back(bias);
  OpId op = add_op(OpKind::Linear, module, ins, {});
  std::vector<int64_t> os = s;
  os.back() = ws[0];
  TensorId out = add_output(op, os, tensor(x).dtype);
  int64_t rows = tensor(x).numel() / std::max<int64_t>(1, s.back());
  finish_op(op, checked_mul(checked_mul(rows, ws[0] * ws[1], module + " flops"), 2, module + " flops"));
  return out;
}

TensorId GraphBuilder::embedding(const std::string& module, TensorId ids, int64_t num, int64_t dim) {
  TensorId w = parameter(module + ".weight", {num, dim});
  OpId op = add_op(OpKind::Embedding, module, {ids, w}, {});
  std::vector<int64_t> os = shape(ids);
  os.push_back(dim);
  TensorId out = add_output(op, os, act_);
  finish_op(op, 0);
  return out;
}

TensorId GraphBuilder::relu(const std::string& name, TensorId x, bool inplace) {
  OpAttrs a;
  a.inplace = inplace;
  return unary(OpKind::Relu, name, x, a);
}

TensorId GraphBuilder::hardtanh(const std::string& name, TensorId x, double lo, double hi, bool inplace) {
  OpAttrs a;
  a.inplace = inplace;
  a.scalar = lo;
  a.scalar2 = hi;
  return unary(OpKind::Hardtanh, name, x, a);
}

TensorId GraphBuilder::gelu(const std::string& name, TensorId x, bool approximate_tanh) {
  OpAttrs a;
  a.approximate_tanh = approximate_tanh;
  return unary(OpKind::Gelu, name, x, a, 8);
}

TensorId GraphBuilder::tanh(const std::string& name, TensorId x) { return unary(OpKind::Tanh, name, x, {}, 4); }
TensorId GraphBuilder::sigmoid(const std::string& name, TensorId x) { return unary(OpKind::Sigmoid, name, x, {}, 4); }
TensorId GraphBuilder::silu(const std::string& name, TensorId x) { return unary(OpKind::Silu, name, x, {}, 5); }

TensorId GraphBuilder::add(const std::string& name, TensorId a, TensorId b) { return elementwise(OpKind::Add, name, {a, b}); }
TensorId GraphBuilder::add_(const std::string& name, TensorId a, TensorId b) {
  OpAttrs at;
  at.inplace = true;
  return elementwise(OpKind::Add, name, {a, b}, at);
}
TensorId GraphBuilder::sub(const std::string& name, TensorId a, TensorId b) { return elementwise(OpKind::Sub, name, {a, b}); }
TensorId GraphBuilder::mul(const std::string& name, TensorId a, TensorId b) { return elementwise(OpKind::Mul, name, {a, b}); }
TensorId GraphBuilder::div(const std::string& name, TensorId a, TensorId b) { return elementwise(OpKind::Div, name, {a, b}); }

TensorId GraphBuilder::add_scalar(const std::string& name, TensorId x, double s) {
  OpAttrs a;
  a.scalar = s;
  return unary(OpKind::AddScalar, name, x, a);
}
TensorId GraphBuilder::mul_scalar(const std::string& name, TensorId x, double s) {
  OpAttrs a;
  a.scalar = s;
  return unary(OpKind::MulScalar, name, x, a);
}
TensorId GraphBuilder::div_scalar(const std::string& name, TensorId x, double s) {
  OpAttrs a;
  a.scalar = s;
  return unary(OpKind::DivScalar, name, x, a);
}
TensorId GraphBuilder::pow_scalar(const std::string& name, TensorId x, double exponent) {
  OpAttrs a;
  a.scalar = exponent;
  return unary(OpKind::PowScalar, name, x, a);
}
TensorId GraphBuilder::rsqrt(const std::string& name, TensorId x) { return unary(OpKind::Rsqrt, name, x, {}, 2); }
TensorId GraphBuilder::neg(const std::string& name, TensorId x) { return unary(OpKind::Neg, name, x); }

TensorId GraphBuilder::where(const std::string& name, TensorId cond, TensorId a, TensorId b) {
  return elementwise(OpKind::Where, name, {cond, a, b});
}

TensorId GraphBuilder::cast(const std::string& name, TensorId x, DType to) {
  OpId op = add_op(OpKind::Cast, name, {x}, {});
  TensorId out = add_output(op, shape(x), to);
  finish_op(op, 0);
  return out;
}

TensorId GraphBuilder::softmax(const std::string& name, TensorId x, int64_t dim) {
  OpAttrs a;
  a.dim = norm_dim(dim, shape(x).size(), name);
  return unary(OpKind::Softmax, name, x, a, 5);
}

TensorId GraphBuilder::log_softmax(const std::string& name, TensorId x, int64_t dim) {
  OpAttrs a;
  a.dim = norm_dim(dim, shape(x).size(), name);
  return unary(OpKind::LogSoftmax, name, x, a, 5);
}

TensorId GraphBuilder::matmul(const std::string& name, TensorId a, TensorId b) {
  const std::vector<int64_t> sa = shape(a);
  const std::vector<int64_t> sb = shape(b);
  if (sa.size() < 2 || sb.size() < 2 || sa.back() != sb[sb.size() - 2]) {
    throw InputError(name + ": matmul of " + shape_text(sa) + " and " + shape_text(sb) + " does not match");
  }
  std::vector<int64_t> ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  std::vector<int64_t> os = broadcast_shapes(ba, bb, name);
  int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  os.push_back(m);
  os.push_back(n);
  OpId op = add_op(OpKind::MatMul, name, {a, b}, {});
  TensorId out = add_output(op, os, tensor(a).dtype);
  int64_t batch = numel_of(os, name) / std::max<int64_t>(1, m * n);
  finish_op(op, checked_mul(checked_mul(batch, m * n, name), 2 * k, name + " flops"));
  return out;
}

TensorId GraphBuilder::mean(const std::string& name, TensorId x, int64_t dim, bool keepdim) {
  OpAttrs a;
  a.dim = norm_dim(dim, shape(x).size(), name);
  a.keepdim = keepdim;
  std::vector<int64_t> os = shape(x);
  if (keepdim) os[static_cast<size_t>(a.dim)] = 1;
  else os.erase(os.begin() + a.dim);
  OpId op = add_op(OpKind::Mean, name, {x}, a);
  TensorId out = add_output(op, os, tensor(x).dtype);
  finish_op(op, tensor(x).numel());
  return out;
}

TensorId GraphBuilder::sum(const std::string& name, TensorId x, int64_t dim, bool keepdim) {
  OpAttrs a;
  a.dim = norm_dim(dim, shape(x).size(), name);
  a.keepdim = keepdim;
  std::vector<int64_t> os = shape(x);
  if (keepdim) os[static_cast<size_t>(a.dim)] = 1;
  else os.erase(os.begin() + a.dim);
  OpId op = add_op(OpKind::Sum, name, {x}, a);
  TensorId out = add_output(op, os, tensor(x).dtype);
  finish_op(op, tensor(x).numel());
  return out;
}

TensorId GraphBuilder::max_pool2d(const std::string& name, TensorId x, const Pool2dSpec& spec) {
  return pool2d(OpKind::MaxPool2d, name, x, spec);
}

TensorId GraphBuilder::avg_pool2d(const std::string& name, TensorId x, const Pool2dSpec& spec) {
  return pool2d(OpKind::AvgPool2d, name, x, spec);
}

TensorId GraphBuilder::pool2d(OpKind kind, const std::string& name, TensorId x, const Pool2dSpec& spec) {
  const std::vector<int64_t> s = shape(x);
  const char* what = kind == OpKind::MaxPool2d ? "max_pool2d" : "avg_pool2d";
  if (s.size() != 4) throw InputError(name + ": " + what + " expects [N,C,H,W], got " + shape_text(s));
  OpAttrs a;
  a.kernel = {spec.kernel, spec.kernel};
  a.stride = {spec.stride, spec.stride};
  a.padding = {spec.padding, spec.padding};
  a.ceil_mode = spec.ceil_mode;
  int64_t ho = pool_out(s[2], spec.kernel, spec.stride, spec.padding, 1, spec.ceil_mode, name);
  int64_t wo = pool_out(s[3], spec.kernel, spec.stride, spec.padding, 1, spec.ceil_mode, name);
  OpId op = add_op(kind, name, {x}, a);
  TensorId out = add_output(op, {s[0], s[1], ho, wo}, tensor(x).dtype);
  finish_op(op, checked_mul(numel_of(shape(out), name), spec.kernel * spec.kernel, name));
  return out;
}

TensorId GraphBuilder::upsample2d(const std::string& name, TensorId x, int64_t out_h, int64_t out_w, bool bilinear) {
  const std::vector<int64_t> s = shape(x);
  if (s.size() != 4) throw InputError(name + ": interpolate expects [N,C,H,W], got " + shape_text(s));
  if (out_h <= 0 || out_w <= 0) throw InputError(name + ": interpolate to an empty size");
  OpAttrs a;
  a.kernel = {out_h, out_w};
  OpId op = add_op(OpKind::Upsample2d, name, {x}, a);
  TensorId out = add_output(op, {s[0], s[1], out_h, out_w}, tensor(x).dtype);
  // Bilinear: 4 taps, a multiply-add each, per output element.
  finish_op(op, checked_mul(tensor(out).numel(), bilinear ? 8 : 1, name));
  return out;
}

TensorId GraphBuilder::adaptive_avg_pool2d(const std::string& name, TensorId x, int64_t out_h, int64_t out_w) {
  const std::vector<int64_t> s = shape(x);
  if (s.size() != 4) throw InputError(name + ": adaptive_avg_pool2d expects [N,C,H,W], got " + shape_text(s));
  OpAttrs a;
  a.kernel = {out_h, out_w};
  OpId op = add_op(OpKind::AdaptiveAvgPool2d, name, {x}, a);
  TensorId out = add_output(op, {s[0], s[1], out_h, out_w}, tensor(x).dtype);
  finish_op(op, tensor(x).numel());
  return out;
}

TensorId GraphBuilder::dropout(const std::string& name, TensorId x, double p) {
  OpAttrs a;
  a.p = p;
  return unary(OpKind::Dropout, name, x, a, 2);
}

TensorId GraphBuilder::all_gather(const std::string& name, TensorId x, int64_t dim, int64_t ranks, bool into_buffer) {
  std::vector<int64_t> os = shape(x);
  const size_t d = static_cast<size_t>(norm_dim(dim, os.size(), name));
  os[d] = checked_mul(os[d], ranks, name);
  OpAttrs a;
  a.dim = static_cast<int64_t>(d);
  a.groups = ranks;
  a.inplace = into_buffer;
  OpId op = add_op(OpKind::AllGather, name, {x}, a);
  TensorId out = add_output(op, os, tensor(x).dtype);
  finish_op(op, 0);
  return out;
}

TensorId GraphBuilder::reduce_scatter(const std::string& name, TensorId x, int64_t dim, int64_t ranks) {
  std::vector<int64_t> os = shape(x);
  const size_t d = static_cast<size_t>(norm_dim(dim, os.size(), name));
  if (ranks < 1 || os[d] % ranks != 0) {
    throw InputError(name + ": --sequence-parallel needs the sequence length " + std::to_string(os[d]) +
                     " to be a multiple of --tensor-parallel " + std::to_string(ranks));
  }
  os[d] /= ranks;
  OpAttrs a;
  a.dim = static_cast<int64_t>(d);
  a.groups = ranks;
  OpId op = add_op(OpKind::ReduceScatter, name, {x}, a);
  TensorId out = add_output(op, os, tensor(x).dtype);
  finish_op(op, 0);
  return out;
}

TensorId GraphBuilder::view(const std::string& name, TensorId x, std::vector<int64_t> new_shape) {
  if (!is_contiguous(x)) {
    throw InputError(name + ": view of a non-contiguous tensor '" + tensor(x).name + "'");
  }
  int64_t total = tensor(x).numel();
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < new_shape.size(); ++i) {
    if (new_shape[i] == -1) {
      if (infer >= 0) throw InputError(name + ": view with two -1 dimensions");
      infer = static_cast<int>(i);
    } else {
      known = checked_mul(known, new_shape[i], name);
    }
  }
  if (infer >= 0) {
    if (known == 0 || total % known != 0) throw InputError(name + ": cannot infer -1 in view " + shape_text(new_shape));
    new_shape[static_cast<size_t>(infer)] = total / known;
  } else if (known != total) {
    throw InputError(name + ": view " + shape_text(new_shape) + " of a tensor of shape " + shape_text(shape(x)));
  }
  OpId op = add_op(OpKind::View, name, {x}, {});
  TensorId out = add_output(op, new_shape, tensor(x).dtype, x);
  finish_op(op, 0);
  return out;
}

TensorId GraphBuilder::flatten(const std::string& name, TensorId x, int64_t start_dim) {
  const std::vector<int64_t> s = shape(x);
  int64_t d = norm_dim(start_dim, s.size(), name);
  std::vector<int64_t> os(s.begin(), s.begin() + d);
  int64_t rest = 1;
  for (size_t i = static_cast<size_t>(d); i < s.size(); ++i) rest = checked_mul(rest, s[i], name);
  os.push_back(rest);
  if (os == s) return x;  // torch.flatten returns the input itself
  return view(name, x, os);
}

void GraphBuilder::set_channels_last(TensorId id) {
  Tensor& t = g_.tensors[static_cast<size_t>(id)];
  // With one channel or a 1x1 map, NHWC strides are contiguous ones too (size-1 dimensions'
  // strides do not count): PyTorch treats such a tensor as contiguous.
  if (t.shape.size() != 4 || t.shape[1] == 1 || (t.shape[2] == 1 && t.shape[3] == 1)) return;
  contiguous_[static_cast<size_t>(id)] = false;
  t.contiguous = false;
  t.channels_last = true;
}

TensorId GraphBuilder::permute(const std::string& name, TensorId x, std::vector<int64_t> perm) {
  const std::vector<int64_t> s = shape(x);
  if (perm.size() != s.size()) throw InputError(name + ": permute order has the wrong rank");
  std::vector<int64_t> os;
  std::vector<int64_t> inverse(s.size(), 0);
  for (size_t i = 0; i < perm.size(); ++i) {
    int64_t p = norm_dim(perm[i], s.size(), name);
    os.push_back(s[static_cast<size_t>(p)]);
    inverse[static_cast<size_t>(p)] = static_cast<int64_t>(i);
  }
  // The output's dimensions from the outermost stride to the innermost, known when x is
  // contiguous or channels-last. PyTorch's is_contiguous and is_contiguous(channels_last) ignore
  // the strides of size-1 dimensions: a permute that keeps the order of the others (LayerNorm2d's
  // permute back of a [N,1,1,C] map) is still contiguous.
  std::vector<int64_t> x_order;
  if (is_contiguous(x)) {
    for (size_t i = 0; i < s.size(); ++i) x_order.push_back(static_cast<int64_t>(i));
  } else if (is_channels_last(x)) {
    x_order = {0, 2, 3, 1};
  }
  std::vector<int64_t> order;  // output dimensions, outermost first, size-1 ones left out
  for (int64_t d : x_order) {
    if (s[static_cast<size_t>(d)] != 1) order.push_back(inverse[static_cast<size_t>(d)]);
  }
  auto follows = [&](std::vector<int64_t> layout) {
    std::vector<int64_t> kept;
    for (int64_t d : layout) {
      if (os[static_cast<size_t>(d)] != 1) kept.push_back(d);
    }
    return !x_order.empty() && kept == order;
  };
  std::vector<int64_t> plain;
  for (size_t i = 0; i < s.size(); ++i) plain.push_back(static_cast<int64_t>(i));
  const bool contiguous = follows(plain);
  const bool channels_last = !contiguous && s.size() == 4 && follows({0, 2, 3, 1});
  OpAttrs a;
  a.perm = perm;
  OpId op = add_op(OpKind::Permute, name, {x}, a);
  TensorId out = add_output(op, os, tensor(x).dtype, x, contiguous);
  if (channels_last) set_channels_last(out);
  finish_op(op, 0);
  return out;
}

TensorId GraphBuilder::transpose(const std::string& name, TensorId x, int64_t d0, int64_t d1) {
  const std::vector<int64_t> s = shape(x);
  int64_t a0 = norm_dim(d0, s.size(), name), a1 = norm_dim(d1, s.size(), name);
  std::vector<int64_t> os = s;
  std::swap(os[static_cast<size_t>(a0)], os[static_cast<size_t>(a1)]);
  OpAttrs a;
  a.perm = {a0, a1};
  OpId op = add_op(OpKind::Transpose, name, {x}, a);
  bool same = a0 == a1 || s[static_cast<size_t>(a0)] == 1 || s[static_cast<size_t>(a1)] == 1;
  TensorId out = add_output(op, os, tensor(x).dtype, x, same && is_contiguous(x));
  const int64_t rank = static_cast<int64_t>(s.size());
  if (!same && is_contiguous(x) && rank >= 2 && std::min(a0, a1) == rank - 2 && std::max(a0, a1) == rank - 1) {
    g_.tensors[static_cast<size_t>(out)].transposed_matrix = true;
  }
  finish_op(op, 0);
  return out;
}

TensorId GraphBuilder::slice(const std::string& name, TensorId x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  const std::vector<int64_t> s = shape(x);
  int64_t d = norm_dim(dim, s.size(), name);
  int64_t n = s[static_cast<size_t>(d)];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  if (step <= 0) throw InputError(name + ": slice step must be positive");
  std::vector<int64_t> os = s;
  os[static_cast<size_t>(d)] = (end - start + step - 1) / step;
  OpAttrs a;
  a.dim = d;
  a.start = start;
  a.end = end;
  a.step = step;
  // A slice stays contiguous only when it cuts the outermost non-unit dimension.
  bool contiguous = is_contiguous(x) && step == 1;
  for (size_t i = 0; i < static_cast<size_t>(d); ++i) contiguous = contiguous && s[i] == 1;
  if (os[static_cast<size_t>(d)] == n) contiguous = is_contiguous(x);
  OpId op = add_op(OpKind::Slice, name, {x}, a);
  TensorId out = add_output(op, os, tensor(x).dtype, x, contiguous);
  finish_op(op, 0);
  return out;
}

TensorId GraphBuilder::select(const std::string& name, TensorId x, int64_t dim, int64_t index) {
  const std::vector<int64_t> s = shape(x);
  int64_t d = norm_dim(dim, s.size(), name);
  std::vector<int64_t> os = s;
  os.erase(os.begin() + d);
  OpAttrs a;
  a.dim = d;
  a.start = index;
  bool contiguous = is_contiguous(x);
  for (size_t i = 0; i < static_cast<size_t>(d); ++i) contiguous = contiguous && s[i] == 1;
  OpId op = add_op(OpKind::Select, name, {x}, a);
  TensorId out = add_output(op, os, tensor(x).dtype, x, contiguous);
  finish_op(op, 0);
  return out;
}

TensorId GraphBuilder::expand(const std::string& name, TensorId x, std::vector<int64_t> new_shape) {
  std::vector<int64_t> os = broadcast_shapes(shape(x), new_shape, name);
  OpId op = add_op(OpKind::Expand, name, {x}, {});
  TensorId out = add_output(op, os, tensor(x).dtype, x, os == shape(x) && is_contiguous(x));
  finish_op(op, 0);
  return out;
}

TensorId GraphBuilder::contiguous(const std::string& name, TensorId x) {
  if (is_contiguous(x)) return x;  // .contiguous() of a contiguous tensor is the tensor itself
  OpId op = add_op(OpKind::Contiguous, name, {x}, {});
  TensorId out = add_output(op, shape(x), tensor(x).dtype);
  finish_op(op, 0);
  return out;
}

TensorId GraphBuilder::pad(const std::string& name, TensorId x, std::vector<int64_t> pads) {
  std::vector<int64_t> os = shape(x);
  if (pads.size() % 2 != 0 || pads.size() / 2 > os.size()) {
    throw InputError(name + ": pad needs a (before, after) pair per padded dimension of " + shape_text(os));
  }
  for (size_t i = 0; i < pads.size(); ++i) {
    if (pads[i] < 0) throw InputError(name + ": negative padding (cropping) is not modelled");
    int64_t& d = os[os.size() - 1 - i / 2];
    d = checked_add(d, pads[i], name);
  }
  OpAttrs a;
  a.padding = std::move(pads);
  OpId op = add_op(OpKind::Pad, name, {x}, a);
  TensorId out = add_output(op, os, tensor(x).dtype);
  finish_op(op, 0);
  return out;
}

TensorId GraphBuilder::roll(const std::string& name, TensorId x) {
  OpId op = add_op(OpKind::Roll, name, {x}, {});
  TensorId out = add_output(op, shape(x), tensor(x).dtype);
  finish_op(op, 0);
  return out;
}

TensorId GraphBuilder::roi_align(const std::string& name, TensorId features, TensorId rois,
                                  TensorId batch_indices, int64_t out_h, int64_t out_w) {
  const std::vector<int64_t> f = shape(features);
  const std::vector<int64_t> r = shape(rois);
  if (f.size() != 4 || r.empty() || out_h <= 0 || out_w <= 0) {
    throw InputError(name + ": roi_align needs [N,C,H,W] features, [K,...] rois and a positive "
                     "output size");
  }
  std::vector<TensorId> ins = {features, rois};
  if (batch_indices != kNone) ins.push_back(batch_indices);
  OpId op = add_op(OpKind::RoiAlign, name, ins, {});
  TensorId out = add_output(op, {r[0], f[1], out_h, out_w}, tensor(features).dtype);
  finish_op(op, 0);
  return out;
}

std::vector<TensorId> GraphBuilder::split(const std::string& name, TensorId x, int64_t split_size, int64_t dim) {
  const std::vector<int64_t> s = shape(x);
  int64_t d = norm_dim(dim, s.size(), name);
  if (split_size <= 0) throw InputError(name + ": split size must be positive");
  OpAttrs a;
  a.dim = d;
  a.step = split_size;
  OpId op = add_op(OpKind::Split, name, {x}, a);
  bool outer = is_contiguous(x);
  for (size_t i = 0; i < static_cast<size_t>(d); ++i) outer = outer && s[i] == 1;
  std::vector<TensorId> outs;
  for (int64_t start = 0; start < s[static_cast<size_t>(d)]; start += split_size) {
    std::vector<int64_t> os = s;
    os[static_cast<size_t>(d)] = std::min(split_size, s[static_cast<size_t>(d)] - start);
    bool whole = os[static_cast<size_t>(d)] == s[static_cast<size_t>(d)];
    outs.push_back(add_output(op, os, tensor(x).dtype, x, whole ? is_contiguous(x) : outer));
  }
  finish_op(op, 0);
  return outs;
}

TensorId GraphBuilder::cat(const std::string& name, const std::vector<TensorId>& xs, int64_t dim) {
  if (xs.empty()) throw InputError(name + ": cat of nothing");
  std::vector<int64_t> os = shape(xs[0]);
  int64_t d = norm_dim(dim, os.size(), name);
  for (size_t i = 1; i < xs.size(); ++i) {
    const std::vector<int64_t> s = shape(xs[i]);
    for (size_t j = 0; j < s.size() && s.size() == os.size(); ++j) {
      if (static_cast<int64_t>(j) != d && s[j] != os[j]) {
        throw InputError(name + ": cat of " + shape_text(os) + " and " + shape_text(s));
      }
    }
    if (s.size() != os.size()) throw InputError(name + ": cat of tensors of different rank");
    os[static_cast<size_t>(d)] += s[static_cast<size_t>(d)];
  }
  OpAttrs a;
  a.dim = d;
  OpId op = add_op(OpKind::Cat, name, xs, a);
  TensorId out = add_output(op, os, tensor(xs[0]).dtype);
  finish_op(op, 0);
  return out;
}

std::vector<TensorId> GraphBuilder::chunk(const std::string& name, TensorId x, int64_t chunks, int64_t dim) {
  if (chunks <= 0) throw InputError(name + ": chunk count must be positive, got " + std::to_string(chunks));
  int64_t d = norm_dim(dim, shape(x).size(), name);
  int64_t n = shape(x)[static_cast<size_t>(d)];
  int64_t piece = std::max<int64_t>(1, (n + chunks - 1) / chunks);
  std::vector<TensorId> out;
  for (int64_t start = 0; start < n; start += piece) {
    out.push_back(slice(name + "." + std::to_string(out.size()), x, d, start, std::min(n, start + piece)));
  }
  if (out.empty()) out.push_back(slice(name + ".0", x, d, 0, 0));  // an empty dimension: one empty piece
  return out;
}

void GraphBuilder::hold_until(TensorId t, OpId until) {
  HEADROOM_CHECK(until >= 0 && until < op_count(), "a hold must end at an op already written");
  if (tensor(t).producer != kNone && until <= tensor(t).producer) return;
  g_.holds.push_back({t, until});
}

void GraphBuilder::release_holds(size_t scope) {
  HEADROOM_CHECK(scope <= pending_holds_.size(), "scopes must nest");
  OpId last = static_cast<OpId>(g_.ops.size()) - 1;
  for (size_t i = scope; i < pending_holds_.size(); ++i) {
    if (last >= 0) g_.holds.push_back({pending_holds_[i], last});
  }
  pending_holds_.resize(scope);
}

void GraphBuilder::begin_loss() { stage_ = OpStage::Loss; }

TensorId GraphBuilder::quant_linear(const std::string& name, TensorId x, const std::vector<TensorId>& stored,
                                    int64_t out_features, int64_t temp_bytes, int64_t aux_bytes) {
  std::vector<TensorId> ins = {x};
  ins.insert(ins.end(), stored.begin(), stored.end());
  OpAttrs a;
  a.temp_bytes = temp_bytes;
  a.aux_bytes = aux_bytes;
  std::vector<int64_t> os = shape(x);
  const int64_t in = os.back();
  os.back() = out_features;
  OpId op = add_op(OpKind::QuantLinear, name, ins, a);
  TensorId out = add_output(op, os, tensor(x).dtype);
  finish_op(op, checked_mul(checked_mul(2, numel_of(os, name), name), in, name + " flops"));
  return out;
}

TensorId GraphBuilder::packed_parameter(const std::string& name, std::vector<int64_t> shape, DType dtype,
                                        int values_per_element) {
  TensorId id = parameter(name, std::move(shape), dtype);
  g_.tensors[static_cast<size_t>(id)].frozen = true;
  g_.tensors[static_cast<size_t>(id)].values_per_element = static_cast<int8_t>(values_per_element);
  return id;
}

TensorId GraphBuilder::cross_entropy(const std::string& name, TensorId logits, TensorId target, double weight) {
  // nn.CrossEntropyLoss is log_softmax over the class dimension followed by nll_loss: two calls,
  // two autograd nodes, and the log-probabilities stay saved.
  (void)weight;
  const std::vector<int64_t>& ls = shape(logits);
  if (ls.size() < 2) throw InputError(name + ": cross-entropy expects logits [N,C] or [N,C,d1,...], got " + shape_text(ls));
  check_class_targets(name, ls, shape(target));
  // cross_entropy_loss calls log_softmax(self, 1, self.scalar_type()): the dtype is named, so
  // autocast's fp32_set_opt_dtype policy leaves it in the logits' dtype (and nll_loss, an fp32
  // op, casts the log-probabilities up).
  OpAttrs a;
  a.dim = norm_dim(1, ls.size(), name);
  a.explicit_dtype = true;
  return nll_loss(name, unary(OpKind::LogSoftmax, name + ".log_softmax", logits, a, 5), target);
}

void GraphBuilder::check_class_targets(const std::string& name, const std::vector<int64_t>& ls,
                                       const std::vector<int64_t>& ts) const {
  std::vector<int64_t> want = {ls[0]};
  want.insert(want.end(), ls.begin() + 2, ls.end());
  if (ts != want) {
    throw InputError(name + ": class targets for scores " + shape_text(ls) + " must be " + shape_text(want) +
                     " (class dimension 1), got " + shape_text(ts));
  }
}

TensorId GraphBuilder::nll_loss(const std::string& name, TensorId log_probs, TensorId target) {
  std::vector<int64_t> ls = shape(log_probs);
  if (ls.size() < 2) throw InputError(name + ": nll_loss expects log-probabilities [N,C] or [N,C,d1,...], got " + shape_text(ls));
  check_class_targets(name, ls, shape(target));
  if (ls.size() == 3 || ls.size() > 4) {
    // nll_loss_nd: input.contiguous().view({N, C, 1, -1}), target.contiguous().view({N, 1, -1}).
    log_probs = view(name + ".input_view", contiguous(name + ".input_contiguous", log_probs), {ls[0], ls[1], 1, -1});
    target = view(name + ".target_view", contiguous(name + ".target_contiguous", target), {ls[0], 1, -1});
  }
  OpId op = add_op(OpKind::NllLoss, name, {log_probs, target}, {});
  TensorId out = add_output(op, {}, tensor(log_probs).dtype);
  finish_op(op, tensor(log_probs).numel());
  return out;
}

TensorId GraphBuilder::mse_loss(const std::string& name, TensorId out_t, TensorId target) {
  OpId op = add_op(OpKind::MseLoss, name, {out_t, target}, {});
  TensorId out = add_output(op, {}, tensor(out_t).dtype);
  finish_op(op, checked_mul(tensor(out_t).numel(), 3, name));
  return out;
}

TensorId GraphBuilder::pointwise_loss(OpKind kind, const std::string& name, TensorId out_t, TensorId target,
                                      int flops_per_element) {
  if (shape(out_t) != shape(target)) {
    throw InputError(name + ": " + std::string(op_kind_name(kind)) + " needs a target shaped like its input " +
                     shape_text(shape(out_t)) + ", got " + shape_text(shape(target)));
  }
  OpId op = add_op(kind, name, {out_t, target}, {});
  TensorId out = add_output(op, {}, tensor(out_t).dtype);
  finish_op(op, checked_mul(tensor(out_t).numel(), flops_per_element, name));
  return out;
}

TensorId GraphBuilder::bce_with_logits_loss(const std::string& name, TensorId out_t, TensorId target) {
  return pointwise_loss(OpKind::BceWithLogitsLoss, name, out_t, target, 8);
}

TensorId GraphBuilder::l1_loss(const std::string& name, TensorId out_t, TensorId target) {
  return pointwise_loss(OpKind::L1Loss, name, out_t, target, 3);
}

TensorId GraphBuilder::smooth_l1_loss(const std::string& name, TensorId out_t, TensorId target) {
  return pointwise_loss(OpKind::SmoothL1Loss, name, out_t, target, 4);
}

Graph GraphBuilder::finish() {
  release_holds(0);
  g_.validate();
  return std::move(g_);
}


// ---- Transformer-zoo additions: layers with existing parameters, layout-independent views, and
// untracked calls on masks and position tables. ----------------------------------------------

TensorId GraphBuilder::embedding_with(const std::string& module, TensorId ids, TensorId weight) {
  const std::vector<int64_t> ws = shape(weight);
  if (ws.size() != 2) throw InputError(module + ": embedding weight must be 2-D, got " + shape_text(ws));
  OpId op = add_op(OpKind::Embedding, module, {ids, weight}, {});
  std::vector<int64_t> os = shape(ids);
  os.push_back(ws[1]);
  TensorId out = add_output(op, os, act_);
  finish_op(op, 0);
  return out;
}

TensorId GraphBuilder::layer_norm_with(const std::string& module, TensorId x, TensorId weight, TensorId bias) {
  int64_t d = shape(x).empty() ? 0 : shape(x).back();
  if (shape(weight) != std::vector<int64_t>{d} || (bias != kNone && shape(bias) != std::vector<int64_t>{d})) {
    throw InputError(module + ": layer_norm over " + shape_text(shape(x)) + " with weight " + shape_text(shape(weight)));
  }
  std::vector<TensorId> ins{x, weight};
  if (bias != kNone) ins.push_back(bias);
  OpId op = add_op(OpKind::LayerNorm, module, ins, {});
  TensorId out = add_output(op, shape(x), tensor(x).dtype);
  finish_op(op, checked_mul(tensor(x).numel(), 5, "flops"));
  return out;
}

TensorId GraphBuilder::addmm(const std::string& name, TensorId bias, TensorId mat1, TensorId mat2) {
  const std::vector<int64_t> a = shape(mat1);
  const std::vector<int64_t> w = shape(mat2);
  if (a.size() != 2 || w.size() != 2 || a[1] != w[0] || shape(bias) != std::vector<int64_t>{w[1]}) {
    throw InputError(name + ": addmm of " + shape_text(a) + " and " + shape_text(w) + " with bias " +
                     shape_text(shape(bias)));
  }
  OpId op = add_op(OpKind::Linear, name, {mat1, mat2, bias}, {});
  TensorId out = add_output(op, {a[0], w[1]}, tensor(mat1).dtype);
  finish_op(op, checked_mul(checked_mul(a[0], checked_mul(a[1], w[1], name), name), 2, name + " flops"));
  return out;
}

TensorId GraphBuilder::unsqueeze(const std::string& name, TensorId x, int64_t dim) {
  std::vector<int64_t> os = shape(x);
  int64_t d = norm_dim(dim, os.size() + 1, name);
  os.insert(os.begin() + d, 1);
  OpId op = add_op(OpKind::View, name, {x}, {});
  TensorId out = add_output(op, os, tensor(x).dtype, x, is_contiguous(x));
  finish_op(op, 0);
  return out;
}

TensorId GraphBuilder::squeeze(const std::string& name, TensorId x, int64_t dim) {
  std::vector<int64_t> os = shape(x);
  int64_t d = norm_dim(dim, os.size(), name);
  if (os[static_cast<size_t>(d)] != 1) {
    throw InputError(name + ": squeeze of dimension " + std::to_string(dim) + " of " + shape_text(os) +
                     ", which is not 1");
  }
  os.erase(os.begin() + d);
  OpId op = add_op(OpKind::View, name, {x}, {});
  TensorId out = add_output(op, os, tensor(x).dtype, x, is_contiguous(x));
  finish_op(op, 0);
  return out;
}

TensorId GraphBuilder::unflatten(const std::string& name, TensorId x, int64_t dim, std::vector<int64_t> sizes) {
  const std::vector<int64_t> s = shape(x);
  int64_t d = norm_dim(dim, s.size(), name);
  int64_t n = s[static_cast<size_t>(d)];
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1 && infer < 0) {
      infer = static_cast<int>(i);
    } else if (sizes[i] < 0) {
      throw InputError(name + ": bad sizes " + shape_text(sizes));
    } else {
      known = checked_mul(known, sizes[i], name);
    }
  }
  if (infer >= 0) {
    if (known == 0 || n % known != 0) throw InputError(name + ": cannot split " + std::to_string(n) + " into " + shape_text(sizes));
    sizes[static_cast<size_t>(infer)] = n / known;
  } else if (known != n) {
    throw InputError(name + ": cannot split dimension " + std::to_string(n) + " of " + shape_text(s) + " into " +
                     shape_text(sizes));
  }
  std::vector<int64_t> os(s.begin(), s.begin() + d);
  os.insert(os.end(), sizes.begin(), sizes.end());
  os.insert(os.end(), s.begin() + d + 1, s.end());
  OpId op = add_op(OpKind::View, name, {x}, {});
  TensorId out = add_output(op, os, tensor(x).dtype, x, is_contiguous(x));
  finish_op(op, 0);
  return out;
}

TensorId GraphBuilder::reshape(const std::string& name, TensorId x, std::vector<int64_t> new_shape) {
  if (is_contiguous(x)) return view(name, x, std::move(new_shape));
  TensorId copy = contiguous(name, x);
  return view(name + ".view", copy, std::move(new_shape));
}

bool GraphBuilder::depends_on_parameter(TensorId t) {
  if (tracked_.size() < g_.tensors.size()) tracked_.resize(g_.tensors.size(), -1);
  std::vector<TensorId> stack{t};
  while (!stack.empty()) {
    TensorId u = stack.back();
    if (tracked_[static_cast<size_t>(u)] >= 0) {
      stack.pop_back();
      continue;
    }
    const Tensor& x = g_.tensor(u);
    if (x.producer == kNone) {
      tracked_[static_cast<size_t>(u)] = x.role == TensorRole::Parameter ? 1 : 0;
      stack.pop_back();
      continue;
    }
    bool pending = false, any = false;
    for (TensorId in : g_.op(x.producer).inputs) {
      int8_t s = tracked_[static_cast<size_t>(in)];
      if (s < 0) {
        stack.push_back(in);
        pending = true;
      }
      any = any || s == 1;
    }
    if (!pending) {
      tracked_[static_cast<size_t>(u)] = any ? 1 : 0;
      stack.pop_back();
    }
  }
  return tracked_[static_cast<size_t>(t)] == 1;
}

TensorId GraphBuilder::untracked(const std::string& name, std::vector<TensorId> inputs, std::vector<int64_t> out_shape,
                                 DType dtype, OpAttrs attrs, TensorId alias_of) {
  for (TensorId in : inputs) {
    HEADROOM_CHECK(!depends_on_parameter(in),
                   name + ": '" + tensor(in).name + "' depends on a parameter; an Opaque op would not model its gradient");
  }
  int64_t flops = numel_of(out_shape, name);
  OpId op = add_op(OpKind::Opaque, name, std::move(inputs), std::move(attrs));
  TensorId out = add_output(op, std::move(out_shape), dtype, alias_of);
  finish_op(op, flops);
  return out;
}

TensorId GraphBuilder::factory(const std::string& name, std::vector<int64_t> shape, DType dtype) {
  return untracked(name, {}, std::move(shape), dtype);
}

TensorId GraphBuilder::compare(const std::string& name, TensorId a, TensorId b) {
  return untracked(name, {a, b}, broadcast_shapes(shape(a), shape(b), name), DType::Bool);
}

TensorId GraphBuilder::rsub_scalar(const std::string& name, TensorId x, double s) {
  OpAttrs a;
  a.scalar = s;
  return untracked(name, {x}, shape(x), tensor(x).dtype, a);
}

TensorId GraphBuilder::masked_fill(const std::string& name, TensorId x, TensorId mask, double value) {
  OpAttrs a;
  a.scalar = value;
  return untracked(name, {x, mask}, broadcast_shapes(shape(x), shape(mask), name), tensor(x).dtype, a);
}

TensorId GraphBuilder::masked_fill_(const std::string& name, TensorId x, TensorId mask, double value) {
  if (broadcast_shapes(shape(x), shape(mask), name) != shape(x)) {
    throw InputError(name + ": in-place masked_fill_ of " + shape_text(shape(x)) + " with mask " + shape_text(shape(mask)));
  }
  OpAttrs a;
  a.scalar = value;
  a.inplace = true;
  return untracked(name, {x, mask}, shape(x), tensor(x).dtype, a, x);
}

TensorId GraphBuilder::index(const std::string& name, TensorId x, TensorId indices) {
  const std::vector<int64_t> s = shape(x);
  if (s.empty()) throw InputError(name + ": indexing a 0-dim tensor");
  std::vector<int64_t> os = shape(indices);
  os.insert(os.end(), s.begin() + 1, s.end());
  return untracked(name, {x, indices}, os, tensor(x).dtype);
}

}  // namespace headroom
