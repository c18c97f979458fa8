// The graph of one model at concrete sizes: tensors and the ops that make them, in the order eager
// PyTorch code runs them.
//
// Invariants (checked by Graph::validate):
//  - ids are dense: tensors[i].id == i, ops[i].id == i;
//  - ops are in execution order: every input of op i is a graph input, parameter, buffer, target or
//    an output of an op before i;
//  - a view (or the output of an in-place op) names the tensor whose storage it shares in
//    `alias_of`, which always points to an earlier tensor; storage_root() follows that chain;
//  - parameters and buffers have no producer; activations have exactly one.
// The named dimensions the graph was instantiated with (batch, seq, ...) are kept in `dims`;
// a frontend re-instantiates the graph for other values (the schedule does not depend on them).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/op_kind.h"

namespace headroom {

using TensorId = int32_t;
using OpId = int32_t;
inline constexpr int32_t kNone = -1;

enum class TensorRole : uint8_t {
  Input,      // a model input (images, token ids), live from the start
  Target,     // a loss target, live from the start in training
  Parameter,  // a trainable weight (requires grad)
  Buffer,     // non-trainable state (batch-norm running stats, rotary caches)
  Activation, // produced by an op
};

std::string_view tensor_role_name(TensorRole r);

// "[2,3,224,224]": a shape as error messages and reports print it.
std::string shape_text(const std::vector<int64_t>& shape);

struct Tensor {
  TensorId id = kNone;
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::F32;
  TensorRole role = TensorRole::Activation;
  OpId producer = kNone;
  // Storage sharing: the tensor this one is a view of, or the input an in-place op wrote into.
  TensorId alias_of = kNone;
  // Which axis scales with the batch size (-1: none). Kept for reports and re-instantiation.
  int8_t batch_axis = -1;
  // Set for parameters whose storage is shared with another parameter (GPT-2's tied lm_head):
  // they count once in weights and get one gradient.
  TensorId tied_to = kNone;
  // Whether the storage is laid out contiguously in `shape` order (permute/transpose views are
  // not). Matmul and reshape copy non-contiguous operands, which costs memory.
  bool contiguous = true;
  // x.transpose(-2, -1) of a contiguous x: not contiguous, but matmul folds its batch dimensions
  // with a view and BLAS reads the transposed matrices in place (no copy).
  bool transposed_matrix = false;
  // A 4-D [N,C,H,W] tensor stored as NHWC (PyTorch's channels_last; `contiguous` is false). Set
  // where a permute gives NHWC strides (ConvNeXt's LayerNorm2d permutes back from [N,H,W,C]) and
  // kept where PyTorch keeps it: convolutions on such an input, elementwise ops. The CPU
  // convolution rules run oneDNN's channels-last calls on it (training/cpu_conv.h).
  bool channels_last = false;
  // A parameter with requires_grad=False (--freeze, a LoRA base model): counted in
  // parameter_count(), but no gradient, no optimizer state, and autograd saves nothing for it.
  bool frozen = false;
  // How many model values one stored element packs: 2 for 4-bit values in a byte (nf4), 8 in an
  // int32 (GPTQ's qweight). parameter_count() counts values, as transformers' num_parameters().
  int8_t values_per_element = 1;
  // A graph input made with requires_grad=True: a pipeline stage's hidden state received from the
  // previous stage (Megatron's _communicate), whose gradient is sent back. Not a parameter: no
  // optimizer state, but autograd differentiates through it.
  bool input_requires_grad = false;
  bool requires_grad() const { return role == TensorRole::Parameter && !frozen; }

  int64_t numel() const;  // checked
  int64_t bytes() const;  // checked
};

// Attributes of an op. One plain struct for every kind; each kind reads the fields its comment
// in op_kind.h / builder.h names and ignores the others.
struct OpAttrs {
  std::vector<int64_t> kernel, stride, padding, dilation;  // spatial ops
  std::vector<int64_t> output_padding;  // conv_transpose2d: extra rows/columns on one side
  int64_t groups = 1;
  bool ceil_mode = false;
  bool inplace = false;     // relu_, hardtanh_, add_ (output aliases input 0)
  bool approximate_tanh = false;  // gelu
  bool training = true;     // batch norm and dropout: module in training mode
  double p = 0.0;           // dropout probability
  double scalar = 0.0;      // *_scalar ops, pow exponent, hardtanh bounds (min in scalar, max in scalar2)
  double scalar2 = 0.0;
  int64_t dim = -1;         // softmax, cat, slice, select, mean
  bool keepdim = false;
  std::vector<int64_t> perm;  // permute order
  int64_t start = 0, end = 0, step = 1;  // slice
  double loss_weight = 1.0;   // loss term weight (inception's 0.4 aux loss)
  bool shift_labels = false;  // next-token loss
  // log_softmax called with its dtype named (cross_entropy_loss: log_softmax(x, 1, x.dtype)):
  // autocast runs it in that dtype instead of float32.
  bool explicit_dtype = false;
  // QuantLinear: bytes of the kernel's main temporary (the dequantized weight, or int8's
  // quantized activations and int32 product) and of the auxiliary one (the dequantized absmax,
  // the fp16 copy of the input), each alive while the op runs, also in its backward.
  int64_t temp_bytes = 0, aux_bytes = 0;
};

enum class OpStage : uint8_t { Model, Loss };

struct Op {
  OpId id = kNone;
  OpKind kind = OpKind::Opaque;
  std::string name;  // module path, e.g. "layer1.0.conv1"; unique within the graph
  std::vector<TensorId> inputs;
  std::vector<TensorId> outputs;
  OpAttrs attrs;
  OpStage stage = OpStage::Model;
  int64_t flops = 0;        // forward floating-point operations
  int64_t bytes_moved = 0;  // bytes read and written by the forward
};

// A Python reference that keeps a tensor alive past its last use: a local variable of the
// reference forward() that is only dropped when the function returns (op `until` finishes).
struct Hold {
  TensorId tensor = kNone;
  OpId until = kNone;
};

struct Graph {
  std::string model;  // the model's name as the user wrote it
  std::map<std::string, int64_t> dims;  // named dimensions: batch, seq, ...
  std::vector<Tensor> tensors;
  std::vector<Op> ops;
  std::vector<TensorId> inputs;   // model inputs (role Input)
  std::vector<TensorId> targets;  // loss targets (role Target)
  std::vector<TensorId> outputs;  // model outputs (what inference returns)
  TensorId loss = kNone;          // the scalar loss, when the graph has a loss stage
  std::vector<Hold> holds;
  // Loss-stage tensors the training loop keeps referenced until backward returns (the unscaled
  // loss behind GradScaler's scaled one, partial losses held in Python variables).
  std::vector<TensorId> loss_terms;
  std::vector<std::string> notes;  // facts a report should state (e.g. "batch norm folded")
  // The Python class of the model's repeated blocks ("GPT2Block", "LlamaDecoderLayer"), for the
  // engine configs that wrap or checkpoint per block (report/engine_config.h); "" when unknown.
  std::string block_class;
  // Generation: storages that are a KV cache (the tensors DynamicCache holds, or the carried-in
  // cache of a graph that starts after the prefill); their buffers are reported as "kv cache".
  std::vector<TensorId> kv_cache;
  // Inputs whose caller drops them during the run (generate()'s carried state: the old cache
  // slot after torch.cat replaced it, the previous step's logits): the input's reference goes
  // when op `until` finishes. Other inputs live for the whole run.
  std::vector<Hold> input_releases;

  const Tensor& tensor(TensorId id) const { return tensors.at(static_cast<size_t>(id)); }
  const Op& op(OpId id) const { return ops.at(static_cast<size_t>(id)); }
  TensorId storage_root(TensorId id) const;
  bool is_weight(TensorId id) const;  // parameter or buffer

  int64_t parameter_count() const;  // tied parameters count once
  int64_t trainable_parameter_count() const;  // parameters that are not frozen
  int64_t weights_bytes() const;     // parameters + buffers, tied ones once
  int64_t input_bytes() const;       // inputs + targets

  // Throws std::logic_error when an invariant above is broken.
  void validate() const;
};

}  // namespace headroom
