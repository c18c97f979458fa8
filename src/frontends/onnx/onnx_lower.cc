// ONNX op -> the PyTorch call recorded in the IR (PyTorch 1.13 training semantics):
//
//   Conv (2-D)                 conv2d
//   Gemm transB=1, MatMul(x, Transpose(W))       linear, W [out,in]
//   Gemm transB=0, MatMul(x, W)                  linear, W [in,out] (addmm's layout)
//   MatMul without a 2-D weight                  matmul
//   Einsum that is a batched matmul              permutes + matmul
//   BatchNormalization         batch_norm        LayerNormalization (last axis)  layer_norm
//   Relu                       relu (relu_)      Clip                            hardtanh
//   Sigmoid, Tanh              sigmoid, tanh     Gelu, the Erf decomposition     gelu
//   the tanh-GELU decomposition gelu(tanh)       Sigmoid(x) * x                  silu
//   HardSigmoid(x) * x         hardswish (Opaque keeping x)   Tanh(Softplus(x)) * x   mish
//                              (the same; onnx_patterns.h has every decomposition's form)
//   Sqrt, Reciprocal, Exp      rsqrt's rule (the result is saved)
//   Neg, c - x                 neg's rule (nothing saved)
//   Softmax, LogSoftmax        softmax, log_softmax
//   Add/Sub/Mul/Div            add/sub/mul/div (add_); *_scalar with a one-element constant
//   Pow (constant exponent)    pow_scalar        ReduceMean, ReduceSum           mean, sum
//   Concat                     cat               Split, Slice (step > 0)         slice views
//   Gather                     select (constant scalar index), embedding (2-D weight,
//                              integer indices), else an index copy (Opaque)
//   Reshape, Flatten           view (unflatten or squeeze/unsqueeze on strided tensors; copy +
//                              view where PyTorch's reshape copies)
//   Squeeze, Unsqueeze         view              Transpose                       permute
//   Expand                     expand            Cast, CastLike           to (alias if same)
//   Where                      where             Dropout                         dropout
//   MaxPool, AveragePool 2-D   max/avg_pool2d    GlobalAveragePool 2-D    adaptive_avg_pool2d
//   RoiAlign, MaxRoiPool       torchvision.ops.roi_align / roi_pool (keeps the rois only)
//   NonZero, NonMaxSuppression Opaque of the upper-bound shape onnx_detection.h gives them
//   Identity                   alias
//   RandomUniform(Like), RandomNormal(Like)      rand/randn(_like): a factory of the shape
//   Resize, Upsample 4-D (H, W) upsample_nearest2d / upsample_bilinear2d, the size folded
//   SoftmaxCrossEntropyLoss    cross_entropy (log_softmax, nll_loss): the training loss
//   NegativeLogLikelihoodLoss  nll_loss: the training loss
//   Shape, Size, Constant, ConstantOfShape, Range, and shape arithmetic on constants: folded
//   Opaque (fresh output, inputs saved): Erf alone, HardSigmoid, HardSwish, LeakyRelu, Elu, Selu,
//     Softplus, Log, Abs, Sin, Cos, PRelu, Min/Max, Mod, comparisons and logic, Pad, Tile,
//     ConvTranspose, other Conv ranks and pools, Instance/Group normalization, reductions other
//     than mean and sum, ArgMax/ArgMin, TopK, Gather variants, Scatter (data's shape), CumSum,
//     Trilu, OneHot, DepthToSpace, SpaceToDepth, negative-step Slice, other Einsums.
#include "frontends/onnx/onnx_lower.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "frontends/onnx/onnx_const.h"
#include "frontends/onnx/onnx_patterns.h"
#include "frontends/onnx_losses.h"
#include "frontends/zoo/losses.h"
#include "ir/builder.h"
#include "util/checked.h"
#include "util/error.h"

namespace headroom::onnx_import {
namespace {

using onnx::NodeProto;
using onnx::TensorProto;

bool default_domain(const NodeProto& n) { return is_default_domain(n.domain()); }

// Input slots that carry settings rather than data (shapes, axes, sizes): a float initializer
// read only there is a constant, never a parameter.
bool settings_slot(const std::string& op, int slot) {
  static const std::unordered_map<std::string, std::vector<int>> kSlots = {{"Reshape", {1}},
                                                                           {"Expand", {1}},
                                                                           {"Tile", {1}},
                                                                           {"Slice", {1, 2, 3, 4}},
                                                                           {"Split", {1}},
                                                                           {"Squeeze", {1}},
                                                                           {"Unsqueeze", {1}},
                                                                           {"Pad", {1, 2, 3}},
                                                                           {"Resize", {1, 2, 3}},
                                                                           {"Upsample", {1}},
                                                                           {"Clip", {1, 2}},
                                                                           {"Dropout", {1, 2}},
                                                                           {"ReduceMean", {1}},
                                                                           {"ReduceSum", {1}},
                                                                           {"ReduceMax", {1}},
                                                                           {"ReduceMin", {1}},
                                                                           {"ReduceProd", {1}},
                                                                           {"ReduceL1", {1}},
                                                                           {"ReduceL2", {1}},
                                                                           {"ReduceLogSum", {1}},
                                                                           {"ReduceLogSumExp", {1}},
                                                                           {"ReduceSumSquare", {1}},
                                                                           {"ConstantOfShape", {0}},
                                                                           {"Range", {0, 1, 2}},
                                                                           {"TopK", {1}},
                                                                           {"OneHot", {1, 2}},
                                                                           {"CumSum", {1}},
                                                                           {"Trilu", {1}},
                                                                           {"Shape", {0}},
                                                                           {"Size", {0}}};
  auto it = kSlots.find(op);
  return it != kSlots.end() &&
         std::find(it->second.begin(), it->second.end(), slot) != it->second.end();
}

// Slots autograd never differentiates (masks, indices): a float initializer read only there or in
// settings slots is a buffer.
bool non_differentiable_slot(const std::string& op, int slot) {
  if (settings_slot(op, slot)) return true;
  if (op == "Where") return slot == 0;
  if (op == "RoiAlign" || op == "MaxRoiPool") return slot >= 1;  // rois and batch indices
  if (op == "Gather" || op == "GatherElements" || op == "GatherND" || op == "ScatterND" ||
      op == "ScatterElements") {
    return slot == 1;
  }
  return false;
}

// What an ONNX tensor name stands for while lowering.
struct Value {
  TensorId tensor = kNone;                      // a tensor of the IR graph
  std::shared_ptr<const ConstTensor> constant;  // or a compile-time value
  std::string origin;                           // the initializer or node it comes from
  bool from_initializer = false;                // materializes as a buffer (else a factory op)
  TensorId transposed_of = kNone;  // Transpose([1,0]) of a 2-D parameter, emitted on first use
  std::string unavailable;         // an output headroom does not model, and why
};

struct NodeCtx {
  const NodeProto& node;
  int index;
  std::string name;        // the op's name in the IR
  std::vector<Value*> in;  // nullptr for an omitted optional input
  NodeAttrs attrs;
  bool check_shapes = true;  // compare outputs with shape inference
};

class Lowerer;
using Handler = void (Lowerer::*)(NodeCtx&);
const std::unordered_map<std::string, Handler>& handlers();

DType majority_float_dtype(const onnx::GraphProto& g, const Structure& st, const TypeTable& types) {
  std::map<int32_t, int> count;
  for (const TensorProto& t : g.initializer()) {
    if (is_float_elem(t.data_type())) ++count[t.data_type()];
  }
  if (count.empty()) {
    for (const std::string& in : st.inputs) {
      auto it = types.find(in);
      if (it != types.end() && is_float_elem(it->second.elem)) return dtype_of(it->second.elem, in);
    }
    return DType::F32;
  }
  auto best = std::max_element(count.begin(), count.end(),
                               [](auto& a, auto& b) { return a.second < b.second; });
  return dtype_of(best->first, "initializers");
}

class Lowerer {
 public:
  Lowerer(const onnx::ModelProto& model, const Structure& st, const DimBinding& dims,
          const TypeTable& types, const OnnxImportOptions& options, const std::string& name)
      : model_(model),
        g_(model.graph()),
        st_(st),
        dims_(dims),
        types_(types),
        opts_(options),
        b_(name, majority_float_dtype(model.graph(), st, types)) {}

  Graph run() {
    values_.reserve(static_cast<size_t>(g_.node_size()) * 2 +
                    static_cast<size_t>(g_.initializer_size()));
    check_supported();
    for (const auto& [sym, value] : dims_.values) b_.set_dim(sym, value);
    if (!dims_.batch_symbols.empty()) b_.set_dim("batch", dims_.values.at(dims_.batch_symbols[0]));
    create_inputs();
    classify_initializers();
    hold_constant_buffers();
    find_patterns();
    if (opts_.module_scopes) find_scopes();
    for (int i = 0; i < g_.node_size(); ++i) {
      open_scopes(i);
      lower(i);
      hold_scope_local(i);
      close_scopes(i);
    }
    std::vector<TensorId> outs;
    for (const onnx::ValueInfoProto& o : g_.output()) {
      Value& v = values_.at(o.name());
      if (!v.unavailable.empty())
        throw InputError("graph output '" + o.name() + "' is " + v.unavailable);
      TensorId t = materialize(v);
      b_.mark_output(t);
      outs.push_back(t);
    }
    write_notes();
    if (opts_.with_loss && opts_.loss_spec) {
      use_loss_spec(*opts_.loss_spec, outs);
    } else if (opts_.with_loss && !in_graph_loss_.empty()) {
      use_in_graph_loss();
    } else if (opts_.with_loss) {
      add_default_loss(outs);
    }
    return b_.finish();
  }

  // ---- handlers (one per ONNX op; see the table at the top of the file) ----------------------
  void op_identity(NodeCtx& c) { alias(c, 0, need(c, 0)); }
  void op_relu(NodeCtx& c) {
    TensorId x = tensor(c, 0);
    bool inplace = writable_in_place(x);
    set(c, 0, b_.relu(c.name, x, inplace), inplace);
  }
  void op_sigmoid(NodeCtx& c) { set(c, 0, b_.sigmoid(c.name, tensor(c, 0))); }
  void op_tanh(NodeCtx& c) { set(c, 0, b_.tanh(c.name, tensor(c, 0))); }
  void op_neg(NodeCtx& c) { set(c, 0, b_.neg(c.name, tensor(c, 0))); }
  // sqrt, reciprocal and exp keep their result for backward, as rsqrt does.
  void op_keeps_result(NodeCtx& c) { set(c, 0, b_.rsqrt(c.name, tensor(c, 0))); }
  void op_gelu(NodeCtx& c) {
    set(c, 0, b_.gelu(c.name, tensor(c, 0), c.attrs.s("approximate", "none") == "tanh"));
  }
  void op_clip(NodeCtx& c) {
    double lo = -INFINITY, hi = INFINITY;
    if (model_opset() < 11) {
      lo = c.attrs.f("min", lo);
      hi = c.attrs.f("max", hi);
    } else {
      if (input_present(c, 1)) lo = scalar_input(c, 1, "min");
      if (input_present(c, 2)) hi = scalar_input(c, 2, "max");
    }
    TensorId x = tensor(c, 0);
    set(c, 0, b_.hardtanh(c.name, x, lo, hi, false));
  }
  void op_softmax(NodeCtx& c) {
    int64_t axis = c.attrs.i("axis", model_opset() >= 13 ? -1 : 1);
    TensorId x = tensor(c, 0);
    bool log = c.node.op_type() == "LogSoftmax";
    set(c, 0, log ? b_.log_softmax(c.name, x, axis) : b_.softmax(c.name, x, axis));
  }

  void op_arith(NodeCtx& c) {
    const std::string& op = c.node.op_type();
    Value* a = &need(c, 0);
    Value* y = &need(c, 1);
    std::optional<double> sa = scalar_operand(*a, *y), sy = scalar_operand(*y, *a);
    if (sy) {
      TensorId x = materialize(*a);
      if (op == "Add") return set(c, 0, b_.add_scalar(c.name, x, *sy));
      if (op == "Sub") return set(c, 0, b_.add_scalar(c.name, x, -*sy));
      if (op == "Mul") return set(c, 0, b_.mul_scalar(c.name, x, *sy));
      return set(c, 0, b_.div_scalar(c.name, x, *sy));
    }
    if (sa) {
      TensorId x = materialize(*y);
      if (op == "Add") return set(c, 0, b_.add_scalar(c.name, x, *sa));
      if (op == "Mul") return set(c, 0, b_.mul_scalar(c.name, x, *sa));
      if (op == "Sub")
        return set(c, 0, b_.neg(c.name, x));  // s - x: rsub, one fresh output, nothing saved
      // s / x is x.reciprocal() * s in PyTorch.
      TensorId r = b_.rsqrt(c.name, x);
      return set(c, 0, *sa == 1.0 ? r : b_.mul_scalar(c.name + ".mul", r, *sa));
    }
    TensorId x = materialize(*a), z = materialize(*y);
    if (op == "Add") {
      std::vector<int64_t> out = broadcast(b_.shape(x), b_.shape(z), c.name);
      bool same_dtype = b_.tensor(x).dtype == b_.tensor(z).dtype;  // no promotion in place
      if (out == b_.shape(x) && x != z && same_dtype && writable_in_place(x))
        return set(c, 0, b_.add_(c.name, x, z), true);
      if (out == b_.shape(z) && x != z && same_dtype && writable_in_place(z))
        return set(c, 0, b_.add_(c.name, z, x), true);
      return set(c, 0, b_.add(c.name, x, z));
    }
    if (op == "Sub") return set(c, 0, b_.sub(c.name, x, z));
    if (op == "Mul") return set(c, 0, b_.mul(c.name, x, z));
    return set(c, 0, b_.div(c.name, x, z));
  }
  void op_pow(NodeCtx& c) {
    std::optional<double> s = scalar_operand(need(c, 1), need(c, 0));
    if (s) return set(c, 0, b_.pow_scalar(c.name, tensor(c, 0), *s));
    op_elementwise(c);
  }
  void op_where(NodeCtx& c) {
    TensorId cond = tensor(c, 0), x = tensor(c, 1), y = tensor(c, 2);
    set(c, 0, b_.where(c.name, cond, x, y));
  }
  void op_cast(NodeCtx& c) {
    TensorId x = tensor(c, 0);
    int32_t to =
        c.node.op_type() == "CastLike" ? elem_of(c, 1) : static_cast<int32_t>(c.attrs.i("to", 0));
    DType dt = dtype_of(to, "the Cast target");
    if (dt == b_.tensor(x).dtype) return alias(c, 0, *c.in[0]);  // .to(same dtype) returns self
    set(c, 0, b_.cast(c.name, x, dt));
  }

  void op_matmul(NodeCtx& c) {
    Value* a = &need(c, 0);
    Value* w = &need(c, 1);
    TensorId x = materialize(*a);
    if (b_.shape(x).empty()) throw InputError("MatMul of a 0-d tensor");
    TensorId bias = kNone;
    if (fusions_[static_cast<size_t>(c.index)].kind == Fusion::Kind::LinearBias) {
      bias = materialize(values_.at(fusions_[static_cast<size_t>(c.index)].bias));
    }
    if (w->transposed_of != kNone) {
      return set(c, 0, b_.linear_with(c.name, x, w->transposed_of, bias));
    }
    TensorId y = materialize(*w);
    if (is_matrix_parameter(y)) return set(c, 0, b_.linear_in_out(c.name, x, y, bias));
    HEADROOM_CHECK(bias == kNone, "a bias fused into a MatMul without a weight");
    set(c, 0, matmul(c.name, x, y, c));
  }
  void op_gemm(NodeCtx& c) {
    TensorId a = tensor(c, 0);
    if (b_.shape(a).size() != 2)
      throw InputError("Gemm input A must be 2-D, got " + shape_text(b_.shape(a)));
    if (c.attrs.i("transA", 0) != 0) a = b_.transpose(c.name + ".A_t", a, 0, 1);
    bool trans_b = c.attrs.i("transB", 0) != 0;
    Value& bv = need(c, 1);
    TensorId w = kNone;
    bool out_in = trans_b;  // weight stored [out, in]
    if (bv.transposed_of != kNone) {
      w = bv.transposed_of;
      out_in = !trans_b;
    } else {
      w = materialize(bv);
    }
    TensorId bias = kNone;
    bool add_c = input_present(c, 2);
    if (add_c && is_matrix_parameter(w)) {
      TensorId ct = tensor(c, 2);
      int64_t n = b_.shape(w)[out_in ? 0 : 1];
      const Tensor& cb = b_.tensor(ct);
      if (cb.role == TensorRole::Parameter && cb.numel() == n && !cb.shape.empty() &&
          cb.shape.back() == n) {
        bias = ct;
        add_c = false;
      }
    }
    TensorId out;
    if (is_matrix_parameter(w)) {
      out = out_in ? b_.linear_with(c.name, a, w, bias) : b_.linear_in_out(c.name, a, w, bias);
    } else {
      TensorId wt = trans_b ? b_.transpose(c.name + ".B_t", w, 0, 1) : w;
      out = matmul(c.name, a, wt, c);
    }
    if (add_c) out = b_.add(c.name + ".add", out, tensor(c, 2));
    set(c, 0, out);
  }
  void op_einsum(NodeCtx& c) {
    std::string eq = c.attrs.s("equation", "");
    std::optional<TensorId> r;
    if (c.in.size() == 2 && c.in[0] && c.in[1]) r = einsum_matmul(c, eq);
    if (r) return set(c, 0, *r);
    op_opaque_inferred(c);
  }

  void op_conv(NodeCtx& c) {
    TensorId x = tensor(c, 0), w = tensor(c, 1);
    if (b_.shape(x).size() != 4 || b_.shape(w).size() != 4) return op_opaque_inferred(c);
    Window2d win = window(c, b_.shape(x), {b_.shape(w)[2], b_.shape(w)[3]}, true);
    TensorId bias = input_present(c, 2) ? tensor(c, 2) : kNone;
    set(c, 0, b_.conv2d_with(c.name, x, w, bias, win, c.attrs.i("group", 1)));
  }
  void op_batch_norm(NodeCtx& c) {
    TensorId x = tensor(c, 0);
    TensorId w = tensor(c, 1), bias = tensor(c, 2), mean = tensor(c, 3), var = tensor(c, 4);
    int outputs = 0;
    for (const std::string& o : c.node.output()) outputs += !o.empty();
    bool training = model_opset() >= 14 ? c.attrs.i("training_mode", 0) != 0 : outputs > 1;
    (training ? bn_training_ : bn_eval_)++;
    set(c, 0, b_.batch_norm_with(c.name, x, w, bias, mean, var, training));
    // Training exports also return the updated running statistics (PyTorch updates the buffers in
    // place) and, before opset 14, the batch statistics.
    if (c.node.output_size() > 1) alias(c, 1, *c.in[3]);
    if (c.node.output_size() > 2) alias(c, 2, *c.in[4]);
    for (int k = 3; k < c.node.output_size(); ++k)
      unavailable(c, k, "a batch statistic of BatchNormalization");
  }
  void op_layer_norm(NodeCtx& c) {
    TensorId x = tensor(c, 0), w = tensor(c, 1);
    TensorId bias = input_present(c, 2) ? tensor(c, 2) : kNone;
    int64_t rank = static_cast<int64_t>(b_.shape(x).size());
    int64_t axis = c.attrs.i("axis", -1);
    if (rank == 0 || (axis != -1 && axis != rank - 1)) return op_opaque_inferred(c);
    set(c, 0, b_.layer_norm_with(c.name, x, w, bias));
    for (int k = 1; k < c.node.output_size(); ++k)
      unavailable(c, k, "a statistic of LayerNormalization");
  }
  void op_max_pool(NodeCtx& c) {
    TensorId x = tensor(c, 0);
    std::optional<std::vector<int64_t>> k = c.attrs.ints("kernel_shape");
    if (b_.shape(x).size() != 4 || !k || k->size() != 2) return op_opaque_inferred(c);
    Window2d w = window(c, b_.shape(x), *k, false);
    c.check_shapes = !w.ceil_mode;
    set(c, 0, b_.max_pool2d_with(c.name, x, w));
    for (int i = 1; i < c.node.output_size(); ++i) unavailable(c, i, "the indices of MaxPool");
  }
  // RoiAlign (opset 10+: features, rois [K,4], batch indices [K]) and MaxRoiPool (rois [K,5]
  // carrying the batch index): torchvision.ops.roi_align / roi_pool, a new [K,C,oh,ow] output.
  void op_roi_align(NodeCtx& c) {
    TensorId x = tensor(c, 0);
    TensorId rois = tensor(c, 1);
    int64_t oh = 1, ow = 1;
    TensorId batch_indices = kNone;
    if (c.node.op_type() == "MaxRoiPool") {
      std::optional<std::vector<int64_t>> pooled = c.attrs.ints("pooled_shape");
      if (!pooled || pooled->size() != 2) throw InputError("MaxRoiPool needs a pooled_shape of 2 values");
      oh = (*pooled)[0];
      ow = (*pooled)[1];
    } else {
      oh = c.attrs.i("output_height", 1);
      ow = c.attrs.i("output_width", 1);
      if (input_present(c, 2)) batch_indices = tensor(c, 2);
    }
    set(c, 0, b_.roi_align(c.name, x, rois, batch_indices, oh, ow));
  }
  void op_avg_pool(NodeCtx& c) {
    TensorId x = tensor(c, 0);
    std::optional<std::vector<int64_t>> k = c.attrs.ints("kernel_shape");
    if (b_.shape(x).size() != 4 || !k || k->size() != 2) return op_opaque_inferred(c);
    Window2d w = window(c, b_.shape(x), *k, false);
    c.check_shapes = !w.ceil_mode;
    set(c, 0, b_.avg_pool2d_with(c.name, x, w));
  }
  void op_global_avg_pool(NodeCtx& c) {
    TensorId x = tensor(c, 0);
    if (b_.shape(x).size() != 4) return op_opaque_inferred(c);
    set(c, 0, b_.adaptive_avg_pool2d(c.name, x, 1, 1));
  }
  void op_dropout(NodeCtx& c) {
    double p = 0.5;
    if (model_opset() < 12)
      p = c.attrs.f("ratio", 0.5);
    else if (input_present(c, 1))
      p = scalar_input(c, 1, "ratio");
    if (!(p >= 0.0 && p <= 1.0))
      throw InputError("dropout ratio " + std::to_string(p) + " is not in [0, 1]");
    set(c, 0, b_.dropout(c.name, tensor(c, 0), p * opts_.dropout_scale));
    for (int k = 1; k < c.node.output_size(); ++k) unavailable(c, k, "the mask of Dropout");
  }

  void op_reduce(NodeCtx& c) {
    const std::string& op = c.node.op_type();
    TensorId x = tensor(c, 0);
    std::optional<std::vector<int64_t>> axes = c.attrs.ints("axes");
    if (!axes && input_present(c, 1)) axes = constant(c, 1, "axes").int_values(c.name + " axes");
    bool keep = c.attrs.i("keepdims", 1) != 0;
    if ((!axes || axes->empty()) && c.attrs.i("noop_with_empty_axes", 0) != 0)
      return alias(c, 0, *c.in[0]);
    std::vector<int64_t> dims;
    if (axes && !axes->empty())
      dims = *axes;
    else
      for (size_t d = 0; d < b_.shape(x).size(); ++d) dims.push_back(static_cast<int64_t>(d));
    if (op == "ReduceMean") return set(c, 0, b_.mean_dims(c.name, x, dims, keep));
    if (op == "ReduceSum") return set(c, 0, b_.sum_dims(c.name, x, dims, keep));
    op_opaque_inferred(c);
  }

  void op_concat(NodeCtx& c) {
    std::vector<TensorId> xs;
    for (size_t i = 0; i < c.in.size(); ++i) xs.push_back(tensor(c, i));
    int64_t axis = c.attrs.i("axis", 0), total = 0;
    for (TensorId x : xs) {  // the concatenated size must fit before the builder adds it up
      int64_t r = static_cast<int64_t>(b_.shape(x).size());
      if (axis >= -r && axis < r)
        total = checked_add(total, b_.shape(x)[static_cast<size_t>(axis < 0 ? axis + r : axis)],
                            c.name);
    }
    set(c, 0, b_.cat(c.name, xs, c.attrs.i("axis", 0)));
  }
  void op_split(NodeCtx& c) {
    TensorId x = tensor(c, 0);
    const std::vector<int64_t> s = b_.shape(x);  // a copy: slices add tensors
    int64_t r = static_cast<int64_t>(s.size());
    int64_t axis = c.attrs.i("axis", 0);
    if (axis < -r || axis >= r)
      throw InputError("Split axis " + std::to_string(axis) + " out of range for rank " +
                       std::to_string(r));
    if (axis < 0) axis += r;
    const int64_t n = s[static_cast<size_t>(axis)];
    const int64_t outs = c.node.output_size();
    std::vector<int64_t> sizes;
    if (auto attr = c.attrs.ints("split"))
      sizes = *attr;
    else if (input_present(c, 1))
      sizes = constant(c, 1, "split").int_values(c.name + " split");
    else {
      int64_t parts = c.attrs.i("num_outputs", outs);
      if (parts <= 0) throw InputError("Split into " + std::to_string(parts) + " parts");
      int64_t piece = n / parts + (n % parts != 0 ? 1 : 0);
      for (int64_t start = 0, k = 0; k < parts; ++k, start += piece)
        sizes.push_back(std::max<int64_t>(0, std::min(piece, n - start)));
    }
    if (static_cast<int64_t>(sizes.size()) != outs) {
      throw InputError("Split into " + std::to_string(sizes.size()) + " sizes but " +
                       std::to_string(outs) + " outputs");
    }
    int64_t start = 0;
    for (int64_t k = 0; k < outs; ++k) {
      int64_t size = sizes[static_cast<size_t>(k)];
      if (size < 0) throw InputError("Split size " + std::to_string(size) + " is negative");
      int64_t end = checked_add(start, size, c.name);
      if (end > n) throw InputError("Split sizes add up to more than " + std::to_string(n));
      if (!c.node.output(static_cast<int>(k)).empty()) {
        set(c, static_cast<int>(k),
            b_.slice(c.name + "." + std::to_string(k), x, axis, start, end));
      }
      start = end;
    }
    if (start != n)
      throw InputError("Split sizes add up to " + std::to_string(start) + ", not " +
                       std::to_string(n));
  }
  void op_slice(NodeCtx& c) {
    TensorId x = tensor(c, 0);
    std::vector<int64_t> starts, ends;
    std::optional<std::vector<int64_t>> axes, steps;
    if (model_opset() < 10) {
      starts = c.attrs.ints("starts").value_or(std::vector<int64_t>{});
      ends = c.attrs.ints("ends").value_or(std::vector<int64_t>{});
      axes = c.attrs.ints("axes");
    } else if (value_given_slice(c)) {
      // Starts/ends computed from tensor values (torchvision's mask pasting keeps the part of
      // each mask inside the image): the output shape bounded from their ranges
      // (onnx_detection.h), a view of the input's leading part, as a slice is a view wherever
      // it starts.
      const std::vector<int64_t> out = inferred_shape(c, c.node.output(0));
      const std::vector<int64_t> in = b_.shape(x);
      if (out.size() != in.size())
        throw InputError("Slice output rank " + std::to_string(out.size()) + " differs from its input's");
      TensorId cur = x;
      for (size_t a = 0; a < in.size(); ++a) {
        if (out[a] == in[a]) continue;
        if (out[a] > in[a])
          throw InputError("Slice output " + shape_text(out) + " exceeds its input " + shape_text(in));
        cur = b_.slice(cur == x ? c.name : c.name + "." + std::to_string(a), cur,
                       static_cast<int64_t>(a), 0, out[a], 1);
      }
      if (cur == x) return alias(c, 0, *c.in[0]);
      set(c, 0, cur);
      return;
    } else {
      starts = constant(c, 1, "starts").int_values(c.name + " starts");
      ends = constant(c, 2, "ends").int_values(c.name + " ends");
      if (input_present(c, 3)) axes = constant(c, 3, "axes").int_values(c.name + " axes");
      if (input_present(c, 4)) steps = constant(c, 4, "steps").int_values(c.name + " steps");
    }
    if (starts.size() != ends.size() || (axes && axes->size() != starts.size()) ||
        (steps && steps->size() != starts.size())) {
      throw InputError("Slice starts, ends, axes and steps differ in length");
    }
    if (steps && std::any_of(steps->begin(), steps->end(), [](int64_t s) { return s < 0; })) {
      return op_opaque_inferred(c);  // torch.flip and friends copy
    }
    const int64_t r = static_cast<int64_t>(b_.shape(x).size());
    TensorId cur = x;
    for (size_t i = 0; i < starts.size(); ++i) {
      int64_t axis = axes ? (*axes)[i] : static_cast<int64_t>(i);
      if (axis < -r || axis >= r)
        throw InputError("Slice axis " + std::to_string(axis) + " out of range for rank " +
                         std::to_string(r));
      int64_t n = b_.shape(cur)[static_cast<size_t>(axis < 0 ? axis + r : axis)];
      // A step past the dimension takes one element, as a step of the dimension's size does.
      int64_t step = std::min(steps ? (*steps)[i] : 1, std::max<int64_t>(n, 1));
      int64_t s = starts[i] < -n ? 0 : starts[i];
      int64_t e = ends[i] > n ? n : ends[i] < -n ? 0 : ends[i];
      cur = b_.slice(i == 0 ? c.name : c.name + "." + std::to_string(i), cur, axis, s, e, step);
    }
    if (cur == x) return alias(c, 0, *c.in[0]);
    set(c, 0, cur);
  }
  void op_gather(NodeCtx& c) {
    Value& data = need(c, 0);
    Value& idx = need(c, 1);
    int64_t axis = c.attrs.i("axis", 0);
    TensorId d = materialize(data);
    const std::vector<int64_t> s = b_.shape(d);  // a copy: materialize may add tensors
    const int64_t r = static_cast<int64_t>(s.size());
    if (axis < -r || axis >= r)
      throw InputError("Gather axis " + std::to_string(axis) + " out of range for rank " +
                       std::to_string(r));
    if (axis < 0) axis += r;
    if (idx.constant && idx.constant->known && idx.constant->shape.empty()) {
      int64_t i = idx.constant->int_values(c.name + " index")[0];
      int64_t n = s[static_cast<size_t>(axis)];
      if (i < -n || i >= n)
        throw InputError("Gather index " + std::to_string(i) + " out of range for size " +
                         std::to_string(n));
      return set(c, 0, b_.select(c.name, d, axis, i < 0 ? i + n : i));
    }
    TensorId ids = materialize(idx);
    DType it = b_.tensor(ids).dtype;
    if (it != DType::I64 && it != DType::I32)
      throw InputError("Gather indices must be integers, got " + std::string(dtype_name(it)));
    if (axis == 0 && is_matrix_parameter(d)) return set(c, 0, b_.embedding_with(c.name, ids, d));
    std::vector<int64_t> os(s.begin(), s.begin() + axis);
    os.insert(os.end(), b_.shape(ids).begin(), b_.shape(ids).end());
    os.insert(os.end(), s.begin() + axis + 1, s.end());
    set(c, 0, b_.opaque(c.name, {d, ids}, {{os, b_.tensor(d).dtype}})[0]);
  }

  void op_reshape(NodeCtx& c) {
    TensorId x = tensor(c, 0);
    std::vector<int64_t> target;
    if (c.node.op_type() == "Flatten") {
      const std::vector<int64_t> s = b_.shape(x);
      int64_t r = static_cast<int64_t>(s.size()), axis = c.attrs.i("axis", 1);
      if (axis < -r || axis > r)
        throw InputError("Flatten axis " + std::to_string(axis) + " out of range for rank " +
                         std::to_string(r));
      if (axis < 0) axis += r;
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < r; ++d) {
        if (d < axis)
          outer = checked_mul(outer, s[static_cast<size_t>(d)], c.name);
        else
          inner = checked_mul(inner, s[static_cast<size_t>(d)], c.name);
      }
      target = {outer, inner};
    } else {
      std::vector<int64_t> raw = model_opset() < 5
                                     ? c.attrs.ints("shape").value_or(std::vector<int64_t>{})
                                     : constant(c, 1, "shape").int_values(c.name + " shape");
      target = reshape_target(b_.shape(x), raw, c.attrs.i("allowzero", 0) != 0, c.name);
    }
    set(c, 0, reshape(c.name, x, target));
  }
  void op_squeeze(NodeCtx& c) {
    TensorId x = tensor(c, 0);
    const std::vector<int64_t> s = b_.shape(x);
    const int64_t r = static_cast<int64_t>(s.size());
    std::vector<int64_t> axes;
    if (auto a = c.attrs.ints("axes"))
      axes = *a;
    else if (input_present(c, 1))
      axes = constant(c, 1, "axes").int_values(c.name + " axes");
    bool unsqueeze = c.node.op_type() == "Unsqueeze";
    if (!unsqueeze && axes.empty()) {
      for (int64_t d = 0; d < r; ++d) {
        if (s[static_cast<size_t>(d)] == 1) axes.push_back(d);
      }
    }
    const int64_t out_rank =
        unsqueeze ? checked_add(r, static_cast<int64_t>(axes.size()), c.name) : r;
    std::set<int64_t> norm;
    for (int64_t a : axes) {
      if (a < -out_rank || a >= out_rank)
        throw InputError(c.node.op_type() + " axis " + std::to_string(a) + " out of range");
      if (!norm.insert(a < 0 ? a + out_rank : a).second)
        throw InputError(c.node.op_type() + " axis " + std::to_string(a) + " repeated");
    }
    TensorId cur = x;
    int k = 0;
    auto nm = [&]() { return k++ == 0 ? c.name : c.name + "." + std::to_string(k - 1); };
    if (unsqueeze) {
      for (int64_t a : norm)
        cur = b_.unsqueeze(nm(), cur, a);  // ascending: positions in the output
    } else {
      for (auto it = norm.rbegin(); it != norm.rend(); ++it) cur = b_.squeeze(nm(), cur, *it);
    }
    if (cur == x) return alias(c, 0, *c.in[0]);
    set(c, 0, cur);
  }
  void op_transpose(NodeCtx& c) {
    Value& in = need(c, 0);
    std::optional<std::vector<int64_t>> perm = c.attrs.ints("perm");
    if (in.tensor != kNone && is_matrix_parameter(in.tensor) &&
        (!perm || *perm == std::vector<int64_t>{1, 0})) {
      Value v;
      v.transposed_of = in.tensor;
      v.origin = c.name;
      values_[c.node.output(0)] =
          v;  // emitted as a permute only if something other than a linear reads it
      return;
    }
    TensorId x = materialize(in);
    const int64_t r = static_cast<int64_t>(b_.shape(x).size());
    std::vector<int64_t> p;
    if (perm)
      p = *perm;
    else
      for (int64_t d = r; d-- > 0;) p.push_back(d);
    if (static_cast<int64_t>(p.size()) != r)
      throw InputError("Transpose perm " + shape_text(p) + " for rank " + std::to_string(r));
    std::vector<bool> seen(static_cast<size_t>(r), false);
    for (int64_t& d : p) {
      if (d < -r || d >= r)
        throw InputError("Transpose perm " + shape_text(p) + " is not a permutation");
      if (d < 0) d += r;
      if (seen[static_cast<size_t>(d)])
        throw InputError("Transpose perm " + shape_text(p) + " is not a permutation");
      seen[static_cast<size_t>(d)] = true;
    }
    set(c, 0, b_.permute(c.name, x, p));
  }
  void op_expand(NodeCtx& c) {
    TensorId x = tensor(c, 0);
    std::vector<int64_t> shape = constant(c, 1, "shape").int_values(c.name + " shape");
    for (int64_t d : shape) {
      if (d < 0) throw InputError("Expand to a negative size " + shape_text(shape));
    }
    set(c, 0, b_.expand(c.name, x, shape));
  }
  void op_tile(NodeCtx& c) {
    TensorId x = tensor(c, 0);
    std::vector<int64_t> reps = constant(c, 1, "repeats").int_values(c.name + " repeats");
    std::vector<int64_t> os = b_.shape(x);
    if (reps.size() != os.size())
      throw InputError("Tile repeats " + shape_text(reps) + " for rank " +
                       std::to_string(os.size()));
    for (size_t d = 0; d < os.size(); ++d) {
      if (reps[d] < 0) throw InputError("Tile repeats " + shape_text(reps) + " are negative");
      os[d] = checked_mul(os[d], reps[d], c.name);
    }
    set(c, 0, b_.opaque(c.name, {x}, {{os, b_.tensor(x).dtype}})[0]);
  }
  void op_pad(NodeCtx& c) {
    TensorId x = tensor(c, 0);
    std::vector<int64_t> pads = model_opset() < 11
                                    ? c.attrs.ints("pads").value_or(std::vector<int64_t>{})
                                    : constant(c, 1, "pads").int_values(c.name + " pads");
    std::vector<int64_t> os = b_.shape(x);
    const int64_t r = static_cast<int64_t>(os.size());
    std::vector<int64_t> axes;
    if (input_present(c, 3))
      axes = constant(c, 3, "axes").int_values(c.name + " axes");
    else
      for (int64_t d = 0; d < r; ++d) axes.push_back(d);
    if (pads.size() != 2 * axes.size())
      throw InputError("Pad has " + std::to_string(pads.size()) + " pads for " +
                       std::to_string(axes.size()) + " axes");
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t a = axes[i];
      if (a < -r || a >= r) throw InputError("Pad axis " + std::to_string(a) + " out of range");
      size_t d = static_cast<size_t>(a < 0 ? a + r : a);
      os[d] = checked_add(os[d], checked_add(pads[i], pads[i + axes.size()], c.name), c.name);
      if (os[d] < 0) throw InputError("Pad makes dimension " + std::to_string(d) + " negative");
    }
    set(c, 0, b_.opaque(c.name, {x}, {{os, b_.tensor(x).dtype}})[0]);
  }

  // A NonMaxSuppression read only through its box-index column (onnx_patterns.h, "NMS
  // indices"): torchvision.ops.nms's [n] int64 indices ([n, 1] for a Gather index [2]), n the
  // rows of the bounded [n, 3] output.
  void op_nms_indices(NodeCtx& c, const Fusion& f) {
    std::vector<int64_t> rows = inferred_shape(c, c.node.output(0));
    if (rows.size() != 2) throw InputError("NonMaxSuppression output " + shape_text(rows) + " is not [n, 3]");
    std::vector<int64_t> keep = {rows[0]};
    if (!f.pads.empty()) keep.push_back(1);
    emit_opaque(c, runtime_inputs(c), {{keep, DType::I64}});
  }

  // Ops without a kind of their own: an Opaque op over the runtime inputs with the outputs shape
  // inference gives (InputError when it gives none).
  void op_opaque_inferred(NodeCtx& c) {
    std::vector<TensorId> ins = runtime_inputs(c);
    std::vector<GraphBuilder::OpaqueOutput> outs;
    for (int k = 0; k < c.node.output_size(); ++k) {
      const std::string& o = c.node.output(k);
      if (o.empty()) continue;
      outs.push_back({inferred_shape(c, o), dtype_of(inferred_elem(c, o), "output '" + o + "'")});
    }
    emit_opaque(c, ins, outs);
  }
  // Elementwise ops without a kind: the broadcast of the inputs (bool for comparisons and logic).
  void op_elementwise(NodeCtx& c) {
    std::vector<TensorId> ins = runtime_inputs(c);
    if (ins.empty()) throw InputError(c.node.op_type() + " without inputs");
    std::vector<int64_t> shape = b_.shape(ins[0]);
    for (size_t i = 1; i < ins.size(); ++i) shape = broadcast(shape, b_.shape(ins[i]), c.name);
    static const std::unordered_set<std::string> kBool = {
        "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And",
        "Or",    "Xor",  "Not",     "IsNaN",       "IsInf"};
    DType dt = kBool.count(c.node.op_type()) ? DType::Bool : b_.tensor(ins[0]).dtype;
    emit_opaque(c, ins, {{shape, dt}});
  }
  // RandomUniformLike / RandomNormalLike: torch.rand_like / randn_like, and torch.rand(shape),
  // which torch.onnx spells RandomUniformLike(ConstantOfShape(shape)). Eager allocates the random
  // tensor and reads nothing of the input but its shape and dtype: a factory of that shape (the
  // `dtype` attribute, else the input's), the input never materialized nor kept for it.
  void op_random_like(NodeCtx& c) {
    Value& v = need(c, 0);
    std::vector<int64_t> shape;
    DType dt;
    if (v.constant) {
      shape = v.constant->shape;
      dt = dtype_of(v.constant->elem, c.name + " input");
    } else {
      TensorId x = materialize(v);
      shape = b_.shape(x);
      dt = b_.tensor(x).dtype;
    }
    if (c.attrs.has("dtype"))
      dt = dtype_of(static_cast<int32_t>(c.attrs.i("dtype", 0)), c.name + " dtype");
    set(c, 0, b_.factory(c.name, shape, dt));
  }
  // RandomUniform / RandomNormal: torch.rand / randn of the `shape` attribute (float unless
  // `dtype` says otherwise).
  void op_random(NodeCtx& c) {
    std::optional<std::vector<int64_t>> shape = c.attrs.ints("shape");
    if (!shape) throw InputError(c.node.op_type() + " without a shape attribute");
    for (int64_t d : *shape) {
      if (d < 0)
        throw InputError(c.node.op_type() + " with the negative shape " + shape_text(*shape));
    }
    set(c, 0,
        b_.factory(c.name, *shape,
                   dtype_of(static_cast<int32_t>(c.attrs.i("dtype", TensorProto::FLOAT)),
                            c.name + " dtype")));
  }
  // Resize (opsets 10+) and Upsample: F.interpolate. The output shape comes from the `sizes` or
  // `scales` input once folded with the bound batch and --dim values (torchvision's segmentation
  // heads compute `sizes` as Shape(input)[2:] through Slice/Concat/Cast, which ONNX shape
  // inference leaves symbolic); shape inference is the fallback. A 4-D nearest or (bi)linear
  // resize of H and W alone is F.interpolate's upsample_nearest2d / upsample_bilinear2d, whose
  // backward keeps no tensor (only the sizes); anything else stays Opaque.
  void op_resize(NodeCtx& c) {
    TensorId x = tensor(c, 0);
    const std::vector<int64_t>& in = b_.shape(x);
    std::optional<std::vector<int64_t>> out = resize_shape(c, in);
    if (!out) out = inferred_shape(c, c.node.output(0));
    if (out->size() != in.size())
      throw InputError("Resize to " + shape_text(*out) + " changes the rank of " + shape_text(in));
    const std::string mode = c.attrs.s("mode", "nearest");
    if (in.size() == 4 && (*out)[0] == in[0] && (*out)[1] == in[1] &&
        (mode == "nearest" || mode == "linear")) {
      return set(c, 0, b_.upsample2d(c.name, x, (*out)[2], (*out)[3], mode == "linear"));
    }
    emit_opaque(c, {x}, {{*out, b_.tensor(x).dtype}});
  }
  // Resize's output shape from a compile-time `sizes` (taken as given) or `scales` (floor of
  // input x scale, as the ONNX operator defines it); nothing when neither is known or an `axes`
  // attribute (opset 18) names a subset.
  std::optional<std::vector<int64_t>> resize_shape(NodeCtx& c, const std::vector<int64_t>& in) {
    if (c.attrs.has("axes")) return std::nullopt;
    const bool upsample = c.node.op_type() == "Upsample";
    const size_t scales_slot = upsample || model_opset() < 11 ? 1 : 2, sizes_slot = 3;
    auto known = [&](size_t i) {
      return input_present(c, i) && c.in[i]->constant && c.in[i]->constant->known &&
             c.in[i]->constant->size() > 0;
    };
    if (!upsample && model_opset() >= 11 && known(sizes_slot)) {
      std::vector<int64_t> s = c.in[sizes_slot]->constant->int_values(c.name + " sizes");
      for (int64_t d : s) {
        if (d < 0) throw InputError("Resize to the negative size " + shape_text(s));
      }
      return s;
    }
    std::optional<std::vector<double>> scales;
    if (known(scales_slot)) {
      const ConstTensor& t = *c.in[scales_slot]->constant;
      scales.emplace();
      for (size_t k = 0; k < t.size(); ++k) scales->push_back(t.as_double(k));
    } else if (auto a = c.attrs.floats("scales")) {
      scales = std::vector<double>(a->begin(), a->end());  // Upsample before opset 9
    }
    if (!scales) return std::nullopt;
    if (scales->size() != in.size())
      throw InputError("Resize scales " + std::to_string(scales->size()) + " values for rank " +
                       std::to_string(in.size()));
    std::vector<int64_t> out;
    for (size_t d = 0; d < in.size(); ++d) {
      double v = std::floor(static_cast<double>(in[d]) * (*scales)[d]);
      if (!((*scales)[d] > 0) || !std::isfinite(v) || v > 9.0e18)
        throw InputError("Resize scale " + std::to_string((*scales)[d]) + " is not usable");
      out.push_back(static_cast<int64_t>(v));
    }
    return out;
  }
  // ScatterND / ScatterElements: a copy of `data` with updates written in, so of data's shape and
  // type whether or not shape inference resolved it (Swin's shifted-window mask is scattered into
  // a ConstantOfShape whose shape comes from folded Shape arithmetic).
  // A link of an in-place merge (onnx_patterns.h) writes into data's storage, as eager's
  // index_put_ does, when data is an activation (a fresh fill or the previous link).
  void op_scatter(NodeCtx& c) {
    TensorId data = tensor(c, 0);
    OpAttrs attrs;
    attrs.inplace = fusions_[static_cast<size_t>(c.index)].kind == Fusion::Kind::InPlaceMerge &&
                    b_.tensor(data).role == TensorRole::Activation;
    std::vector<TensorId> ins = runtime_inputs(c);
    if (attrs.inplace) {
      // The written tensor comes first, even where it is a folded fill that runtime_inputs
      // leaves out as a scalar argument (a ConstantOfShape is held as its one fill value).
      std::erase(ins, data);
      ins.insert(ins.begin(), data);
      ++in_place_merges_;
    }
    emit_opaque(c, ins, {{b_.shape(data), b_.tensor(data).dtype}}, attrs);
  }
  // SoftmaxCrossEntropyLoss: F.cross_entropy (torch 1.13 also writes nll_loss(log_softmax(x, 1))
  // this way) computed inside the graph, [N, C] or [N, C, d1, ...] scores against [N] or
  // [N, d1, ...] labels, mean or sum, no class weights: log_softmax then nll_loss, as eager runs
  // it. In training the graph's loss is this output: it opens the loss stage, and no loss is
  // attached after the graph (in_graph_loss_).
  void op_softmax_cross_entropy(NodeCtx& c) {
    check_in_graph_loss(c);
    if (opts_.with_loss) b_.begin_loss();
    TensorId loss = b_.cross_entropy(c.name, tensor(c, 0), tensor(c, 1));
    if (opts_.with_loss) in_graph_loss_.push_back(loss);
    set(c, 0, loss);
    for (int k = 1; k < c.node.output_size(); ++k)
      unavailable(c, k, "the log-probabilities of SoftmaxCrossEntropyLoss");
  }
  // NegativeLogLikelihoodLoss: F.nll_loss of log-probabilities (the export of
  // nll_loss(log_softmax(x, 1), y) at opsets that keep the two apart), shapes as above; the
  // LogSoftmax before it is the model's log_softmax. Like SoftmaxCrossEntropyLoss, the graph's loss.
  void op_nll_loss(NodeCtx& c) {
    check_in_graph_loss(c);
    if (opts_.with_loss) b_.begin_loss();
    TensorId loss = b_.nll_loss(c.name, tensor(c, 0), tensor(c, 1));
    if (opts_.with_loss) in_graph_loss_.push_back(loss);
    set(c, 0, loss);
  }
  // What both in-graph losses refuse: class weights (a weighted mean, not modelled) and
  // reduction none (a per-element loss tensor).
  void check_in_graph_loss(NodeCtx& c) {
    const std::string& op = c.node.op_type();
    const std::string reduction = c.attrs.s("reduction", "mean");
    if (input_present(c, 2)) throw InputError(op + " with class weights is not modelled");
    if (reduction != "mean" && reduction != "sum")
      throw InputError(op + " with reduction '" + reduction + "' is not modelled (mean or sum)");
    if (b_.shape(tensor(c, 0)).size() < 2)
      throw InputError(op + " on scores " + shape_text(b_.shape(tensor(c, 0))) +
                       " is not modelled ([N, C] or [N, C, d1, ...])");
  }
  // Shape-computation ops reach here only when an input is not a compile-time constant.
  // A Slice (opset 10+) whose starts, ends, axes or steps are runtime values.
  bool value_given_slice(NodeCtx& c) const {
    for (size_t i = 1; i <= 4; ++i) {
      if (input_present(c, i) && !c.in[i]->constant) return true;
    }
    return false;
  }
  void op_compile_time(NodeCtx& c) {
    if (c.node.op_type() == "ConstantOfShape") {
      // A shape computed from tensor values (torch.zeros(y_0, w) in torchvision's mask
      // pasting), bounded from their ranges (onnx_detection.h): torch.zeros of the bound shape.
      auto it = types_.find(c.node.output(0));
      if (it != types_.end() && it->second.static_shape() && it->second.elem != 0) {
        set(c, 0, b_.factory(c.name, it->second.dims,
                             dtype_of(it->second.elem, "output '" + c.node.output(0) + "'")));
        return;
      }
    }
    throw InputError(c.node.op_type() +
                     " needs compile-time inputs (its inputs depend on tensor data)");
  }
  // An op headroom does not know, allowed by the options: elementwise over its runtime inputs.
  void op_unknown(NodeCtx& c) {
    std::vector<TensorId> ins = runtime_inputs(c);
    std::vector<GraphBuilder::OpaqueOutput> outs;
    for (int k = 0; k < c.node.output_size(); ++k) {
      const std::string& o = c.node.output(k);
      if (o.empty()) continue;
      auto it = types_.find(o);
      if (it != types_.end() && it->second.static_shape() && it->second.elem != 0) {
        outs.push_back({it->second.dims, dtype_of(it->second.elem, "output '" + o + "'")});
        continue;
      }
      if (ins.empty())
        throw InputError("unknown op without inputs and no inferred shape for '" + o + "'");
      std::vector<int64_t> shape = b_.shape(ins[0]);
      for (size_t i = 1; i < ins.size(); ++i) shape = broadcast(shape, b_.shape(ins[i]), c.name);
      outs.push_back({shape, b_.tensor(ins[0]).dtype});
    }
    emit_opaque(c, ins, outs);
  }

 private:
  int64_t model_opset() const { return st_.opset; }

  // ---- setup -----------------------------------------------------------------------------
  void check_supported() {
    std::map<std::string, int> unknown = unknown_op_types(g_);
    for (const auto& [op, count] : unknown) {
      unknown_ops_ += (unknown_ops_.empty() ? "" : ", ") + op + " x" + std::to_string(count);
    }
    if (!unknown.empty() && !opts_.allow_unknown) check_supported_ops(g_, false);
  }

  void create_inputs() {
    std::unordered_map<std::string, const onnx::ValueInfoProto*> info;
    for (const onnx::ValueInfoProto& v : g_.input()) info[v.name()] = &v;
    for (size_t i = 0; i < st_.inputs.size(); ++i) {
      const std::string& name = st_.inputs[i];
      const onnx::TypeProto_Tensor& t = info.at(name)->type().tensor_type();
      std::vector<int64_t> shape;
      for (const auto& d : t.shape().dim()) {
        HEADROOM_CHECK(d.value_case() == onnx::TensorShapeProto_Dimension::kDimValue,
                       "input dims are bound");
        shape.push_back(d.dim_value());
      }
      Value v;
      v.tensor = b_.input(name, shape, dtype_of(t.elem_type(), "graph input '" + name + "'"),
                          dims_.batch_axis[i]);
      v.origin = name;
      bind(name, v);
    }
  }

  // Initializers: parameters and buffers (leaves, in file order, which is PyTorch's state_dict
  // order) or compile-time constants.
  void classify_initializers() {
    for (int i = 0; i < g_.initializer_size(); ++i) {
      const TensorProto& t = g_.initializer(i);
      const std::string& name = t.name();
      auto uses = st_.consumers.find(name);
      bool output = st_.output_uses.count(name) > 0;
      if ((uses == st_.consumers.end() || uses->second.empty()) && !output) continue;
      const std::vector<std::pair<int, int>> no_uses;
      const auto& u = uses == st_.consumers.end() ? no_uses : uses->second;
      bool settings_only = !output, non_diff_only = !output, bn_stat = false;
      for (const auto& [node, slot] : u) {
        const std::string& op = g_.node(node).op_type();
        settings_only = settings_only && settings_slot(op, slot);
        non_diff_only = non_diff_only && non_differentiable_slot(op, slot);
        bn_stat = bn_stat || (op == "BatchNormalization" && (slot == 3 || slot == 4));
      }
      const bool inline_data =
          !(t.has_data_location() && t.data_location() == TensorProto::EXTERNAL);
      ConstTensor c =
          decode_tensor(t, "initializer '" + name + "'",
                        settings_only || !is_float_elem(t.data_type()) ? kMaxFoldElements : 1);
      ++initializers_;
      if (!inline_data) ++external_;
      Value v;
      v.origin = name;
      bool constant =
          settings_only || !is_float_elem(c.elem) || (c.known && c.numel() <= 1 && inline_data);
      if (constant) {
        v.constant = std::make_shared<ConstTensor>(std::move(c));
        v.from_initializer = true;
        bind(name, v);
        continue;
      }
      DType dt = dtype_of(c.elem, "initializer '" + name + "'");
      if (bn_stat || non_diff_only) {
        v.tensor = b_.buffer(name, c.shape, dt);
        ++buffers_;
      } else {
        v.tensor = b_.parameter(name, c.shape, dt);
      }
      bind(name, v);
      weight_dims_[name] = c.shape;
      // PyTorch's BatchNorm keeps an int64 num_batches_tracked next to its running statistics;
      // the exporter drops it (its update is an in-place side effect).
      const std::string suffix = ".running_var";
      if (bn_stat && name.size() > suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        std::string nbt = name.substr(0, name.size() - suffix.size()) + ".num_batches_tracked";
        if (!st_.initializer.count(nbt)) {
          b_.buffer(nbt, {}, DType::I64);
          ++num_batches_tracked_;
        }
      }
    }
  }

  // ---- non-persistent buffers ---------------------------------------------------------------
  // torch.onnx writes a module's non-persistent buffers (register_buffer(..., persistent=False),
  // GPT-2's causal mask `attn.bias` in transformers' GPT2Attention) as Constant nodes, not
  // initializers, and merges equal ones: twelve blocks' masks reach the file as one Constant that
  // twelve module calls read. Eager holds one per module for the model's lifetime. A Constant of
  // at least kHeldConstantBytes is held as a buffer once per module call (the reader's node-name
  // scope, "/m/transformer/h.0/attn") that reads it; smaller ones (folded shapes and scalars, and
  // GPT-2's 4-byte `masked_bias`) are not held.
  static constexpr int64_t kHeldConstantBytes = 64 * 1024;
  void hold_constant_buffers() {
    for (int i = 0; i < g_.node_size(); ++i) {
      const NodeProto& n = g_.node(i);
      if (n.op_type() != "Constant" || !default_domain(n) || n.output_size() != 1) continue;
      auto readers = st_.consumers.find(n.output(0));
      if (readers == st_.consumers.end() || readers->second.empty()) continue;
      const TensorProto* value = NodeAttrs(n).t("value");
      if (value == nullptr) continue;
      std::vector<int64_t> shape(value->dims().begin(), value->dims().end());
      if (std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; })) continue;  // reported when folded
      DType dt = DType::F32;
      try {
        int64_t numel = 1;
        for (int64_t d : shape) numel = checked_mul(numel, d, "constant '" + n.output(0) + "'");
        dt = dtype_of(value->data_type(), "constant '" + n.output(0) + "'");
        if (checked_mul(numel, dtype_size(dt), "constant '" + n.output(0) + "'") < kHeldConstantBytes) continue;
      } catch (const InputError&) {
        continue;  // an unsupported type or a size that overflows: reported, with its node, when it is folded
      }
      std::set<std::string> calls;
      for (const auto& [reader, slot] : readers->second) {
        const std::string& name = g_.node(reader).name();
        const size_t cut = name.rfind('/');
        calls.insert(cut == std::string::npos || cut == 0 ? std::string() : name.substr(0, cut));
      }
      for (const std::string& call : calls) {
        b_.buffer(n.output(0) + (call.empty() ? "" : " of " + call), shape, dt);
        ++held_constants_;
      }
    }
  }

  // ---- module scopes (OnnxImportOptions::module_scopes) -------------------------------------
  // torch.onnx names nodes by the module calls around them ("/layer1/layer1.0/conv1/Conv"). Each
  // call of two or more nodes that are contiguous in the file is a scope. Two kinds of Python
  // references end when the call returns:
  //  - arguments: the tensors it reads that exist before it starts, referenced by the caller;
  //  - concatenated locals: a Concat made by the call's own code (not by a child module) whose
  //    result a child module reads. torch.cat takes a Python list, which module code builds
  //    and then concatenates in a statement of its own, naming the result
  //    (`concated_features = torch.cat(inputs, 1)` in torchvision's DenseNet,
  //    `branch3x3 = torch.cat(branch3x3, 1)` in Inception); a named local lives until forward
  //    returns. ONNX keeps no trace of helper functions, so a local of one (DenseNet's
  //    bn_function ends after conv1) is held to the end of the enclosing module call. Results
  //    of other ops are not held: module code mostly rebinds them (`out = self.bn1(out)`), and
  //    the file cannot tell a rebinding from a new name.
  struct Scope {
    int first = -1, last = -1, count = 0;
    std::vector<std::string> inputs;  // read inside, produced before `first`
    std::string prefix;
  };

  void find_scopes() {
    std::map<std::string, Scope> scopes;  // ordered: reproducible hold order
    std::vector<std::vector<std::string>> of_node(static_cast<size_t>(g_.node_size()));
    for (int i = 0; i < g_.node_size(); ++i) {
      const std::string& name = g_.node(i).name();
      if (name.size() < 2 || name[0] != '/') continue;
      for (size_t slash = name.find('/', 1); slash != std::string::npos;
           slash = name.find('/', slash + 1)) {
        std::string prefix = name.substr(0, slash);
        Scope& sc = scopes[prefix];
        if (sc.first < 0) sc.first = i;
        sc.last = i;
        ++sc.count;
        of_node[static_cast<size_t>(i)].push_back(std::move(prefix));
      }
    }
    for (int i = 0; i < g_.node_size(); ++i) {
      for (const std::string& prefix : of_node[static_cast<size_t>(i)]) {
        Scope& sc = scopes.at(prefix);
        for (const std::string& in : g_.node(i).input()) {
          auto p = st_.producer.find(in);
          if (in.empty() || p == st_.producer.end() || p->second >= sc.first) continue;
          if (std::find(sc.inputs.begin(), sc.inputs.end(), in) == sc.inputs.end())
            sc.inputs.push_back(in);
        }
      }
    }
    auto valid = [](const Scope& sc) {
      return sc.count >= 2 && sc.last - sc.first + 1 == sc.count;
    };
    for (int i = 0; i < g_.node_size(); ++i) {
      const NodeProto& n = g_.node(i);
      const std::vector<std::string>& own = of_node[static_cast<size_t>(i)];
      if (n.op_type() != "Concat" || !default_domain(n) || own.empty() || n.output_size() < 1)
        continue;
      const std::string& prefix = own.back();  // the call whose code ran the Concat
      const Scope& sc = scopes.at(prefix);
      if (!valid(sc) || sc.last == i) continue;
      auto readers = st_.consumers.find(n.output(0));
      if (readers == st_.consumers.end()) continue;
      for (const auto& [reader, slot] : readers->second) {
        const std::vector<std::string>& calls = of_node[static_cast<size_t>(reader)];
        if (calls.size() > own.size() && calls[own.size() - 1] == prefix) {  // a child's node
          scope_locals_[i] = {prefix, n.output(0)};
          break;
        }
      }
    }
    for (auto& [prefix, sc] : scopes) {
      // A named copy: clang 14 cannot capture a structured binding in a lambda.
      const std::string& scope_name = prefix;
      bool has_local = std::any_of(scope_locals_.begin(), scope_locals_.end(),
                                   [&](const auto& l) { return l.second.first == scope_name; });
      if (!valid(sc) || (sc.inputs.empty() && !has_local)) continue;
      sc.prefix = prefix;
      scope_starts_[sc.first].push_back(std::move(sc));
    }
    for (auto& [first, list] : scope_starts_) {  // outermost (longest) first
      std::stable_sort(list.begin(), list.end(),
                       [](const Scope& a, const Scope& b) { return a.last > b.last; });
    }
  }

  void open_scopes(int i) {
    auto it = scope_starts_.find(i);
    if (it == scope_starts_.end()) return;
    for (const Scope& sc : it->second) {
      open_scopes_.push_back({sc.last, b_.open_scope(), sc.prefix});
      for (const std::string& in : sc.inputs) {
        auto v = values_.find(in);
        if (v == values_.end() || v->second.tensor == kNone) continue;
        if (b_.tensor(v->second.tensor).role == TensorRole::Activation) b_.hold(v->second.tensor);
      }
    }
  }

  // After node i: a concatenated local is held by the call whose code made it, which is the
  // innermost open scope (node i is that call's own node, so no child of it is open; the
  // names of a file that is not torch.onnx's may break that, and then nothing is held).
  void hold_scope_local(int i) {
    auto it = scope_locals_.find(i);
    if (it == scope_locals_.end()) return;
    if (open_scopes_.empty() || open_scopes_.back().prefix != it->second.first) return;
    auto v = values_.find(it->second.second);
    if (v == values_.end() || v->second.tensor == kNone) return;
    if (b_.tensor(v->second.tensor).role == TensorRole::Activation) b_.hold(v->second.tensor);
  }

  void close_scopes(int i) {
    while (!open_scopes_.empty() && open_scopes_.back().last <= i) {
      b_.release_holds(open_scopes_.back().builder_scope);
      open_scopes_.pop_back();
    }
  }

  void find_patterns() {
    PatternQueries q;
    // A compile-time value: an inline initializer or a Constant node (folded at lowering).
    auto constant_of = [this](const std::string& name) -> std::shared_ptr<const ConstTensor> {
      auto it = values_.find(name);
      if (it != values_.end()) return it->second.constant;
      auto p = st_.producer.find(name);
      if (p == st_.producer.end()) return nullptr;
      const NodeProto& n = g_.node(p->second);
      if (n.op_type() != "Constant" || !default_domain(n)) return nullptr;
      try {
        std::optional<std::vector<ConstTensor>> r = fold_node(n, st_.opset, {});
        return r ? std::make_shared<const ConstTensor>(r->at(0)) : nullptr;
      } catch (const InputError&) {
        return nullptr;  // reported when the node is lowered
      }
    };
    q.scalar = [constant_of](const std::string& name) -> std::optional<double> {
      std::shared_ptr<const ConstTensor> t = constant_of(name);
      return t ? t->scalar() : std::nullopt;
    };
    q.ints = [constant_of](const std::string& name) -> std::optional<std::vector<int64_t>> {
      std::shared_ptr<const ConstTensor> t = constant_of(name);
      if (!t || !t->known || t->is_float()) return std::nullopt;
      return t->ints;
    };
    q.weight_dims = [this](const std::string& tensor) -> std::optional<std::vector<int64_t>> {
      // Through Identity nodes: exporters deduplicate equal initializers (two fresh LayerNorms
      // share ones and zeros) and read the copies through Identity.
      std::string name = tensor;
      for (int hops = 0; hops < 16 && !weight_dims_.count(name); ++hops) {
        auto p = st_.producer.find(name);
        if (p == st_.producer.end()) break;
        const NodeProto& n = g_.node(p->second);
        if (n.op_type() != "Identity" || !default_domain(n) || n.input_size() != 1) break;
        name = n.input(0);
      }
      auto it = weight_dims_.find(name);
      if (it == weight_dims_.end()) return std::nullopt;
      if (b_.tensor(values_.at(name).tensor).role != TensorRole::Parameter) return std::nullopt;
      return it->second;
    };
    q.rank = [this](const std::string& name) -> std::optional<size_t> {
      auto it = types_.find(name);
      if (it == types_.end() || !it->second.has_shape) return std::nullopt;
      return it->second.dims.size();
    };
    fusions_ = find_fusions(g_, st_, q);
    for (const Fusion& f : fusions_) {
      if (f.kind == Fusion::Kind::Gelu || f.kind == Fusion::Kind::GeluTanh) ++gelus_;
      if (f.kind == Fusion::Kind::Silu) ++silus_;
      if (f.kind == Fusion::Kind::HardSwish) ++hardswishes_;
      if (f.kind == Fusion::Kind::Mish) ++mishes_;
      if (f.kind == Fusion::Kind::LayerNorm) ++layer_norms_;
      if (f.kind == Fusion::Kind::LinearBias) ++linear_biases_;
      if (f.kind == Fusion::Kind::PaddedAvgPool) ++padded_pools_;
    }
  }

  // ---- nodes -----------------------------------------------------------------------------
  void lower(int i) {
    const NodeProto& node = g_.node(i);
    const Fusion& f = fusions_[static_cast<size_t>(i)];
    if (f.kind == Fusion::Kind::Skip) return;
    NodeCtx c{node,
              i,
              node.name().empty() ? node.op_type() + "_" + std::to_string(i) : node.name(),
              {},
              NodeAttrs(node)};
    try {
      if (node.output_size() == 0 || node.output(0).empty())
        throw InputError("has no first output");
      if (f.kind == Fusion::Kind::Alias) return alias(c, 0, values_.at(f.alias));
      if (f.kind == Fusion::Kind::Gelu) {
        set(c, 0, b_.gelu(c.name, materialize(values_.at(f.x))));
        return check_shapes(c);
      }
      if (f.kind == Fusion::Kind::GeluTanh) {
        set(c, 0, b_.gelu(c.name, materialize(values_.at(f.x)), true));
        return check_shapes(c);
      }
      if (f.kind == Fusion::Kind::Silu) {
        set(c, 0, b_.silu(c.name, materialize(values_.at(f.x))));
        return check_shapes(c);
      }
      if (f.kind == Fusion::Kind::HardSwish || f.kind == Fusion::Kind::Mish) {
        // No op kind of their own: Opaque keeps its input for backward and allocates a fresh
        // output, which is what hardswish_backward(grad, self) and mish_backward(grad, self) need.
        TensorId x = materialize(values_.at(f.x));
        set(c, 0, b_.opaque(c.name, {x}, {{b_.shape(x), b_.tensor(x).dtype}})[0]);
        return check_shapes(c);
      }
      if (f.kind == Fusion::Kind::LayerNorm) {
        set(c, 0,
            b_.layer_norm_with(c.name, materialize(values_.at(f.x)),
                               materialize(values_.at(f.weight)), materialize(values_.at(f.bias))));
        return check_shapes(c);
      }
      if (f.kind == Fusion::Kind::PaddedAvgPool) {
        TensorId x = materialize(values_.at(f.x));
        Window2d w = window(c, b_.shape(x), *c.attrs.ints("kernel_shape"), false);
        w.pad_top = f.pads[0];
        w.pad_left = f.pads[1];
        w.pad_bottom = f.pads[2];
        w.pad_right = f.pads[3];
        set(c, 0, b_.avg_pool2d_with(c.name, x, w));
        return check_shapes(c);
      }
      for (const std::string& in : node.input()) {
        if (in.empty()) {
          c.in.push_back(nullptr);
          continue;
        }
        Value& v = values_.at(in);  // check_structure: defined before use
        if (!v.unavailable.empty())
          throw InputError("reads '" + in + "', " + v.unavailable +
                           ", which headroom does not model");
        c.in.push_back(&v);
      }
      if (f.kind == Fusion::Kind::NmsIndices) return op_nms_indices(c, f);
      if (!fold(c)) {
        auto h = default_domain(node) ? handlers().find(node.op_type()) : handlers().end();
        if (h == handlers().end()) {
          op_unknown(c);
        } else {
          (this->*(h->second))(c);
        }
      }
      if (c.check_shapes) check_shapes(c);
    } catch (const InputError& e) {
      std::string msg = e.what();
      for (const std::string& prefix : {c.name + ": ", node.op_type() + ": "}) {
        if (msg.rfind(prefix, 0) == 0) msg = msg.substr(prefix.size());
      }
      throw InputError(node_label(node, static_cast<size_t>(i)) + ": " + msg);
    }
  }

  // Folds a node whose inputs are all compile-time (Shape and Size need only a static shape).
  bool fold(NodeCtx& c) {
    if (!default_domain(c.node)) return false;
    const std::string& op = c.node.op_type();
    const bool shape_only = op == "Shape" || op == "Size";
    std::vector<ConstTensor> shapes;  // shape-only stand-ins for runtime inputs
    shapes.reserve(c.in.size());
    std::vector<const ConstTensor*> ins;
    for (Value* v : c.in) {
      if (v == nullptr) {
        ins.push_back(nullptr);
      } else if (v->constant) {
        ins.push_back(v->constant.get());
      } else if (shape_only) {
        ConstTensor s;
        s.elem = TensorProto::FLOAT;
        s.shape = b_.shape(materialize(*v));
        shapes.push_back(std::move(s));
        ins.push_back(&shapes.back());
      } else {
        return false;
      }
    }
    std::optional<std::vector<ConstTensor>> r = fold_node(c.node, model_opset(), ins);
    if (!r) return false;
    for (size_t k = 0; k < r->size() && k < static_cast<size_t>(c.node.output_size()); ++k) {
      if (c.node.output(static_cast<int>(k)).empty()) continue;
      Value v;
      v.constant = std::make_shared<ConstTensor>(std::move((*r)[k]));
      v.origin = c.name;
      bind(c.node.output(static_cast<int>(k)), v);
    }
    c.check_shapes = false;
    ++folded_;
    return true;
  }

  void check_shapes(const NodeCtx& c) {
    for (const std::string& o : c.node.output()) {
      if (o.empty()) continue;
      auto v = values_.find(o);
      if (v == values_.end() || v->second.tensor == kNone) continue;
      auto t = types_.find(o);
      if (t == types_.end() || !t->second.static_shape()) continue;
      const std::vector<int64_t>& mine = b_.shape(v->second.tensor);
      if (mine != t->second.dims) {
        throw InputError("contradictory shapes: output '" + o + "' is " + shape_text(mine) +
                         " under PyTorch semantics but the model's shapes say " +
                         shape_text(t->second.dims));
      }
    }
  }

  // ---- values ----------------------------------------------------------------------------
  void bind(const std::string& name, const Value& v) {
    values_[name] = v;
    if (v.tensor != kNone && opts_.infer_inplace) names_of_[v.tensor].push_back(name);
  }
  void set(NodeCtx& c, int k, TensorId t, bool inplace = false) {
    if (k >= c.node.output_size() || c.node.output(k).empty()) return;
    Value v;
    v.tensor = t;
    v.origin = c.name;
    bind(c.node.output(k), v);
    if (inplace) inplace_outputs_.insert(t);
  }
  void alias(NodeCtx& c, int k, const Value& v) {
    if (k >= c.node.output_size() || c.node.output(k).empty()) return;
    bind(c.node.output(k), v);
  }
  void unavailable(NodeCtx& c, int k, const std::string& why) {
    if (k >= c.node.output_size() || c.node.output(k).empty()) return;
    Value v;
    v.unavailable = why;
    values_[c.node.output(k)] = v;
  }

  TensorId materialize(Value& v) {
    if (v.tensor != kNone) return v.tensor;
    if (v.transposed_of != kNone) {
      v.tensor = b_.transpose(v.origin, v.transposed_of, 0, 1);
    } else if (v.constant) {
      DType dt = dtype_of(v.constant->elem, "constant '" + v.origin + "'");
      v.tensor = v.from_initializer ? b_.buffer(v.origin, v.constant->shape, dt)
                                    : b_.factory(v.origin, v.constant->shape, dt);
      if (v.from_initializer) ++buffers_;
    } else {
      throw InputError("'" + v.origin + "' is " + v.unavailable);
    }
    if (opts_.infer_inplace) names_of_[v.tensor].push_back(v.origin);
    return v.tensor;
  }
  bool input_present(const NodeCtx& c, size_t i) const {
    return i < c.in.size() && c.in[i] != nullptr;
  }
  Value& need(NodeCtx& c, size_t i) {
    if (!input_present(c, i)) throw InputError("input " + std::to_string(i) + " is missing");
    return *c.in[i];
  }
  TensorId tensor(NodeCtx& c, size_t i) {
    if (!input_present(c, i)) throw InputError("input " + std::to_string(i) + " is missing");
    return materialize(*c.in[i]);
  }
  const ConstTensor& constant(NodeCtx& c, size_t i, const char* what) {
    if (!input_present(c, i)) throw InputError("input '" + std::string(what) + "' is missing");
    if (!c.in[i]->constant) {
      throw InputError("input '" + std::string(what) + "' ('" + c.node.input(static_cast<int>(i)) +
                       "') is not a compile-time constant");
    }
    return *c.in[i]->constant;
  }
  double scalar_input(NodeCtx& c, size_t i, const char* what) {
    std::optional<double> s = constant(c, i, what).scalar();
    if (!s) throw InputError("input '" + std::string(what) + "' must be a one-element constant");
    return *s;
  }
  // A one-element constant whose broadcast against `other` keeps other's shape: the Python
  // scalar of `x + 1.0`.
  std::optional<double> scalar_operand(const Value& v, Value& other) {
    if (!v.constant || !v.constant->known || v.constant->size() != 1 || other.constant)
      return std::nullopt;
    TensorId o = materialize(other);
    if (v.constant->shape.size() > b_.shape(o).size()) return std::nullopt;
    return v.constant->as_double(0);
  }
  int32_t elem_of(NodeCtx& c, size_t i) {
    if (input_present(c, i) && c.in[i]->constant) return c.in[i]->constant->elem;
    auto it = types_.find(c.node.input(static_cast<int>(i)));
    if (it == types_.end() || it->second.elem == 0)
      throw InputError("the element type of input " + std::to_string(i) + " is unknown");
    return it->second.elem;
  }
  std::vector<int64_t> inferred_shape(const NodeCtx& c, const std::string& name) const {
    auto it = types_.find(name);
    if (it == types_.end() || !it->second.static_shape()) {
      throw InputError("shape inference gives no static shape for its output '" + name + "' (" +
                       c.node.op_type() + " needs one)");
    }
    return it->second.dims;
  }
  int32_t inferred_elem(const NodeCtx& c, const std::string& name) const {
    auto it = types_.find(name);
    if (it == types_.end() || it->second.elem == 0) {
      throw InputError("shape inference gives no element type for its output '" + name + "' (" +
                       c.node.op_type() + ")");
    }
    return it->second.elem;
  }
  std::vector<TensorId> runtime_inputs(NodeCtx& c) {
    std::vector<TensorId> ins;
    for (size_t i = 0; i < c.in.size(); ++i) {
      if (c.in[i] == nullptr) continue;
      if (c.in[i]->constant && (c.in[i]->constant->size() <= 1 ||
                                settings_slot(c.node.op_type(), static_cast<int>(i)))) {
        continue;  // scalars and settings are Python arguments, not tensors
      }
      ins.push_back(materialize(*c.in[i]));
    }
    return ins;
  }
  void emit_opaque(NodeCtx& c, const std::vector<TensorId>& ins,
                   const std::vector<GraphBuilder::OpaqueOutput>& outs, OpAttrs attrs = {}) {
    std::vector<TensorId> ts = b_.opaque(c.name, ins, outs, std::move(attrs));
    ++opaque_[c.node.op_type()];
    size_t j = 0;
    for (int k = 0; k < c.node.output_size() && j < ts.size(); ++k) {
      if (!c.node.output(k).empty()) set(c, k, ts[j++]);
    }
  }
  bool is_matrix_parameter(TensorId t) const {
    const Tensor& x = b_.tensor(t);
    return x.role == TensorRole::Parameter && x.shape.size() == 2;
  }

  // In-place inference (OnnxImportOptions::infer_inplace): t is read by one op in the whole
  // graph, its storage is a fresh activation (possibly written in place before), and no op on
  // that storage keeps its output for backward (relu_ on a relu's output would break autograd).
  bool writable_in_place(TensorId t) {
    if (!opts_.infer_inplace) return false;
    if (b_.tensor(t).role != TensorRole::Activation || live_reads(t) != 1) return false;
    return storage_writable(t);
  }
  // Whether every op on t's storage chain (t, what it aliases in place, ...) lets the storage be
  // written again. Memoized per tensor: a chain of n in-place ops would otherwise be walked n
  // times (quadratic import). A tensor's producer, alias and in-place mark never change once set.
  bool storage_writable(TensorId t) {
    std::vector<TensorId> path;
    bool ok = false;
    for (TensorId cur = t;;) {
      if (auto m = storage_writable_.find(cur); m != storage_writable_.end()) {
        ok = m->second;
        break;
      }
      path.push_back(cur);
      const Tensor& x = b_.tensor(cur);
      if (x.role != TensorRole::Activation) break;
      OpKind k = b_.op(x.producer).kind;
      if (k == OpKind::Relu || k == OpKind::Sigmoid || k == OpKind::Tanh || k == OpKind::Softmax ||
          k == OpKind::LogSoftmax || k == OpKind::Rsqrt)
        break;
      if (x.alias_of == kNone) {
        ok = true;
        break;
      }
      if (!inplace_outputs_.count(cur)) break;  // a view
      cur = x.alias_of;
    }
    for (TensorId p : path) storage_writable_[p] = ok;
    return ok;
  }
  // Readers of t's names, counted per PyTorch call: a node claimed by a pattern counts as the
  // call its pattern emits (once, however many of the pattern's nodes read t); the folded bias
  // Add reads nothing of its own.
  int live_reads(TensorId t) const {
    int n = 0;
    auto it = names_of_.find(t);
    if (it == names_of_.end()) return 0;
    std::set<int> calls;
    for (const std::string& name : it->second) {
      n += st_.output_uses.count(name) ? st_.output_uses.at(name) : 0;
      auto u = st_.consumers.find(name);
      if (u == st_.consumers.end()) continue;
      for (const auto& [node, slot] : u->second) {
        const Fusion& f = fusions_[static_cast<size_t>(node)];
        if (f.kind == Fusion::Kind::Alias) continue;
        calls.insert(f.kind == Fusion::Kind::Skip ? f.owner : node);
      }
    }
    return n + static_cast<int>(calls.size());
  }

  // ---- shared pieces -----------------------------------------------------------------------
  Window2d window(NodeCtx& c, const std::vector<int64_t>& in, const std::vector<int64_t>& kernel,
                  bool conv) {
    if (auto k = c.attrs.ints("kernel_shape"); k && *k != kernel) {
      throw InputError("kernel_shape " + shape_text(*k) + " does not match the weight's " +
                       shape_text(kernel));
    }
    Window2d w;
    w.kernel_h = kernel[0];
    w.kernel_w = kernel[1];
    std::vector<int64_t> strides = c.attrs.ints("strides").value_or(std::vector<int64_t>{1, 1});
    std::vector<int64_t> dil = c.attrs.ints("dilations").value_or(std::vector<int64_t>{1, 1});
    std::vector<int64_t> pads = c.attrs.ints("pads").value_or(std::vector<int64_t>{0, 0, 0, 0});
    if (strides.size() != 2 || dil.size() != 2 || pads.size() != 4) {
      throw InputError("strides, dilations and pads must have 2, 2 and 4 values for a 2-D window");
    }
    w.stride_h = strides[0];
    w.stride_w = strides[1];
    w.dilation_h = dil[0];
    w.dilation_w = dil[1];
    w.pad_top = pads[0];
    w.pad_left = pads[1];
    w.pad_bottom = pads[2];
    w.pad_right = pads[3];
    w.ceil_mode = !conv && c.attrs.i("ceil_mode", 0) != 0;
    std::string auto_pad = c.attrs.s("auto_pad", "NOTSET");
    if (auto_pad == "VALID") {
      w.pad_top = w.pad_left = w.pad_bottom = w.pad_right = 0;
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      int64_t* begin[2] = {&w.pad_top, &w.pad_left};
      int64_t* end[2] = {&w.pad_bottom, &w.pad_right};
      for (int a = 0; a < 2; ++a) {
        int64_t stride = strides[static_cast<size_t>(a)], d = dil[static_cast<size_t>(a)];
        if (stride <= 0 || d <= 0) throw InputError("strides and dilations must be positive");
        int64_t size = in[static_cast<size_t>(2 + a)];
        int64_t out = size / stride + (size % stride != 0 ? 1 : 0);
        int64_t eff =
            checked_add(checked_mul(d, kernel[static_cast<size_t>(a)] - 1, c.name), 1, c.name);
        int64_t total = std::max<int64_t>(
            0, checked_add(checked_mul(out - 1, stride, c.name), eff - size, c.name));
        *begin[a] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        *end[a] = total - *begin[a];
      }
    } else if (auto_pad != "NOTSET") {
      throw InputError("unknown auto_pad '" + auto_pad + "'");
    }
    return w;
  }

  TensorId matmul(const std::string& name, TensorId a, TensorId b, NodeCtx& c) {
    const std::vector<int64_t> sa = b_.shape(a);
    const std::vector<int64_t> sb = b_.shape(b);
    if (sa.size() < 2 || sb.size() < 2) {  // vector operands: torch.matmul's dot/mv paths
      return b_.opaque(name, {a, b},
                       {{inferred_shape(c, c.node.output(0)), b_.tensor(a).dtype}})[0];
    }
    checked_mul(sa[sa.size() - 2], sb.back(), name);
    checked_mul(sa.back(), 2, name);  // the builder's flop count
    return b_.matmul(name, a, b);
  }

  // x.reshape(target) as PyTorch runs it: a view when the strides allow one, else copy + view.
  TensorId reshape(const std::string& name, TensorId x, const std::vector<int64_t>& target) {
    const std::vector<int64_t> s = b_.shape(x);
    if (b_.is_contiguous(x)) return b_.view(name, x, target);
    if (target == s) return x;
    // Splitting one dimension keeps any layout viewable.
    size_t pre = 0;
    while (pre < s.size() && pre < target.size() && s[pre] == target[pre]) ++pre;
    size_t suf = 0;
    while (suf < s.size() - pre && suf < target.size() - pre &&
           s[s.size() - 1 - suf] == target[target.size() - 1 - suf])
      ++suf;
    if (pre + suf + 1 == s.size() && target.size() >= s.size()) {
      std::vector<int64_t> sizes(target.begin() + static_cast<int64_t>(pre),
                                 target.end() - static_cast<int64_t>(suf));
      return b_.unflatten(name, x, static_cast<int64_t>(pre), sizes);
    }
    // Adding or removing size-1 dimensions only.
    std::vector<int64_t> a, t;
    for (int64_t d : s)
      if (d != 1) a.push_back(d);
    for (int64_t d : target)
      if (d != 1) t.push_back(d);
    if (a == t) {
      TensorId cur = x;
      int k = 0;
      for (size_t d = s.size(); d-- > 0;) {
        if (s[d] == 1)
          cur = b_.squeeze(k++ ? name + "." + std::to_string(k - 1) : name, cur,
                           static_cast<int64_t>(d));
      }
      for (size_t d = 0; d < target.size(); ++d) {
        if (target[d] == 1)
          cur = b_.unsqueeze(k++ ? name + "." + std::to_string(k - 1) : name, cur,
                             static_cast<int64_t>(d));
      }
      return cur;
    }
    return b_.reshape(name, x, target);
  }

  // einsum("...") with two operands that is one batched matmul: operands permuted to
  // [batch..., m, k] and [batch..., k, n], the result permuted to the output order.
  std::optional<TensorId> einsum_matmul(NodeCtx& c, const std::string& eq) {
    size_t arrow = eq.find("->"), comma = eq.find(',');
    if (arrow == std::string::npos || comma == std::string::npos || comma > arrow)
      return std::nullopt;
    auto letters = [](std::string s) {
      std::string r;
      for (char ch : s) {
        if (ch == ' ') continue;
        if (!std::isalpha(static_cast<unsigned char>(ch))) return std::string("!");
        r += ch;
      }
      return r;
    };
    std::string A = letters(eq.substr(0, comma)),
                B = letters(eq.substr(comma + 1, arrow - comma - 1)),
                O = letters(eq.substr(arrow + 2));
    auto unique = [](const std::string& s) {
      return std::set<char>(s.begin(), s.end()).size() == s.size();
    };
    if (A == "!" || B == "!" || O == "!" || !unique(A) || !unique(B) || !unique(O))
      return std::nullopt;
    std::string batch, m, n, k;
    for (char ch : O) {
      bool ia = A.find(ch) != std::string::npos, ib = B.find(ch) != std::string::npos;
      if (ia && ib)
        batch += ch;
      else if (ia)
        m += ch;
      else if (ib)
        n += ch;
      else
        return std::nullopt;
    }
    for (char ch : A) {
      if (O.find(ch) == std::string::npos) {
        if (B.find(ch) == std::string::npos) return std::nullopt;  // summed over one operand
        k += ch;
      }
    }
    for (char ch : B) {
      if (O.find(ch) == std::string::npos && A.find(ch) == std::string::npos) return std::nullopt;
    }
    if (m.size() != 1 || n.size() != 1 || k.size() != 1) return std::nullopt;
    TensorId a = tensor(c, 0), b = tensor(c, 1);
    if (b_.shape(a).size() != A.size() || b_.shape(b).size() != B.size()) {
      throw InputError("equation '" + eq + "' does not match the operand ranks");
    }
    auto order = [](const std::string& from, const std::string& to) {
      std::vector<int64_t> p;
      for (char ch : to) p.push_back(static_cast<int64_t>(from.find(ch)));
      return p;
    };
    auto identity = [](const std::vector<int64_t>& p) {
      for (size_t i = 0; i < p.size(); ++i)
        if (p[i] != static_cast<int64_t>(i)) return false;
      return true;
    };
    std::vector<int64_t> pa = order(A, batch + m + k), pb = order(B, batch + k + n);
    if (!identity(pa)) a = b_.permute(c.name + ".a", a, pa);
    if (!identity(pb)) b = b_.permute(c.name + ".b", b, pb);
    TensorId r = matmul(c.name, a, b, c);
    std::vector<int64_t> po = order(batch + m + n, O);
    if (!identity(po)) r = b_.permute(c.name + ".out", r, po);
    return r;
  }

  // ---- notes and loss --------------------------------------------------------------------
  void write_notes() {
    std::string head = "imported from ONNX (opset " + std::to_string(st_.opset);
    if (!model_.producer_name().empty())
      head += ", " + model_.producer_name() + " " + model_.producer_version();
    head += ")";
    b_.note(
        head + ": " + std::to_string(initializers_) + " initializers read by declared shape only" +
        (external_ ? " (" + std::to_string(external_) + " with external data, not loaded)" : "") +
        ", " + std::to_string(buffers_) + " of them buffers; " + std::to_string(folded_) +
        " nodes folded at import (shape arithmetic and constants)");
    for (const std::string& n : dims_.notes) b_.note(n);
    if (!dims_.values.empty()) {
      std::string d;
      for (const auto& [sym, v] : dims_.values)
        d += (d.empty() ? "" : ", ") + sym + "=" + std::to_string(v);
      b_.note("symbolic dimensions bound: " + d);
    }
    if (gelus_ || silus_ || hardswishes_ || mishes_ || layer_norms_ || linear_biases_ ||
        padded_pools_) {
      b_.note("recognized exporter decompositions: " + std::to_string(gelus_) + " GELU, " +
              std::to_string(silus_) + " SiLU, " + std::to_string(hardswishes_) + " HardSwish, " +
              std::to_string(mishes_) + " Mish, " + std::to_string(layer_norms_) + " layer norm, " +
              std::to_string(linear_biases_) + " linear + bias, " + std::to_string(padded_pools_) +
              " padded average pool");
    }
    bool has_conv = std::any_of(g_.node().begin(), g_.node().end(),
                                [](const NodeProto& n) { return n.op_type() == "Conv"; });
    if (has_conv && bn_training_ + bn_eval_ == 0) {
      b_.note(
          "no BatchNormalization in a model with convolutions: an eval-mode export folds batch "
          "norm into the "
          "convolution weights, so the estimate has no batch-norm memory");
    }
    if (bn_eval_ > 0) {
      b_.note(std::to_string(bn_eval_) +
              " batch norm(s) exported in eval mode; a training estimate still uses "
              "training-mode batch norm");
    }
    if (num_batches_tracked_ > 0) {
      b_.note("added " + std::to_string(num_batches_tracked_) +
              " num_batches_tracked buffers the exporter drops");
    }
    if (held_constants_ > 0) {
      b_.note("held " + std::to_string(held_constants_) +
              " module buffers for large Constant nodes, one per module call reading each (non-persistent "
              "buffers the exporter inlines and merges)");
    }
    if (!opaque_.empty()) {
      std::string list;
      for (const auto& [op, count] : opaque_)
        list += (list.empty() ? "" : ", ") + op + " x" + std::to_string(count);
      b_.note("ops recorded as opaque (fresh output, inputs kept for backward): " + list);
    }
    if (!unknown_ops_.empty())
      b_.note("warning: unknown ops treated as elementwise: " + unknown_ops_);
    if (opts_.infer_inplace && !inplace_outputs_.empty()) {
      b_.note(std::to_string(inplace_outputs_.size()) +
              " relu/add recorded in place (infer_inplace)");
    }
    if (in_place_merges_ > 0) {
      b_.note(std::to_string(in_place_merges_) +
              " Scatter merges into one fresh tensor written in place, as eager's index_put_");
    }
  }

  // The graph computes its own loss: that is the training loss, and a loss option that would
  // choose or attach another does not apply.
  void use_in_graph_loss() {
    if (in_graph_loss_.size() > 1)
      throw InputError("the graph computes " + std::to_string(in_graph_loss_.size()) +
                       " losses (" + in_graph_loss_op() + "); sum them into one output and use --loss none");
    if (opts_.loss != LossKind::Default || !opts_.loss_output.empty())
      throw InputError(
          "the graph computes its own loss (" + in_graph_loss_op() + "), so --loss does "
          "not apply: leave it out");
    b_.set_loss(in_graph_loss_[0]);
  }
  // --loss as an expression (onnx_losses.h): `none` takes the graph's scalar output, anything
  // else is built after the graph, which must then compute no loss of its own.
  void use_loss_spec(const OnnxLossSpec& spec, const std::vector<TensorId>& outs) {
    std::vector<OnnxLossOutput> named;
    for (int i = 0; i < g_.output_size(); ++i) named.push_back({g_.output(i).name(), outs[static_cast<size_t>(i)]});
    if (spec.none) {
      b_.set_loss(graph_scalar_loss(b_, spec, named));
      return;
    }
    if (!in_graph_loss_.empty())
      throw InputError("the graph computes its own loss (" + in_graph_loss_op() +
                       "), so a --loss to add does not apply: use --loss none or leave it out");
    b_.set_loss(build_onnx_loss(b_, spec, named));
  }
  std::string in_graph_loss_op() const {
    for (const onnx::NodeProto& n : g_.node()) {
      if (n.op_type() == "SoftmaxCrossEntropyLoss" || n.op_type() == "NegativeLogLikelihoodLoss") return n.op_type();
    }
    return "a loss node";
  }
  void add_default_loss(const std::vector<TensorId>& outs) {
    TensorId out = kNone;
    if (!opts_.loss_output.empty()) {
      for (int i = 0; i < g_.output_size(); ++i) {
        if (g_.output(i).name() == opts_.loss_output) out = outs[static_cast<size_t>(i)];
      }
      if (out == kNone)
        throw InputError("loss output '" + opts_.loss_output + "' is not a graph output");
    } else {
      for (TensorId t : outs) {
        if (is_floating(b_.tensor(t).dtype)) {
          out = t;
          break;
        }
      }
      if (out == kNone)
        throw InputError(
            "no floating-point graph output to attach a loss to (import without a loss for "
            "inference)");
    }
    if (!is_floating(b_.tensor(out).dtype)) {
      throw InputError("loss output '" + b_.tensor(out).name + "' is " +
                       std::string(dtype_name(b_.tensor(out).dtype)));
    }
    BuildConfig cfg;
    cfg.loss = opts_.loss;
    cfg.dtype = b_.activation_dtype();
    b_.begin_loss();
    LossKind fallback = b_.shape(out).size() == 2 ? LossKind::CrossEntropy : LossKind::Mse;
    b_.set_loss(add_loss(b_, out, fallback, cfg));
  }

  const onnx::ModelProto& model_;
  const onnx::GraphProto& g_;
  const Structure& st_;
  const DimBinding& dims_;
  const TypeTable& types_;
  const OnnxImportOptions& opts_;
  GraphBuilder b_;
  std::unordered_map<std::string, Value> values_;
  std::unordered_map<TensorId, std::vector<std::string>> names_of_;
  std::unordered_set<TensorId> inplace_outputs_;
  int in_place_merges_ = 0;  // Scatters lowered as in-place merge links (op_scatter)
  std::unordered_map<TensorId, bool> storage_writable_;  // storage_writable's memo
  std::unordered_map<std::string, std::vector<int64_t>> weight_dims_;
  std::vector<Fusion> fusions_;
  std::unordered_map<int, std::vector<Scope>> scope_starts_;
  // Concat node -> (its call's prefix, its output): concatenated locals.
  std::unordered_map<int, std::pair<std::string, std::string>> scope_locals_;
  struct OpenScope {
    int last;              // its last node
    size_t builder_scope;  // GraphBuilder::open_scope()
    std::string prefix;    // the call's name prefix
  };
  std::vector<OpenScope> open_scopes_;
  std::map<std::string, int> opaque_;
  std::string unknown_ops_;
  int initializers_ = 0, external_ = 0, buffers_ = 0, num_batches_tracked_ = 0, held_constants_ = 0;
  int silus_ = 0, hardswishes_ = 0, mishes_ = 0;
  int bn_training_ = 0, bn_eval_ = 0, gelus_ = 0, layer_norms_ = 0, linear_biases_ = 0,
      padded_pools_ = 0, folded_ = 0;
  std::vector<TensorId> in_graph_loss_;  // SoftmaxCrossEntropyLoss outputs, in training
};

const std::unordered_map<std::string, Handler>& handlers() {
  static const std::unordered_map<std::string, Handler> kHandlers = [] {
    std::unordered_map<std::string, Handler> h;
    auto add = [&](std::initializer_list<const char*> ops, Handler fn) {
      for (const char* op : ops) h[op] = fn;
    };
    add({"Identity"}, &Lowerer::op_identity);
    add({"Relu"}, &Lowerer::op_relu);
    add({"Sigmoid"}, &Lowerer::op_sigmoid);
    add({"Tanh"}, &Lowerer::op_tanh);
    add({"Neg"}, &Lowerer::op_neg);
    add({"Sqrt", "Reciprocal", "Exp"}, &Lowerer::op_keeps_result);
    add({"Gelu"}, &Lowerer::op_gelu);
    add({"Clip"}, &Lowerer::op_clip);
    add({"Softmax", "LogSoftmax"}, &Lowerer::op_softmax);
    add({"Add", "Sub", "Mul", "Div"}, &Lowerer::op_arith);
    add({"Pow"}, &Lowerer::op_pow);
    add({"Where"}, &Lowerer::op_where);
    add({"Cast", "CastLike"}, &Lowerer::op_cast);
    add({"MatMul"}, &Lowerer::op_matmul);
    add({"Gemm"}, &Lowerer::op_gemm);
    add({"Einsum"}, &Lowerer::op_einsum);
    add({"Conv"}, &Lowerer::op_conv);
    add({"BatchNormalization"}, &Lowerer::op_batch_norm);
    add({"LayerNormalization"}, &Lowerer::op_layer_norm);
    add({"MaxPool"}, &Lowerer::op_max_pool);
    add({"AveragePool"}, &Lowerer::op_avg_pool);
    add({"RoiAlign", "MaxRoiPool"}, &Lowerer::op_roi_align);
    add({"GlobalAveragePool"}, &Lowerer::op_global_avg_pool);
    add({"Dropout"}, &Lowerer::op_dropout);
    add({"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
         "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"},
        &Lowerer::op_reduce);
    add({"Concat"}, &Lowerer::op_concat);
    add({"Split"}, &Lowerer::op_split);
    add({"Slice"}, &Lowerer::op_slice);
    add({"Gather"}, &Lowerer::op_gather);
    add({"Reshape", "Flatten"}, &Lowerer::op_reshape);
    add({"Squeeze", "Unsqueeze"}, &Lowerer::op_squeeze);
    add({"Transpose"}, &Lowerer::op_transpose);
    add({"Expand"}, &Lowerer::op_expand);
    add({"Tile"}, &Lowerer::op_tile);
    add({"Pad"}, &Lowerer::op_pad);
    add({"Erf",
         "Log",
         "Abs",
         "Sin",
         "Cos",
         "LeakyRelu",
         "Elu",
         "Selu",
         "Celu",
         "Softplus",
         "Softsign",
         "HardSigmoid",
         "HardSwish",
         "Mish",
         "ThresholdedRelu",
         "Floor",
         "Ceil",
         "Round",
         "Sign",
         "PRelu",
         "Min",
         "Max",
         "Mod",
         "Equal",
         "Less",
         "Greater",
         "LessOrEqual",
         "GreaterOrEqual",
         "And",
         "Or",
         "Xor",
         "Not",
         "IsNaN",
         "IsInf"},
        &Lowerer::op_elementwise);
    add({"Resize", "Upsample"}, &Lowerer::op_resize);
    add({"ScatterND", "ScatterElements"}, &Lowerer::op_scatter);
    add({"SoftmaxCrossEntropyLoss"}, &Lowerer::op_softmax_cross_entropy);
    add({"NegativeLogLikelihoodLoss"}, &Lowerer::op_nll_loss);
    add({"ConvTranspose", "GlobalMaxPool", "LpPool", "InstanceNormalization", "GroupNormalization",
         "LpNormalization", "ArgMax", "ArgMin", "TopK", "GatherElements", "GatherND", "CumSum",
         "Trilu", "OneHot", "DepthToSpace", "SpaceToDepth", "NonZero", "NonMaxSuppression"},
        &Lowerer::op_opaque_inferred);
    add({"Shape", "Size", "Constant", "ConstantOfShape", "Range"}, &Lowerer::op_compile_time);
    add({"RandomUniformLike", "RandomNormalLike"}, &Lowerer::op_random_like);
    add({"RandomUniform", "RandomNormal"}, &Lowerer::op_random);
    return h;
  }();
  return kHandlers;
}

}  // namespace

Graph lower_model(const onnx::ModelProto& model, const Structure& st, const DimBinding& dims,
                  const TypeTable& types, const OnnxImportOptions& options,
                  const std::string& model_name) {
  return Lowerer(model, st, dims, types, options, model_name).run();
}

std::map<std::string, int> unknown_op_types(const onnx::GraphProto& g) {
  std::map<std::string, int> unknown;
  for (const NodeProto& n : g.node()) {
    if (default_domain(n) && handlers().count(n.op_type())) continue;
    // Resolved before lowering: the branch taken, the body unrolled (onnx_control_flow.h).
    if (default_domain(n) &&
        (n.op_type() == "If" || n.op_type() == "Loop" || n.op_type() == "Scan"))
      continue;
    ++unknown[default_domain(n) ? n.op_type() : n.domain() + "." + n.op_type()];
  }
  return unknown;
}

void check_supported_ops(const onnx::GraphProto& g, bool allow_unknown) {
  std::map<std::string, int> unknown = unknown_op_types(g);
  if (unknown.empty() || allow_unknown) return;
  std::string list;
  for (const auto& [op, count] : unknown)
    list += (list.empty() ? "" : ", ") + op + " x" + std::to_string(count);
  throw InputError("unsupported ONNX op" + std::string(unknown.size() > 1 ? "s: " : ": ") + list +
                   " (allow unknown ops to treat them as elementwise)");
}

std::vector<std::string> supported_op_types() {
  std::vector<std::string> r;
  for (const auto& [op, h] : handlers()) r.push_back(op);
  std::sort(r.begin(), r.end());
  return r;
}

}  // namespace headroom::onnx_import
