// GraphBuilder methods for importers (see the "Importer additions" block of builder.h): the layers
// of an imported file come with their parameters already made, with per-axis geometry, and with
// sizes that are not trusted, so every product here is checked.
#include <algorithm>
#include <utility>

#include "ir/builder.h"
#include "util/checked.h"
#include "util/error.h"

namespace headroom {
namespace {

int64_t numel(const std::vector<int64_t>& s, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : s) n = checked_mul(n, d, what);
  return n;
}

// One spatial axis of a window: output size, PyTorch's rule (see Window2d).
int64_t window_out(int64_t in, int64_t k, int64_t s, int64_t pad_begin, int64_t pad_end, int64_t d,
                   bool ceil_mode, const std::string& what) {
  if (k <= 0 || s <= 0 || d <= 0 || pad_begin < 0 || pad_end < 0) {
    throw InputError(what + ": kernel " + std::to_string(k) + ", stride " + std::to_string(s) +
                     ", dilation " + std::to_string(d) + " must be positive and pads " +
                     std::to_string(pad_begin) + "," + std::to_string(pad_end) + " not negative");
  }
  int64_t eff = checked_add(checked_mul(d, k - 1, what), 1, what);
  int64_t padded = checked_add(in, checked_add(pad_begin, pad_end, what), what);
  if (padded < eff) {
    throw InputError(what + ": input size " + std::to_string(in) + " (padded " +
                     std::to_string(padded) + ") is smaller than the kernel (" +
                     std::to_string(eff) + ")");
  }
  int64_t num = padded - eff;
  int64_t out = (ceil_mode ? num / s + (num % s != 0 ? 1 : 0) : num / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + pad_begin) --out;
  return out;
}

OpAttrs window_attrs(const Window2d& w) {
  OpAttrs a;
  a.kernel = {w.kernel_h, w.kernel_w};
  a.stride = {w.stride_h, w.stride_w};
  a.padding = {w.pad_top, w.pad_left};
  a.dilation = {w.dilation_h, w.dilation_w};
  a.ceil_mode = w.ceil_mode;
  return a;
}

std::vector<int64_t> reduced_shape(const std::vector<int64_t>& s, std::vector<int64_t>& dims,
                                   bool keepdim, const std::string& what) {
  const int64_t r = static_cast<int64_t>(s.size());
  std::vector<bool> drop(s.size(), false);
  for (int64_t& d : dims) {
    if (d < -r || d >= r) {
      throw InputError(what + ": dimension " + std::to_string(d) + " out of range for rank " +
                       std::to_string(r));
    }
    if (d < 0) d += r;
    if (drop[static_cast<size_t>(d)])
      throw InputError(what + ": dimension " + std::to_string(d) + " repeated");
    drop[static_cast<size_t>(d)] = true;
  }
  std::vector<int64_t> os;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!drop[i])
      os.push_back(s[i]);
    else if (keepdim)
      os.push_back(1);
  }
  return os;
}

}  // namespace

TensorId GraphBuilder::parameter(const std::string& name, std::vector<int64_t> shape, DType dtype) {
  return add_tensor(name, std::move(shape), dtype, TensorRole::Parameter, -1);
}

TensorId GraphBuilder::conv2d_with(const std::string& module, TensorId x, TensorId weight,
                                   TensorId bias, const Window2d& w, int64_t groups) {
  const std::vector<int64_t> s = shape(x);
  const std::vector<int64_t> ws = shape(weight);
  if (s.size() != 4 || ws.size() != 4) {
    throw InputError(module + ": conv2d expects input [N,C,H,W] and weight [O,C/g,kh,kw], got " +
                     shape_text(s) + " and " + shape_text(ws));
  }
  if (groups <= 0 || ws[0] % groups != 0 || checked_mul(ws[1], groups, module) != s[1]) {
    throw InputError(module + ": input " + shape_text(s) + " does not match weight " +
                     shape_text(ws) + " with groups " + std::to_string(groups));
  }
  if (bias != kNone && shape(bias) != std::vector<int64_t>{ws[0]}) {
    throw InputError(module + ": bias " + shape_text(shape(bias)) + " for " +
                     std::to_string(ws[0]) + " channels");
  }
  Window2d g = w;
  g.kernel_h = ws[2];
  g.kernel_w = ws[3];
  g.ceil_mode = false;
  int64_t ho = window_out(s[2], g.kernel_h, g.stride_h, g.pad_top, g.pad_bottom, g.dilation_h,
                          false, module);
  int64_t wo = window_out(s[3], g.kernel_w, g.stride_w, g.pad_left, g.pad_right, g.dilation_w,
                          false, module);
  std::vector<TensorId> ins{x, weight};
  if (bias != kNone) ins.push_back(bias);
  OpAttrs a = window_attrs(g);
  a.groups = groups;
  OpId op = add_op(OpKind::Conv2d, module, ins, a);
  TensorId out = add_output(op, {s[0], ws[0], ho, wo}, tensor(x).dtype);
  // aten::_convolution runs in the input's suggest_memory_format().
  if (is_channels_last(x)) set_channels_last(out);
  int64_t macs =
      checked_mul(numel(shape(out), module),
                  checked_mul(ws[1], checked_mul(ws[2], ws[3], module), module), module + " flops");
  finish_op(op, checked_mul(macs, 2, module + " flops"));
  return out;
}

TensorId GraphBuilder::conv_transpose2d_with(const std::string& module, TensorId x, TensorId weight,
                                             TensorId bias, const Window2d& w,
                                             std::vector<int64_t> output_padding, int64_t groups) {
  const std::vector<int64_t> s = shape(x);
  const std::vector<int64_t> ws = shape(weight);
  if (s.size() != 4 || ws.size() != 4) {
    throw InputError(module + ": conv_transpose2d expects input [N,C,H,W] and weight [C,O,kh,kw], got " +
                     shape_text(s) + " and " + shape_text(ws));
  }
  if (groups != 1) {
    throw InputError(module + ": conv_transpose2d with groups " + std::to_string(groups) +
                     " is not modelled (only groups 1)");
  }
  if (ws[0] != s[1]) {
    throw InputError(module + ": input " + shape_text(s) + " does not match weight " + shape_text(ws));
  }
  if (bias != kNone && shape(bias) != std::vector<int64_t>{ws[1]}) {
    throw InputError(module + ": bias " + shape_text(shape(bias)) + " for " + std::to_string(ws[1]) +
                     " channels");
  }
  if (output_padding.size() != 2) {
    throw InputError(module + ": output_padding must have 2 values, got " + std::to_string(output_padding.size()));
  }
  const int64_t in[2] = {s[2], s[3]}, k[2] = {ws[2], ws[3]}, st[2] = {w.stride_h, w.stride_w};
  const int64_t pad[2] = {w.pad_top, w.pad_left}, pad_end[2] = {w.pad_bottom, w.pad_right};
  const int64_t dil[2] = {w.dilation_h, w.dilation_w};
  int64_t out[2];
  for (int i = 0; i < 2; ++i) {
    const int64_t op_pad = output_padding[static_cast<size_t>(i)];
    if (k[i] <= 0 || st[i] <= 0 || dil[i] <= 0 || pad[i] < 0 || pad[i] != pad_end[i] || op_pad < 0 ||
        (op_pad >= st[i] && op_pad >= dil[i])) {
      throw InputError(module + ": conv_transpose2d kernel " + std::to_string(k[i]) + ", stride " +
                       std::to_string(st[i]) + ", dilation " + std::to_string(dil[i]) + ", padding " +
                       std::to_string(pad[i]) + " and output_padding " + std::to_string(op_pad) +
                       " (positive, symmetric padding, output_padding below stride or dilation)");
    }
    // (in - 1) * stride - 2 * pad + dilation * (kernel - 1) + output_padding + 1
    int64_t grown = checked_add(checked_mul(in[i] - 1, st[i], module),
                                checked_add(checked_mul(dil[i], k[i] - 1, module), op_pad + 1, module), module);
    out[i] = grown - checked_mul(2, pad[i], module);
    if (out[i] <= 0) {
      throw InputError(module + ": conv_transpose2d output size " + std::to_string(out[i]) + " is not positive");
    }
  }
  std::vector<TensorId> ins{x, weight};
  if (bias != kNone) ins.push_back(bias);
  OpAttrs a = window_attrs(w);
  a.kernel = {k[0], k[1]};
  a.ceil_mode = false;
  a.groups = 1;
  a.output_padding = std::move(output_padding);
  OpId op = add_op(OpKind::ConvTranspose2d, module, ins, a);
  add_output(op, {s[0], ws[1], out[0], out[1]}, tensor(x).dtype);
  // Every input element meets every weight of its channel: N*Cin*H*W * Cout*kh*kw multiply-adds.
  int64_t macs = checked_mul(numel(s, module), checked_mul(ws[1], checked_mul(k[0], k[1], module), module),
                             module + " flops");
  finish_op(op, checked_mul(macs, 2, module + " flops"));
  return g_.ops[static_cast<size_t>(op)].outputs[0];
}

TensorId GraphBuilder::batch_norm_with(const std::string& module, TensorId x, TensorId weight,
                                       TensorId bias, TensorId running_mean, TensorId running_var,
                                       bool training) {
  const std::vector<int64_t> s = shape(x);
  if (s.size() < 2)
    throw InputError(module + ": batch norm expects [N,C,...], got " + shape_text(s));
  const std::vector<int64_t> c{s[1]};
  for (TensorId t : {weight, bias, running_mean, running_var}) {
    if (shape(t) != c) {
      throw InputError(module + ": '" + tensor(t).name + "' is " + shape_text(shape(t)) +
                       ", expected " + shape_text(c) + " for input " + shape_text(s));
    }
  }
  OpAttrs a;
  a.training = training;
  OpId op = add_op(OpKind::BatchNorm2d, module, {x, weight, bias, running_mean, running_var}, a);
  TensorId out = add_output(op, s, tensor(x).dtype);
  finish_op(op, checked_mul(tensor(x).numel(), 4, "flops"));
  return out;
}

TensorId GraphBuilder::linear_in_out(const std::string& name, TensorId x, TensorId weight,
                                     TensorId bias) {
  const std::vector<int64_t> s = shape(x);
  const std::vector<int64_t> ws = shape(weight);
  if (s.empty() || ws.size() != 2 || s.back() != ws[0]) {
    throw InputError(name + ": x @ W of " + shape_text(s) + " and weight " + shape_text(ws) +
                     " [in,out] does not match");
  }
  if (bias != kNone &&
      broadcast_shapes(shape(bias), {ws[1]}, name) != std::vector<int64_t>{ws[1]}) {
    throw InputError(name + ": bias " + shape_text(shape(bias)) + " for " + std::to_string(ws[1]) +
                     " outputs");
  }
  std::vector<TensorId> ins{x, weight};
  if (bias != kNone) ins.push_back(bias);
  OpId op = add_op(OpKind::Linear, name, ins, {});
  std::vector<int64_t> os = s;
  os.back() = ws[1];
  TensorId out = add_output(op, os, tensor(x).dtype);
  int64_t macs = checked_mul(numel(os, name), ws[0], name + " flops");
  finish_op(op, checked_mul(macs, 2, name + " flops"));
  return out;
}

TensorId GraphBuilder::max_pool2d_with(const std::string& name, TensorId x, const Window2d& w) {
  return pool2d_with(OpKind::MaxPool2d, name, x, w);
}

TensorId GraphBuilder::avg_pool2d_with(const std::string& name, TensorId x, const Window2d& w) {
  return pool2d_with(OpKind::AvgPool2d, name, x, w);
}

TensorId GraphBuilder::pool2d_with(OpKind kind, const std::string& name, TensorId x, const Window2d& w) {
  const std::vector<int64_t> s = shape(x);
  const bool max = kind == OpKind::MaxPool2d;
  if (s.size() != 4)
    throw InputError(name + ": " + (max ? "max_pool2d" : "avg_pool2d") + " expects [N,C,H,W], got " + shape_text(s));
  // The output size of average pooling ignores any dilation, as PyTorch's avg_pool2d has none.
  const int64_t dh = max ? w.dilation_h : 1, dw = max ? w.dilation_w : 1;
  int64_t ho = window_out(s[2], w.kernel_h, w.stride_h, w.pad_top, w.pad_bottom, dh, w.ceil_mode, name);
  int64_t wo = window_out(s[3], w.kernel_w, w.stride_w, w.pad_left, w.pad_right, dw, w.ceil_mode, name);
  OpId op = add_op(kind, name, {x}, window_attrs(w));
  TensorId out = add_output(op, {s[0], s[1], ho, wo}, tensor(x).dtype);
  finish_op(op,
            checked_mul(numel(shape(out), name), checked_mul(w.kernel_h, w.kernel_w, name), name));
  return out;
}

TensorId GraphBuilder::mean_dims(const std::string& name, TensorId x, std::vector<int64_t> dims,
                                 bool keepdim) {
  std::vector<int64_t> os = reduced_shape(shape(x), dims, keepdim, name);
  OpAttrs a;
  a.dim = dims.empty() ? -1 : dims.front();
  a.keepdim = keepdim;
  OpId op = add_op(OpKind::Mean, name, {x}, a);
  TensorId out = add_output(op, os, tensor(x).dtype);
  finish_op(op, tensor(x).numel());
  return out;
}

TensorId GraphBuilder::sum_dims(const std::string& name, TensorId x, std::vector<int64_t> dims,
                                bool keepdim) {
  std::vector<int64_t> os = reduced_shape(shape(x), dims, keepdim, name);
  OpAttrs a;
  a.dim = dims.empty() ? -1 : dims.front();
  a.keepdim = keepdim;
  OpId op = add_op(OpKind::Sum, name, {x}, a);
  TensorId out = add_output(op, os, tensor(x).dtype);
  finish_op(op, tensor(x).numel());
  return out;
}

std::vector<TensorId> GraphBuilder::opaque(const std::string& name, std::vector<TensorId> inputs,
                                           const std::vector<OpaqueOutput>& outputs,
                                           OpAttrs attrs) {
  if (outputs.empty()) throw InputError(name + ": an op without outputs");
  const bool inplace = attrs.inplace;
  if (inplace && (inputs.empty() || outputs.size() != 1 || outputs[0].shape != shape(inputs[0]) ||
                  outputs[0].dtype != tensor(inputs[0]).dtype)) {
    throw InputError(name + ": an in-place op writes one output of its first input's shape and dtype");
  }
  OpId op = add_op(OpKind::Opaque, name, std::move(inputs), std::move(attrs));
  std::vector<TensorId> outs;
  int64_t flops = 0;
  for (const OpaqueOutput& o : outputs) {
    flops = checked_add(flops, numel(o.shape, name), name + " flops");
    if (inplace) {
      // The output is input 0's storage, with its layout (x.hardswish_(), x.silu_()).
      TensorId x = g_.ops[static_cast<size_t>(op)].inputs[0];
      outs.push_back(add_output(op, o.shape, o.dtype, x, is_contiguous(x)));
    } else {
      outs.push_back(add_output(op, o.shape, o.dtype));
    }
  }
  finish_op(op, flops);
  return outs;
}

}  // namespace headroom
