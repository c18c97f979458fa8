// GraphBuilder writes a Graph the way eager PyTorch code runs: one call per PyTorch call, in order.
// Layer calls (conv2d, linear, ...) create their parameters named as in PyTorch's state_dict
// ("<module>.weight", "<module>.bias"), so parameter counts and layer names match the reference.
// Shapes are inferred here; a bad shape is an InputError naming the op and the shapes.
// FLOPs and bytes moved are filled for every op (multiply-add = 2 FLOPs).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace headroom {

struct Conv2dSpec {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride = 1, padding_h = 0, padding_w = 0, dilation = 1, groups = 1;
  bool bias = true;
  static Conv2dSpec square(int64_t k, int64_t stride = 1, int64_t padding = 0, bool bias = true) {
    Conv2dSpec s;
    s.kernel_h = s.kernel_w = k;
    s.stride = stride;
    s.padding_h = s.padding_w = padding;
    s.bias = bias;
    return s;
  }
};

struct Pool2dSpec {
  int64_t kernel = 1, stride = 1, padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;
};

// The window of a 2-D convolution or pooling given per axis, as importers read it (ONNX keeps
// separate begin and end pads; PyTorch pads both sides alike, so a file from PyTorch has them
// equal). Output size per axis: floor((in + begin + end - dilation * (kernel - 1) - 1) / stride) + 1
// (ceil with `ceil_mode`, dropping a last window that would start in the end padding).
struct Window2d {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  bool ceil_mode = false;
};

// The most ops one graph may have (forward, loss and optimizer ops together). The largest real
// models have tens of thousands; the bound keeps a spec such as mlp:layers=100000000 from building
// until memory runs out. add_op throws InputError past it.
inline constexpr int64_t kMaxGraphOps = 500'000;

class GraphBuilder {
 public:
  explicit GraphBuilder(std::string model, DType activation_dtype = DType::F32);

  DType activation_dtype() const { return act_; }
  void set_dim(const std::string& name, int64_t value) { g_.dims[name] = value; }

  // Leaves.
  TensorId input(const std::string& name, std::vector<int64_t> shape, DType dtype, int batch_axis = 0);
  TensorId target(const std::string& name, std::vector<int64_t> shape, DType dtype, int batch_axis = 0);
  TensorId parameter(const std::string& name, std::vector<int64_t> shape);
  TensorId buffer(const std::string& name, std::vector<int64_t> shape, DType dtype);
  // A parameter that is the same storage as `other` (weight tying).
  TensorId tied_parameter(const std::string& name, TensorId other);

  // Layers (create parameters).
  TensorId conv2d(const std::string& module, TensorId x, int64_t out_channels, const Conv2dSpec& spec);
  TensorId batch_norm2d(const std::string& module, TensorId x, bool training = true);
  TensorId layer_norm(const std::string& module, TensorId x, bool bias = true);
  TensorId linear(const std::string& module, TensorId x, int64_t out_features, bool bias = true);
  // Linear with a weight that already exists (tied lm_head); weight shape [out, in].
  TensorId linear_with(const std::string& module, TensorId x, TensorId weight, TensorId bias = kNone);
  TensorId embedding(const std::string& module, TensorId ids, int64_t num, int64_t dim);
  // The same layers with parameters that already exist: a module registers its parameters in
  // __init__ order, which can differ from the order forward() calls its layers in (BERT's
  // embeddings, Llama's norms), and parameter order decides allocation and optimizer-state order.
  TensorId embedding_with(const std::string& module, TensorId ids, TensorId weight);
  TensorId layer_norm_with(const std::string& module, TensorId x, TensorId weight, TensorId bias = kNone);
  // torch.addmm(bias, mat1, mat2) = mat1 [m,k] @ mat2 [k,n] + bias [n], as GPT-2's Conv1D calls it
  // with its weight stored [in, out]. Recorded as a Linear op with inputs (mat1, mat2, bias): the
  // same allocations, saved tensors (mat1) and gradients.
  TensorId addmm(const std::string& name, TensorId bias, TensorId mat1, TensorId mat2);

  // Activations.
  TensorId relu(const std::string& name, TensorId x, bool inplace);
  TensorId hardtanh(const std::string& name, TensorId x, double lo, double hi, bool inplace);
  TensorId gelu(const std::string& name, TensorId x, bool approximate_tanh = false);
  TensorId tanh(const std::string& name, TensorId x);
  TensorId sigmoid(const std::string& name, TensorId x);
  TensorId silu(const std::string& name, TensorId x);

  // Elementwise (broadcasting).
  TensorId add(const std::string& name, TensorId a, TensorId b);
  TensorId add_(const std::string& name, TensorId a, TensorId b);  // a += b
  TensorId sub(const std::string& name, TensorId a, TensorId b);
  TensorId mul(const std::string& name, TensorId a, TensorId b);
  TensorId div(const std::string& name, TensorId a, TensorId b);
  TensorId add_scalar(const std::string& name, TensorId x, double s);
  TensorId mul_scalar(const std::string& name, TensorId x, double s);
  TensorId div_scalar(const std::string& name, TensorId x, double s);
  TensorId pow_scalar(const std::string& name, TensorId x, double exponent);
  TensorId rsqrt(const std::string& name, TensorId x);
  TensorId neg(const std::string& name, TensorId x);
  TensorId where(const std::string& name, TensorId cond, TensorId a, TensorId b);
  TensorId cast(const std::string& name, TensorId x, DType to);

  // Reductions and linear algebra.
  TensorId softmax(const std::string& name, TensorId x, int64_t dim);
  TensorId log_softmax(const std::string& name, TensorId x, int64_t dim);
  TensorId matmul(const std::string& name, TensorId a, TensorId b);
  TensorId mean(const std::string& name, TensorId x, int64_t dim, bool keepdim);
  TensorId sum(const std::string& name, TensorId x, int64_t dim, bool keepdim);

  // Pooling.
  TensorId max_pool2d(const std::string& name, TensorId x, const Pool2dSpec& spec);
  TensorId avg_pool2d(const std::string& name, TensorId x, const Pool2dSpec& spec);
  TensorId adaptive_avg_pool2d(const std::string& name, TensorId x, int64_t out_h, int64_t out_w);
  // F.interpolate(x, size=(out_h, out_w), mode="nearest" or "bilinear") on [N,C,H,W].
  TensorId upsample2d(const std::string& name, TensorId x, int64_t out_h, int64_t out_w, bool bilinear);

  TensorId dropout(const std::string& name, TensorId x, double p);

  // Megatron sequence parallelism over `ranks` tensor-parallel ranks along axis `dim` (op_kind.h):
  // the all-gather of a sequence shard (into_buffer: into Megatron's persistent gather buffer, as
  // a column-parallel linear with sequence_parallel does) and the reduce-scatter to one.
  TensorId all_gather(const std::string& name, TensorId x, int64_t dim, int64_t ranks, bool into_buffer);
  TensorId reduce_scatter(const std::string& name, TensorId x, int64_t dim, int64_t ranks);

  // Data movement. Views share storage; contiguous copies only when the input is not contiguous.
  TensorId view(const std::string& name, TensorId x, std::vector<int64_t> shape);  // one -1 allowed
  TensorId flatten(const std::string& name, TensorId x, int64_t start_dim);
  TensorId permute(const std::string& name, TensorId x, std::vector<int64_t> perm);
  TensorId transpose(const std::string& name, TensorId x, int64_t d0, int64_t d1);
  TensorId slice(const std::string& name, TensorId x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
  TensorId select(const std::string& name, TensorId x, int64_t dim, int64_t index);
  TensorId expand(const std::string& name, TensorId x, std::vector<int64_t> shape);
  TensorId contiguous(const std::string& name, TensorId x);
  // F.pad(x, pads, mode="constant"): pads as PyTorch orders them (last dimension first, a
  // (before, after) pair per dimension), each >= 0. Always a new tensor, even with nothing to pad
  // (constant_pad_nd clones).
  TensorId pad(const std::string& name, TensorId x, std::vector<int64_t> pads);
  // torch.roll: a new tensor of x's shape.
  TensorId roll(const std::string& name, TensorId x);
  // torchvision.ops.roi_align / roi_pool of `features` [N,C,H,W] at `rois` [K,4] (and their
  // batch indices [K], kNone when the rois carry them): a new [K, C, out_h, out_w] tensor.
  TensorId roi_align(const std::string& name, TensorId features, TensorId rois,
                     TensorId batch_indices, int64_t out_h, int64_t out_w);
  // torch.split(x, size, dim): views, one autograd node whose backward makes one gradient.
  std::vector<TensorId> split(const std::string& name, TensorId x, int64_t split_size, int64_t dim);
  TensorId cat(const std::string& name, const std::vector<TensorId>& xs, int64_t dim);
  // torch.chunk: views along `dim`, each ceil(n / chunks) long (the last may be shorter, and there
  // may be fewer than `chunks`, as in PyTorch). One Slice op per piece, named "<name>.<i>".
  std::vector<TensorId> chunk(const std::string& name, TensorId x, int64_t chunks, int64_t dim);
  // Views valid on any layout; the result keeps the input's contiguity.
  TensorId unsqueeze(const std::string& name, TensorId x, int64_t dim);
  TensorId squeeze(const std::string& name, TensorId x, int64_t dim);  // dim must have size 1
  // x.view(...) that only splits dimension `dim` into `sizes` (one -1 allowed). Unlike view(), valid
  // on a non-contiguous tensor (a slice of GPT-2's fused qkv): splitting one dimension always
  // keeps the strides expressible. Recorded as a View op.
  TensorId unflatten(const std::string& name, TensorId x, int64_t dim, std::vector<int64_t> sizes);
  // x.reshape(shape): a view of a contiguous tensor; otherwise a contiguous copy (op `name`),
  // viewed (op `name`.view), as reshape's clone + _unsafe_view. Contiguity is the builder's flag, so
  // a layout PyTorch could still view (a transposed size-1 dimension) counts as a copy.
  TensorId reshape(const std::string& name, TensorId x, std::vector<int64_t> shape);

  // Calls on tensors autograd never tracks (attention masks, position ids, rotary tables) that have
  // no op kind of their own. They are recorded as Opaque ops: a fresh output and, since no input
  // requires grad, no autograd node. REQUIRES (checked, HEADROOM_CHECK): no input depends on a
  // parameter.
  // torch.ones / zeros / full / arange / torch.tensor: a new tensor from nothing.
  TensorId factory(const std::string& name, std::vector<int64_t> shape, DType dtype);
  // a < b, a == b, ...: a bool tensor of the broadcast shape.
  TensorId compare(const std::string& name, TensorId a, TensorId b);
  TensorId rsub_scalar(const std::string& name, TensorId x, double s);  // s - x
  TensorId masked_fill(const std::string& name, TensorId x, TensorId mask, double value);
  // x.masked_fill_(mask, value): the output aliases x in the graph. (The simulator's Opaque rule
  // gives every output a fresh buffer, so it costs one transient copy of x there.)
  TensorId masked_fill_(const std::string& name, TensorId x, TensorId mask, double value);
  // x[indices]: advanced indexing on dimension 0; shape indices.shape + x.shape[1:].
  TensorId index(const std::string& name, TensorId x, TensorId indices);

  // Losses: everything from here on is the loss stage.
  void begin_loss();
  // F.cross_entropy (mean): log_softmax over dimension 1, then nll_loss. Logits [N,C] with
  // targets [N], or [N,C,d1..dk] with [N,d1..dk] (per pixel / per position, class dimension 1).
  TensorId cross_entropy(const std::string& name, TensorId logits, TensorId target, double weight = 1.0);
  // F.nll_loss (mean) of log-probabilities, shapes as cross_entropy's. PyTorch 1.13's
  // nll_loss_nd calls nll_loss for [N,C], nll_loss2d for [N,C,H,W], and for any other rank
  // views the input as [N,C,1,-1] (after .contiguous()) and the target as [N,1,-1] first.
  TensorId nll_loss(const std::string& name, TensorId log_probs, TensorId target);
  TensorId mse_loss(const std::string& name, TensorId out, TensorId target);
  // F.binary_cross_entropy_with_logits, F.l1_loss and F.smooth_l1_loss (mean; beta 1): a float
  // target shaped like `out`.
  TensorId bce_with_logits_loss(const std::string& name, TensorId out, TensorId target);
  TensorId l1_loss(const std::string& name, TensorId out, TensorId target);
  TensorId smooth_l1_loss(const std::string& name, TensorId out, TensorId target);
  void set_loss(TensorId loss) { g_.loss = loss; }
  void mark_output(TensorId t) { g_.outputs.push_back(t); }
  void note(std::string text) { g_.notes.push_back(std::move(text)); }
  // Python locals: `hold(t)` keeps t referenced until the current scope is closed by
  // `release_holds(scope)`, i.e. until the last op emitted before that call finishes.
  size_t open_scope() const { return pending_holds_.size(); }
  void hold(TensorId t) { pending_holds_.push_back(t); }
  void release_holds(size_t scope);
  // A Python reference recorded rather than written: t stays referenced until op `until` finishes
  // (a captured module, where the lifetime of every tensor was observed). No-op when `until` is
  // not after t's producer.
  void hold_until(TensorId t, OpId until);
  // How many ops have been written; the last one is op_count() - 1.
  OpId op_count() const { return static_cast<OpId>(g_.ops.size()); }

  // References that outlive Python scopes, as generate() keeps them across loop iterations:
  // `t` stays referenced until op `until` finishes (the cache slot replaced by torch.cat, the
  // next-token logits rebound in the next iteration).
  void keep_until(TensorId t, OpId until) { g_.holds.push_back({t, until}); }
  // An input the caller drops after op `until` (see Graph::input_releases).
  void release_input_after(TensorId input, OpId until) { g_.input_releases.push_back({input, until}); }
  // Marks `t`'s storage as KV cache (Graph::kv_cache).
  void mark_kv_cache(TensorId t) { g_.kv_cache.push_back(g_.storage_root(t)); }
  OpId last_op() const { return static_cast<OpId>(g_.ops.size()) - 1; }

  const Tensor& tensor(TensorId id) const { return g_.tensor(id); }
  const std::vector<int64_t>& shape(TensorId id) const { return g_.tensor(id).shape; }
  // Whether a tensor's memory is laid out contiguously in its shape order.
  bool is_contiguous(TensorId id) const { return contiguous_.at(static_cast<size_t>(id)); }
  // Whether a 4-D tensor is stored channels-last (NHWC strides; Tensor::channels_last).
  bool is_channels_last(TensorId id) const { return g_.tensors.at(static_cast<size_t>(id)).channels_last; }

  // ---- Importer additions (ONNX frontend, defined in builder_import.cc): leaves of any dtype,
  // layers over parameters that already exist with per-axis geometry, multi-axis reductions and a
  // generic op. Every size is checked; bad geometry is an InputError naming the op. ----
  TensorId parameter(const std::string& name, std::vector<int64_t> shape, DType dtype);
  const Op& op(OpId id) const { return g_.op(id); }
  // nn.Conv2d's call with existing weight [out, in/groups, kh, kw] and bias [out] (or kNone); the
  // kernel comes from the weight, the rest of `w` from the caller.
  TensorId conv2d_with(const std::string& module, TensorId x, TensorId weight, TensorId bias, const Window2d& w,
                       int64_t groups);
  // nn.ConvTranspose2d's call with existing weight [in, out, kh, kw] and bias [out] (or kNone):
  // output size per axis (in - 1) * stride - 2 * pad + dilation * (kernel - 1) + output_padding + 1,
  // output_padding smaller than stride or dilation (PyTorch's check). Groups other than 1 are an
  // InputError: PyTorch 1.13's CPU kernel (slow_conv_transpose2d) runs them one group at a time
  // through narrow/cat copies, which headroom does not model.
  TensorId conv_transpose2d_with(const std::string& module, TensorId x, TensorId weight, TensorId bias,
                                 const Window2d& w, std::vector<int64_t> output_padding, int64_t groups);
  // Batch norm over dimension 1 of an input of rank >= 2 (BatchNorm1d/2d/3d make the same calls).
  TensorId batch_norm_with(const std::string& module, TensorId x, TensorId weight, TensorId bias,
                           TensorId running_mean, TensorId running_var, bool training);
  // x @ W (+ b) with W stored [in, out]: a Linear op with inputs (x, W[, b]), as addmm records it
  // (same allocations, saved tensors and gradients as linear with W [out, in]). Any rank of x.
  TensorId linear_in_out(const std::string& name, TensorId x, TensorId weight, TensorId bias = kNone);
  TensorId max_pool2d_with(const std::string& name, TensorId x, const Window2d& w);
  TensorId avg_pool2d_with(const std::string& name, TensorId x, const Window2d& w);
  // torch.mean / torch.sum over several dimensions in one call (one op, one output).
  TensorId mean_dims(const std::string& name, TensorId x, std::vector<int64_t> dims, bool keepdim);
  TensorId sum_dims(const std::string& name, TensorId x, std::vector<int64_t> dims, bool keepdim);
  // An op headroom has no kind for, recorded as Opaque: fresh outputs of the given shapes and
  // dtypes; when autograd records it, it keeps every input and its backward allocates a gradient
  // per input that needs one (the rule of an elementwise op that saves its inputs). Unlike the
  // untracked helpers above, inputs may depend on parameters. With attrs.inplace the one output
  // is input 0's storage (x.hardswish_(), x.silu_()); in training autograd then keeps a copy of
  // input 0 made before the write (op_rules.cc).
  struct OpaqueOutput {
    std::vector<int64_t> shape;
    DType dtype = DType::F32;
  };
  std::vector<TensorId> opaque(const std::string& name, std::vector<TensorId> inputs,
                               const std::vector<OpaqueOutput>& outputs, OpAttrs attrs = {});

  // x @ W^T with W stored quantized in `stored` (the packed weight first, then its state):
  // output x.shape[:-1] + [out_features] in x's dtype. `temp_bytes` / `aux_bytes`: the kernel's
  // temporaries (OpAttrs). REQUIRES: x's last dimension is the layer's in_features.
  TensorId quant_linear(const std::string& name, TensorId x, const std::vector<TensorId>& stored,
                        int64_t out_features, int64_t temp_bytes, int64_t aux_bytes);
  // A frozen parameter that packs `values_per_element` model values per stored element.
  TensorId packed_parameter(const std::string& name, std::vector<int64_t> shape, DType dtype, int values_per_element);

  Graph finish();

 private:
  // Marks a 4-D output channels-last (and so not contiguous).
  void set_channels_last(TensorId id);
  TensorId add_tensor(const std::string& name, std::vector<int64_t> shape, DType dtype, TensorRole role, int batch_axis);
  OpId add_op(OpKind kind, const std::string& name, std::vector<TensorId> inputs, OpAttrs attrs);
  TensorId add_output(OpId op, std::vector<int64_t> shape, DType dtype, TensorId alias_of = kNone,
                      bool contiguous = true);
  TensorId elementwise(OpKind kind, const std::string& name, std::vector<TensorId> inputs, OpAttrs attrs = {});
  TensorId unary(OpKind kind, const std::string& name, TensorId x, OpAttrs attrs = {}, int64_t flops_per_elem = 1);
  // MaxPool2d or AvgPool2d (the public max_/avg_pool2d and their _with forms).
  TensorId pool2d(OpKind kind, const std::string& name, TensorId x, const Pool2dSpec& spec);
  TensorId pool2d_with(OpKind kind, const std::string& name, TensorId x, const Window2d& w);
  // Targets of class scores [N,C,d...] must be [N,d...]; InputError otherwise.
  void check_class_targets(const std::string& name, const std::vector<int64_t>& scores,
                           const std::vector<int64_t>& targets) const;
  // A loss with a 0-dim output over an input and a target of the same shape.
  TensorId pointwise_loss(OpKind kind, const std::string& name, TensorId out, TensorId target, int flops_per_element);
  std::string unique_name(const std::string& name);
  void finish_op(OpId op, int64_t flops);
  // Whether t is computed from a parameter (so autograd would track it). Memoized in tracked_.
  bool depends_on_parameter(TensorId t);
  TensorId untracked(const std::string& name, std::vector<TensorId> inputs, std::vector<int64_t> shape,
                     DType dtype, OpAttrs attrs = {}, TensorId alias_of = kNone);

  Graph g_;
  DType act_;
  OpStage stage_ = OpStage::Model;
  std::vector<bool> contiguous_;
  std::unordered_map<std::string, int> name_uses_;  // only counted: no order read
  std::vector<TensorId> pending_holds_;
  std::vector<int8_t> tracked_;  // per tensor: -1 unknown, 0 no, 1 depends on a parameter
};

// Broadcast two shapes as PyTorch does; InputError names `what` when they do not broadcast.
std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                      const std::string& what);

}  // namespace headroom
