#include "training/autocast.h"

#include <map>

#include "util/error.h"

namespace headroom {
namespace {

enum class Policy { Lower, Fp32, Promote };

Policy policy_of(OpKind k) {
  switch (k) {
    case OpKind::Conv2d:
    case OpKind::ConvTranspose2d:
    case OpKind::Linear:
    case OpKind::MatMul: return Policy::Lower;
    case OpKind::Softmax:
    case OpKind::LogSoftmax:
    case OpKind::LayerNorm:
    case OpKind::PowScalar:
    case OpKind::Rsqrt:
    case OpKind::Sum:
    case OpKind::NllLoss:
    case OpKind::MseLoss:
    case OpKind::BceWithLogitsLoss:
    case OpKind::L1Loss:
    case OpKind::SmoothL1Loss: return Policy::Fp32;
    default: return Policy::Promote;
  }
}

class Rewriter {
 public:
  Rewriter(const Graph& g, DType low) : g_(g), low_(low) {}

  Graph run(bool grad_scaler) {
    out_.model = g_.model;
    out_.dims = g_.dims;
    out_.notes = g_.notes;
    map_.assign(g_.tensors.size(), kNone);
    for (const Tensor& t : g_.tensors) {
      if (t.producer != kNone) continue;
      Tensor c = t;
      c.id = static_cast<TensorId>(out_.tensors.size());
      if (c.tied_to != kNone) c.tied_to = map_[static_cast<size_t>(c.tied_to)];
      map_[static_cast<size_t>(t.id)] = c.id;
      out_.tensors.push_back(c);
    }
    for (TensorId t : g_.inputs) out_.inputs.push_back(map_[static_cast<size_t>(t)]);
    for (TensorId t : g_.targets) out_.targets.push_back(map_[static_cast<size_t>(t)]);
    for (const Op& op : g_.ops) rewrite(op);
    for (TensorId t : g_.outputs) out_.outputs.push_back(map_[static_cast<size_t>(t)]);
    out_.loss = g_.loss == kNone ? kNone : map_[static_cast<size_t>(g_.loss)];
    for (const Hold& h : g_.holds) out_.holds.push_back({map_[static_cast<size_t>(h.tensor)], op_map_.at(h.until)});
    if (!out_.ops.empty()) {
      // autocast's cache of weight casts is cleared when the autocast region (forward + loss) ends.
      OpId last = static_cast<OpId>(out_.ops.size()) - 1;
      for (const auto& [param, cast] : weight_cast_) out_.holds.push_back({cast, last});
    }
    for (TensorId t : g_.loss_terms) out_.loss_terms.push_back(map_[static_cast<size_t>(t)]);
    if (grad_scaler && out_.loss != kNone) {
      out_.loss_terms.push_back(out_.loss);
      // scaler.scale(loss): loss * scale, a new 0-dim tensor that backward starts from.
      Op op;
      op.kind = OpKind::MulScalar;
      op.name = "grad_scaler.scale";
      op.inputs = {out_.loss};
      op.attrs.scalar = 65536.0;
      op.stage = OpStage::Loss;
      out_.loss = emit(op, {{std::vector<int64_t>{}, DType::F32, kNone, true, false}});
    }
    out_.notes.push_back(std::string("autocast to ") + std::string(dtype_name(low_)) +
                         ": convolutions, linear layers and matmuls run in " + std::string(dtype_name(low_)) +
                         ", parameters stay float32");
    out_.validate();
    return std::move(out_);
  }

 private:
  struct OutSpec {
    std::vector<int64_t> shape;
    DType dtype;
    TensorId alias_of;
    bool contiguous;
    bool channels_last;
  };

  TensorId emit(Op op, const std::vector<OutSpec>& outs) {
    op.id = static_cast<OpId>(out_.ops.size());
    op.outputs.clear();
    for (size_t j = 0; j < outs.size(); ++j) {
      Tensor t;
      t.id = static_cast<TensorId>(out_.tensors.size());
      t.name = op.name + (j ? ":" + std::to_string(j) : "");
      t.shape = outs[j].shape;
      t.dtype = outs[j].dtype;
      t.producer = op.id;
      t.alias_of = outs[j].alias_of;
      t.contiguous = outs[j].contiguous;
      t.channels_last = outs[j].channels_last;
      op.outputs.push_back(t.id);
      out_.tensors.push_back(std::move(t));
    }
    out_.ops.push_back(std::move(op));
    return out_.ops.back().outputs[0];
  }

  TensorId cast(TensorId t, DType to, const std::string& name, OpStage stage) {
    const Tensor& x = out_.tensor(t);
    if (x.dtype == to || !is_floating(x.dtype)) return t;
    // autocast caches casts of leaves that require grad only (cached_cast: arg.requires_grad()
    // && arg.is_leaf()): a frozen weight is cast again at every use.
    bool cacheable = x.requires_grad();
    if (cacheable) {
      auto it = weight_cast_.find(t);
      if (it != weight_cast_.end()) return it->second;
    }
    Op op;
    op.kind = OpKind::Cast;
    op.name = name;
    op.inputs = {t};
    op.stage = stage;
    op.bytes_moved = x.bytes() + x.numel() * dtype_size(to);
    std::vector<int64_t> shape = x.shape;
    int8_t batch_axis = x.batch_axis;
    // .to(dtype) keeps the strides (preserve_format): a channels-last map stays one.
    const bool channels_last = x.channels_last;
    TensorId out = emit(op, {{shape, to, kNone, !channels_last, channels_last}});
    out_.tensors[static_cast<size_t>(out)].batch_axis = batch_axis;
    if (cacheable) weight_cast_[t] = out;
    return out;
  }

  void rewrite(const Op& src) {
    Op op = src;
    for (TensorId& in : op.inputs) in = map_[static_cast<size_t>(in)];
    Policy pol = policy_of(op.kind);
    // softmax and log_softmax follow fp32_set_opt_dtype (aten/src/ATen/autocast_mode.cpp): a
    // call that names its dtype runs unchanged (cross_entropy_loss's log_softmax in the logits'
    // dtype; measured on the H100 with 2.11: gpt2's bf16 log-probabilities stay saved beside
    // nll_loss's float32 copy of them).
    if (op.attrs.explicit_dtype) pol = Policy::Promote;
    DType out_dtype = DType::F32;
    bool has_float = false;
    // The autocast kernel casts its arguments in one call, redispatch(cached_cast(args)...)
    // (aten/src/ATen/autocast_mode.h WrapFunction_), whose arguments GCC evaluates right to left:
    // F.linear(x, W, b) copies the bias, then W, then x. The engine runs the casts' backward nodes
    // latest first, so x's fp32 gradient comes first and the bias's last (measured on the H100
    // with 2.11: resnet50's fc, llama's lm_head). GPT-2's Conv1D, addmm(bias, x, W), copies W, x,
    // bias; it is the same Linear op here, so it takes F.linear's order (its peaks do not move).
    for (size_t k = op.inputs.size(); k-- > 0;) {
      TensorId& in = op.inputs[k];
      if (!is_floating(out_.tensor(in).dtype)) continue;
      if (pol == Policy::Lower) in = cast(in, low_, out_.tensor(in).name + ".to_" + std::string(dtype_name(low_)), op.stage);
      if (pol == Policy::Fp32) in = cast(in, DType::F32, out_.tensor(in).name + ".to_float32", op.stage);
    }
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      TensorId& in = op.inputs[i];
      if (!is_floating(out_.tensor(in).dtype)) continue;
      DType d = out_.tensor(in).dtype;
      // Batch norm's fp32 parameters do not widen its output (cudnn mixed-precision BN).
      bool param_of_norm = op.kind == OpKind::BatchNorm2d && i > 0;
      if (!param_of_norm && (!has_float || dtype_size(d) > dtype_size(out_dtype))) out_dtype = d;
      if (!param_of_norm) has_float = true;
    }
    std::vector<OutSpec> outs;
    for (TensorId o : src.outputs) {
      const Tensor& t = g_.tensor(o);
      DType d = t.dtype;
      if (is_floating(d)) {
        if (pol == Policy::Lower) d = low_;
        else if (pol == Policy::Fp32) d = DType::F32;
        else if (op.kind == OpKind::Cast) d = t.dtype;
        else if (has_float) d = out_dtype;
      }
      TensorId alias = t.alias_of == kNone ? kNone : map_[static_cast<size_t>(t.alias_of)];
      if (alias != kNone && op.kind != OpKind::Cast) d = out_.tensor(alias).dtype;
      outs.push_back({t.shape, d, alias, t.contiguous, t.channels_last});
    }
    int64_t moved = 0;
    emit(op, outs);
    Op& emitted = out_.ops.back();
    for (TensorId in : emitted.inputs) moved += out_.tensor(in).bytes();
    for (TensorId o : emitted.outputs) moved += out_.tensor(o).alias_of == kNone ? out_.tensor(o).bytes() : 0;
    if (!is_view_kind(emitted.kind)) emitted.bytes_moved = moved;
    for (size_t j = 0; j < src.outputs.size(); ++j) {
      map_[static_cast<size_t>(src.outputs[j])] = emitted.outputs[j];
      out_.tensors[static_cast<size_t>(emitted.outputs[j])].batch_axis = g_.tensor(src.outputs[j]).batch_axis;
    }
    op_map_[src.id] = emitted.id;
  }

  const Graph& g_;
  DType low_;
  Graph out_;
  std::vector<TensorId> map_;
  std::map<OpId, OpId> op_map_;
  std::map<TensorId, TensorId> weight_cast_;
};

}  // namespace

Graph apply_autocast(const Graph& g, DType low, bool grad_scaler) {
  HEADROOM_CHECK(low == DType::F16 || low == DType::BF16, "autocast dtype must be float16 or bfloat16");
  return Rewriter(g, low).run(grad_scaler);
}

}  // namespace headroom
