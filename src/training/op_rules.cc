#include "training/op_rules.h"

#include <algorithm>
#include <optional>

#include "training/cpu_conv.h"
#include "training/cpu_conv_transpose.h"
#include "training/cuda_reduce.h"
#include "training/cudnn_workspace.h"
#include "training/kernel_events.h"
#include "util/checked.h"
#include "util/error.h"

namespace headroom {
namespace {

using K = LocalEvent::Kind;
using kernel_events::needs;

int64_t in_bytes(const RuleContext& c, int i) { return c.graph.tensor(c.op.inputs[static_cast<size_t>(i)]).bytes(); }
int64_t out_bytes(const RuleContext& c, int j) { return c.graph.tensor(c.op.outputs[static_cast<size_t>(j)]).bytes(); }
const Tensor& in_t(const RuleContext& c, int i) { return c.graph.tensor(c.op.inputs[static_cast<size_t>(i)]); }
const Tensor& out_t(const RuleContext& c, int j) { return c.graph.tensor(c.op.outputs[static_cast<size_t>(j)]); }
bool any_needs(const RuleContext& c) {
  return std::any_of(c.input_requires_grad.begin(), c.input_requires_grad.end(), [](bool b) { return b; });
}

// Every output a new buffer, allocated in order; nothing saved.
ForwardPlan fresh_outputs(const RuleContext& c) {
  ForwardPlan p;
  // Room for a workspace's borrow and return too (convolutions, matmuls): one allocation.
  p.output_alias.reserve(c.op.outputs.size());
  p.events.reserve(c.op.outputs.size() + 2);
  for (size_t j = 0; j < c.op.outputs.size(); ++j) {
    p.output_alias.push_back(-1);
    p.events.push_back({K::AllocOutput, static_cast<int>(j), 0});
  }
  p.creates_node = c.grad_mode && any_needs(c);
  return p;
}

// Outputs that share input 0's storage (views and in-place ops).
ForwardPlan aliased_outputs(const RuleContext& c) {
  ForwardPlan p;
  p.output_alias.reserve(c.op.outputs.size());
  for (size_t j = 0; j < c.op.outputs.size(); ++j) p.output_alias.push_back(0);
  p.creates_node = c.grad_mode && any_needs(c);
  return p;
}

void save(ForwardPlan& p, Ref::Kind kind, int index) { p.saved.push_back({kind, index}); }
void save_input(ForwardPlan& p, int i) { save(p, Ref::Kind::Input, i); }
void save_output(ForwardPlan& p, int j) { save(p, Ref::Kind::Output, j); }

int add_extra(ForwardPlan& p, std::string name, int64_t bytes) {
  p.extras.push_back({std::move(name), bytes});
  int k = static_cast<int>(p.extras.size()) - 1;
  p.events.push_back({K::AllocExtra, k, 0});
  return k;
}

int add_temp(std::vector<LocalEvent>& ev, int64_t bytes, int& counter) {
  ev.push_back({K::AllocTemp, counter, bytes});
  return counter++;
}

// A CUDA reduction's staging buffer and semaphores (training/cuda_reduce.h), borrowed after its
// result is allocated and returned before the call ends (measured on the H100 with 2.11, a
// Linear's bias gradient: +grad +buffer +semaphores -semaphores -buffer). Keyed on the CUDA
// profile, with its GPU's SM counts; the CPU's reductions borrow nothing.
void reduction_staging(const RuleContext& c, BackwardPlan& b, int& counter, const CudaReduction& r) {
  if (c.device.name != "cuda") return;
  b.cuda_reductions.push_back(r);
  const CudaReduceStaging s = cuda_reduce_staging(r, c.device.reduce_device);
  if (s.buffer_bytes == 0) return;
  std::vector<LocalEvent>& ev = b.events;
  int buffer = add_temp(ev, s.buffer_bytes, counter);
  ev.back().reduction = static_cast<int32_t>(b.cuda_reductions.size()) - 1;
  int semaphores = add_temp(ev, s.semaphore_bytes, counter);
  ev.push_back({K::FreeTemp, semaphores, 0});
  ev.push_back({K::FreeTemp, buffer, 0});
}

// sum_to of the output's gradient onto broadcast input i as one reduction over the broadcast
// dimensions: outer ones (a bias [C] of [rows, C]) or inner ones; other patterns are left out.
std::optional<CudaReduction> broadcast_reduction(const RuleContext& c, int i) {
  const auto& in = in_t(c, i).shape;
  const auto& out = out_t(c, 0).shape;
  if (in.size() > out.size()) return std::nullopt;
  const size_t lead = out.size() - in.size();
  // outer: every reduced dimension comes before every kept one; inner: after.
  bool seen_kept = false, seen_reduced = false, outer = true, inner = true;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    if ((d < lead ? 1 : in[d - lead]) == 1) {
      outer = outer && !seen_kept;
      seen_reduced = true;
    } else {
      inner = inner && !seen_reduced;
      seen_kept = true;
    }
  }
  const int64_t outputs = in_t(c, i).numel();
  if (outputs <= 0 || (!outer && !inner)) return std::nullopt;
  CudaReduction r;
  r.num_outputs = outputs;
  r.inputs_per_output = out_t(c, 0).numel() / outputs;
  r.innermost = !outer;
  return r;
}

// Backward that allocates a new gradient for every input that needs one, of that input's size.
BackwardPlan new_grads(const RuleContext& c) {
  BackwardPlan b;
  // Room for a temporary's borrow and return too: one allocation each.
  b.grads.reserve(c.op.inputs.size());
  b.events.reserve(c.op.inputs.size() + 2);
  for (size_t i = 0; i < c.op.inputs.size(); ++i) {
    if (!needs(c, static_cast<int>(i))) continue;
    b.grads.push_back({static_cast<int>(i), GradOut::Kind::New, in_bytes(c, static_cast<int>(i)), true});
    b.events.push_back({K::AllocGrad, static_cast<int>(b.grads.size()) - 1, 0});
  }
  return b;
}

// A gradient that reaches a broadcast input is reduced to the input's shape (sum_to, in the
// engine's validate_outputs): a new, smaller buffer when the shapes differ, the gradient itself
// otherwise.
GradOut passthrough_or_reduce(const RuleContext& c, int i, bool incoming_contiguous) {
  const Tensor& in = in_t(c, i);
  if (in.shape == out_t(c, 0).shape) return {i, GradOut::Kind::Incoming, 0, incoming_contiguous};
  return {i, GradOut::Kind::New, in.bytes(), true};
}

void push_grad(BackwardPlan& b, GradOut g) {
  b.grads.push_back(g);
  if (g.kind == GradOut::Kind::New) b.events.push_back({K::AllocGrad, static_cast<int>(b.grads.size()) - 1, 0});
}

// passthrough_or_reduce's gradient; a reduced one borrows the CUDA reduction's staging.
void push_broadcast_grad(const RuleContext& c, BackwardPlan& b, int i, bool incoming_contiguous, int& counter) {
  GradOut g = passthrough_or_reduce(c, i, incoming_contiguous);
  push_grad(b, g);
  if (g.kind != GradOut::Kind::New) return;
  if (std::optional<CudaReduction> r = broadcast_reduction(c, i)) reduction_staging(c, b, counter, *r);
}

// The convolution call in cuDNN's terms: a transposed convolution is the backward-data of the
// convolution whose input is its output.
ConvCall conv_call(const RuleContext& c) {
  const bool transposed = c.op.kind == OpKind::ConvTranspose2d;
  ConvCall k;
  k.input_bytes = transposed ? out_bytes(c, 0) : in_bytes(c, 0);
  k.output_bytes = transposed ? in_bytes(c, 0) : out_bytes(c, 0);
  k.weight_bytes = in_bytes(c, 1);
  const Tensor& x = transposed ? out_t(c, 0) : in_t(c, 0);
  const Tensor& y = transposed ? in_t(c, 0) : out_t(c, 0);
  k.batch = x.shape[0];
  k.in_channels = x.shape[1];
  k.out_channels = y.shape[1];
  k.out_h = y.shape[2];
  k.out_w = y.shape[3];
  const OpAttrs& a = c.op.attrs;
  if (a.kernel.size() == 2) k.kernel_h = a.kernel[0], k.kernel_w = a.kernel[1];
  if (a.stride.size() == 2) k.stride_h = a.stride[0], k.stride_w = a.stride[1];
  if (a.dilation.size() == 2) k.dilation_h = a.dilation[0], k.dilation_w = a.dilation[1];
  k.groups = a.groups;
  return k;
}

// Bytes a cuDNN call borrows under the device's workspace policy; `written` is the size of what
// the call writes (the output, or the gradient of an input or of the weight), `pass` which of the
// op's calls it is.
int64_t conv_workspace(const RuleContext& c, ConvPass pass, int64_t written) {
  switch (c.device.conv_workspace) {
    case ConvWorkspace::None: return 0;
    case ConvWorkspace::Activation: return written;
    case ConvWorkspace::Fixed: return c.device.conv_workspace_bytes;
    case ConvWorkspace::Cudnn9: {
      if (c.op.kind == OpKind::ConvTranspose2d && pass != ConvPass::BackwardFilter) {
        pass = pass == ConvPass::Forward ? ConvPass::BackwardData : ConvPass::Forward;
      }
      return cudnn9_conv_workspace(pass, conv_call(c));
    }
  }
  return 0;
}

// mean.dim and its backward divide by the element count, a Python-side number inside aten: a
// 0-dim float64 tensor (8 bytes) and its cast to the result dtype, made before `events` gets the
// division's result and freed after (measured on the CPU, 1.13: x.mean((2, 3)) of a [2,16,8,8]
// map -> output 128, then 8 and 4, both freed; MeanBackward1 -> 8, 4, the 8,192-byte gradient,
// then both freed). Host memory on CUDA (python_scalar_tensors off).
bool mean_scalar_temps(const RuleContext& c) {
  if (!c.device.python_scalar_tensors) return false;
  if (c.op.kind == OpKind::Mean) return true;
  const auto& s = c.graph.tensor(c.op.outputs[0]).shape;  // adaptive_avg_pool2d to 1x1 is mean
  return c.op.kind == OpKind::AdaptiveAvgPool2d && s.size() == 4 && s[2] == 1 && s[3] == 1;
}

// A mean divides by the element count, a Python-side number inside aten: a 0-dim
// float64 tensor and its cast to `bytes` (the result's dtype), both freed at once (see
// mean_scalar_temps).
void scalar_division_temps(std::vector<LocalEvent>& ev, int64_t bytes, int& counter) {
  int a = add_temp(ev, 8, counter), b = add_temp(ev, bytes, counter);
  ev.push_back({K::FreeTemp, b, 0});
  ev.push_back({K::FreeTemp, a, 0});
}

bool is_identity_perm(const std::vector<int64_t>& perm, const std::vector<int64_t>& in_shape) {
  // Moving only size-1 dimensions keeps the layout.
  std::vector<int64_t> moved;
  for (size_t i = 0; i < perm.size(); ++i) {
    int64_t p = perm[i] < 0 ? perm[i] + static_cast<int64_t>(perm.size()) : perm[i];
    if (in_shape[static_cast<size_t>(p)] != 1) moved.push_back(p);
  }
  return std::is_sorted(moved.begin(), moved.end());
}

}  // namespace

bool differentiable_input(const Op& op, int input) {
  switch (op.kind) {
    case OpKind::Embedding: return input == 1;
    case OpKind::NllLoss: return input == 0;
    case OpKind::MseLoss:
    case OpKind::BceWithLogitsLoss:
    case OpKind::L1Loss:
    case OpKind::SmoothL1Loss: return input == 0;
    case OpKind::Where: return input != 0;
    case OpKind::BatchNorm2d: return input <= 2;  // not the running statistics
    case OpKind::QuantLinear: return input == 0;  // the stored weight is frozen
    default: return true;
  }
}

ForwardPlan forward_plan(const RuleContext& c) {
  const Op& op = c.op;
  switch (op.kind) {
    case OpKind::Conv2d:
    case OpKind::ConvTranspose2d: {
      // The CPU profile runs PyTorch's CPU kernels (one file per convolution family); cuDNN makes
      // the output and borrows a workspace for either (a transposed convolution is cuDNN's
      // backward-data).
      ForwardPlan p = !c.device.onednn_conv                ? fresh_outputs(c)
                      : op.kind == OpKind::ConvTranspose2d ? cpu_conv_transpose_forward(c)
                                                           : cpu_conv_forward(c);
      int64_t ws = conv_workspace(c, ConvPass::Forward, out_bytes(c, 0));
      if (ws > 0) {
        // cuDNN borrows its workspace after the output exists and returns it before the call ends.
        p.events.push_back({K::AllocTemp, 0, ws, true});
        p.events.push_back({K::FreeTemp, 0, 0});
      }
      p.creates_node = c.grad_mode && any_needs(c);
      if (p.creates_node) {
        // ConvolutionBackward0 (both directions go through aten::convolution) keeps input and
        // weight whichever inputs need a gradient.
        save_input(p, 0);
        save_input(p, 1);
      }
      return p;
    }
    case OpKind::BatchNorm2d: {
      ForwardPlan p;
      p.output_alias.push_back(-1);
      p.creates_node = c.grad_mode && any_needs(c);
      int64_t ch = in_t(c, 0).shape[1] * 4;
      const bool cpu = c.device.batch_norm_cpu_temporaries;
      int t = 0;
      if (c.module_training) {
        // num_batches_tracked += 1 makes an int64 scalar; native_batch_norm returns the batch
        // mean and inverse std per channel (fp32), computes the statistics with two more
        // per-channel buffers on the CPU, then the output, then two transform buffers.
        // cudnn_batch_norm (PyTorch 2.x, aten/src/ATen/native/cudnn/BatchNorm.cpp) makes the
        // output first, then save_mean and save_var (measured on the H100: y, C*4, C*4; its
        // workspace and reserve space are empty for CUDNN_BATCHNORM_OPS_BN).
        if (!cpu) p.events.push_back({K::AllocOutput, 0, 0});
        if (cpu) p.events.push_back({K::AllocTemp, t, 8}), p.events.push_back({K::FreeTemp, t++, 0});
        int m = add_extra(p, "save_mean", ch);
        int r = add_extra(p, "save_invstd", ch);
        if (cpu) {
          int a = add_temp(p.events, ch, t), b2 = add_temp(p.events, ch, t);
          p.events.push_back({K::FreeTemp, a, 0});
          p.events.push_back({K::FreeTemp, b2, 0});
        }
        if (cpu) p.events.push_back({K::AllocOutput, 0, 0});
        if (p.creates_node) {
          save_input(p, 0);
          save(p, Ref::Kind::Extra, m);
          save(p, Ref::Kind::Extra, r);
        }
      } else {
        p.events.push_back({K::AllocOutput, 0, 0});
        if (p.creates_node) save_input(p, 0);
      }
      if (cpu) {
        int a = add_temp(p.events, ch, t), b2 = add_temp(p.events, ch, t);
        p.events.push_back({K::FreeTemp, a, 0});
        p.events.push_back({K::FreeTemp, b2, 0});
      }
      return p;
    }
    case OpKind::LayerNorm: {
      // layer_norm_cpu/_cuda compute on input.expect_contiguous(): a permuted input (ConvNeXt's
      // LayerNorm2d) is copied first and the copy freed when the call returns; autograd keeps the
      // input itself. Measured: permute(0,2,3,1) of a [2,8,4,4] fp32 map -> clone 1,024 bytes,
      // then Y 1,024, mean and rstd 128 each, then the clone freed.
      ForwardPlan p;
      int t = 0, copy = -1;
      if (!in_t(c, 0).contiguous) copy = add_temp(p.events, in_bytes(c, 0), t);
      {
        ForwardPlan f = fresh_outputs(c);
        p.output_alias = f.output_alias;
        p.creates_node = f.creates_node;
        p.events.insert(p.events.end(), f.events.begin(), f.events.end());
      }
      const auto& s = in_t(c, 0).shape;
      int64_t rows = 4;
      for (size_t i = 0; i + 1 < s.size(); ++i) rows = checked_mul(rows, s[i], "layer_norm stats");
      int m = add_extra(p, "mean", rows);
      int r = add_extra(p, "rstd", rows);
      if (copy >= 0) p.events.push_back({K::FreeTemp, copy, 0});
      if (p.creates_node) {
        save_input(p, 0);
        save(p, Ref::Kind::Extra, m);
        save(p, Ref::Kind::Extra, r);
      }
      return p;
    }
    case OpKind::Linear: {
      // mm / addmm keep self (mat1) for the weight's gradient and mat2, the weight, for the
      // input's (derivatives.yaml mm_mat2_backward / mm_mat1_backward). A parameter costs nothing
      // to keep; a weight the graph made does: autocast's 16-bit copy lives until this node's
      // backward has run, past the cast cache (measured on the H100 with 2.11: every bf16 weight
      // copy of gpt2 and llama is freed in the backward, right after its Linear's gradients).
      // release_variables() drops them in the node's member order: addmm (with a bias) the input
      // first, mm (without) the weight first (measured: gpt2's Conv1D and lm_head, llama's).
      ForwardPlan p = fresh_outputs(c);
      if (!p.creates_node) return p;
      const Tensor& w = in_t(c, 1);
      const bool keep_weight = needs(c, 0) && w.producer != kNone && w.alias_of == kNone;
      const bool biased = op.inputs.size() == 3;
      if (keep_weight && !biased) save_input(p, 1);
      if (needs(c, 1)) save_input(p, 0);
      if (keep_weight && biased) save_input(p, 1);
      return p;
    }
    case OpKind::Embedding: {
      ForwardPlan p = fresh_outputs(c);
      if (p.creates_node) save_input(p, 0);
      return p;
    }
    case OpKind::Relu:
    case OpKind::Hardtanh: {
      bool inplace = op.attrs.inplace;
      ForwardPlan p = inplace ? aliased_outputs(c) : fresh_outputs(c);
      if (!p.creates_node) return p;
      if (op.kind == OpKind::Relu) {
        save_output(p, 0);  // relu and relu_ keep their result
      } else if (inplace) {
        // hardtanh_ (ReLU6(inplace=True)) needs its input for backward, so autograd clones it
        // first: in training the in-place form costs what the out-of-place one does.
        int k = add_extra(p, "clone", in_bytes(c, 0));
        save(p, Ref::Kind::Extra, k);
      } else {
        save_input(p, 0);
      }
      return p;
    }
    case OpKind::Gelu:
    case OpKind::Silu:
    case OpKind::PowScalar: {
      ForwardPlan p = fresh_outputs(c);
      if (p.creates_node) save_input(p, 0);
      return p;
    }
    case OpKind::Tanh:
    case OpKind::Sigmoid:
    case OpKind::Rsqrt:
    case OpKind::Softmax:
    case OpKind::LogSoftmax: {
      ForwardPlan p = fresh_outputs(c);
      if (p.creates_node) save_output(p, 0);
      return p;
    }
    case OpKind::Mean: {
      // mean.dim's backward divides by the reduced count taken from self: 1.13 keeps self, 2.x
      // only its sizes (DeviceProfile::mean_keeps_input).
      ForwardPlan p = fresh_outputs(c);
      if (mean_scalar_temps(c)) {
        int t = 0;
        scalar_division_temps(p.events, dtype_size(out_t(c, 0).dtype), t);
      }
      if (p.creates_node && c.device.mean_keeps_input) save_input(p, 0);
      return p;
    }
    case OpKind::MulScalar:
    case OpKind::DivScalar: {
      // `x * 0.5`, `x / 8.0`: Python binds the float as a wrapped 0-dim float64 CPU tensor
      // (python_arg_parser, before the op runs), and MulBackward0/DivBackward0 save `other`
      // for self's gradient (derivatives.yaml mul.Tensor/div.Tensor): 8 bytes of CPU memory
      // per node (host memory on CUDA).
      ForwardPlan p = op.attrs.inplace ? aliased_outputs(c) : fresh_outputs(c);
      if (p.creates_node && c.device.python_scalar_tensors) {
        int k = add_extra(p, "scalar", 8);
        std::rotate(p.events.begin(), p.events.end() - 1, p.events.end());  // bound before the op
        save(p, Ref::Kind::Extra, k);
      }
      return p;
    }
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::AddScalar:
    case OpKind::Neg:
    case OpKind::Cast:
    case OpKind::Contiguous:
    case OpKind::Cat:
    case OpKind::Sum: {
      if (op.attrs.inplace) return aliased_outputs(c);
      return fresh_outputs(c);
    }
    case OpKind::Mul: {
      ForwardPlan p = fresh_outputs(c);
      if (p.creates_node) {
        if (needs(c, 0)) save_input(p, 1);
        if (needs(c, 1)) save_input(p, 0);
      }
      return p;
    }
    case OpKind::Div: {
      ForwardPlan p = fresh_outputs(c);
      if (p.creates_node) {
        save_input(p, 1);
        if (needs(c, 1)) save_input(p, 0);
      }
      return p;
    }
    case OpKind::Where: {
      ForwardPlan p = fresh_outputs(c);
      if (p.creates_node) save_input(p, 0);
      return p;
    }
    case OpKind::MatMul: {
      // matmul folds batch dimensions with reshape: an operand whose layout cannot be viewed that
      // way is copied, and bmm saves the operands it multiplies (the copies when there are any).
      // A contiguous tensor with its last two dimensions swapped folds as a view, and bmm reads
      // transposed matrices in place (BLAS / cuBLAS transpose flags): no copy.
      ForwardPlan p;
      p.output_alias.push_back(-1);
      p.creates_node = c.grad_mode && any_needs(c);
      int copies[2] = {-1, -1};
      for (int i = 0; i < 2; ++i) {
        if (!in_t(c, i).contiguous && !in_t(c, i).transposed_matrix) copies[i] = add_extra(p, i == 0 ? "lhs_copy" : "rhs_copy", in_bytes(c, i));
      }
      p.events.push_back({K::AllocOutput, 0, 0});
      if (p.creates_node) {
        // bmm saves self when mat2 needs grad and mat2 when self needs grad.
        if (needs(c, 1)) copies[0] >= 0 ? save(p, Ref::Kind::Extra, copies[0]) : save_input(p, 0);
        if (needs(c, 0)) copies[1] >= 0 ? save(p, Ref::Kind::Extra, copies[1]) : save_input(p, 1);
      }
      return p;
    }
    case OpKind::MaxPool2d: {
      ForwardPlan p = fresh_outputs(c);
      int64_t idx_bytes = checked_mul(out_t(c, 0).numel(), 8, "max_pool2d indices");
      if (p.creates_node) {
        int k = add_extra(p, "indices", idx_bytes);
        save_input(p, 0);
        save(p, Ref::Kind::Extra, k);
      } else if (c.device.max_pool_indices_without_grad) {
        int t = 0;
        add_temp(p.events, idx_bytes, t);
        p.events.push_back({K::FreeTemp, 0, 0});
      }
      return p;
    }
    case OpKind::AvgPool2d: {
      ForwardPlan p = fresh_outputs(c);
      if (p.creates_node) save_input(p, 0);
      return p;
    }
    case OpKind::Upsample2d:
    case OpKind::Pad:
    case OpKind::Roll:
      // upsample_{nearest,bilinear}2d_backward, constant_pad_nd_backward and roll's backward take
      // the sizes only (derivatives.yaml); each makes a new gradient (the default backward).
      return fresh_outputs(c);
    case OpKind::RoiAlign: {
      // torchvision's roi_align backward (_roi_align_backward, ops/roi_align.py's autograd
      // function) reads the rois and the input's sizes; the features are not kept.
      ForwardPlan p = fresh_outputs(c);
      if (p.creates_node) save_input(p, 1);
      return p;
    }
    case OpKind::AdaptiveAvgPool2d: {
      ForwardPlan p = fresh_outputs(c);
      if (mean_scalar_temps(c)) {
        int t = 0;
        scalar_division_temps(p.events, dtype_size(out_t(c, 0).dtype), t);
      }
      // A 1x1 output is computed as mean(dim=(-1,-2)) (aten adaptive_avg_pool2d); its
      // MeanBackward1 keeps the input where mean does (DeviceProfile::mean_keeps_input).
      // Other output sizes run _adaptive_avg_pool2d, whose backward reads self.
      const auto& os = out_t(c, 0).shape;
      const bool is_mean = os.size() == 4 && os[2] == 1 && os[3] == 1;
      if (p.creates_node && (!is_mean || c.device.mean_keeps_input)) save_input(p, 0);
      return p;
    }
    case OpKind::Dropout: {
      bool identity = !c.module_training || op.attrs.p <= 0.0;
      if (identity) {
        ForwardPlan p = aliased_outputs(c);
        p.creates_node = false;
        return p;
      }
      ForwardPlan p;
      p.output_alias.push_back(-1);
      p.creates_node = c.grad_mode && any_needs(c);
      int64_t n = in_t(c, 0).numel();
      int64_t mask = c.device.dropout_mask_same_dtype ? in_bytes(c, 0) : n;
      int k = add_extra(p, "mask", mask);
      p.events.push_back({K::AllocOutput, 0, 0});
      if (p.creates_node) save(p, Ref::Kind::Extra, k);
      return p;
    }
    case OpKind::View:
    case OpKind::Permute:
    case OpKind::Transpose:
    case OpKind::Slice:
    case OpKind::Select:
    case OpKind::Expand:
    case OpKind::Split:
      return aliased_outputs(c);
    case OpKind::AllGather: {
      if (!op.attrs.inplace) return fresh_outputs(c);  // gather_from_sequence_parallel_region
      // A column-parallel linear with sequence_parallel (Megatron-LM core/tensor_parallel/layers.py,
      // LinearWithGradAccumulationAndAsyncCommunication.forward) gathers its input into
      // get_global_memory_buffer().get_tensor(..., "mpu") and saves the shard it was given
      // (ctx.save_for_backward(input, weight)); its backward gathers the shard again into the
      // same buffer. So the shard is what autograd keeps, and the gathered tensor is a view of
      // the persistent buffer.
      ForwardPlan p;
      p.output_alias.push_back(-1);
      p.into_gather_buffer = true;
      p.creates_node = c.grad_mode && any_needs(c);
      if (p.creates_node) save_input(p, 0);
      return p;
    }
    case OpKind::ReduceScatter:
      return fresh_outputs(c);  // _reduce_scatter_along_first_dim: torch.empty(dim_size) of s/t
    case OpKind::NllLoss: {
      ForwardPlan p = fresh_outputs(c);
      int k = add_extra(p, "total_weight", dtype_size(out_t(c, 0).dtype));
      // nll_loss2d (per-pixel targets) sizes total_weight before the output, nll_loss after it.
      if (in_t(c, 0).shape.size() == 4) std::rotate(p.events.begin(), p.events.end() - 1, p.events.end());
      if (p.creates_node) {
        save_input(p, 0);
        // NllLossBackward0 keeps target too (derivatives.yaml nll_loss_forward): free when it is
        // the model's input, a buffer of its own when the graph made it (a causal LM's
        // shift_labels.contiguous(), measured on the H100 with 2.11: freed in the backward).
        if (in_t(c, 1).producer != kNone) save_input(p, 1);
        save(p, Ref::Kind::Extra, k);
      }
      return p;
    }
    case OpKind::BceWithLogitsLoss: {
      // binary_cross_entropy_with_logits is composite (aten/native/Loss.cpp): five buffers of
      // the input's size for the elementwise terms, three freed before the mean and two after
      // it (measured on the CPU, 1.13: x[6,10] -> +240 x5, -240 x3, +4 out, +8 +4 -4 -8 for the
      // mean's scalar, -240 x2). BinaryCrossEntropyWithLogitsBackward0 saves self and target.
      ForwardPlan p;
      p.output_alias.push_back(-1);
      p.creates_node = c.grad_mode && any_needs(c);
      int t = 0;
      int first = add_temp(p.events, in_bytes(c, 0), t);
      for (int i = 1; i < 5; ++i) add_temp(p.events, in_bytes(c, 0), t);
      for (int i = 4; i >= 2; --i) p.events.push_back({K::FreeTemp, first + i, 0});
      p.events.push_back({K::AllocOutput, 0, 0});
      if (c.device.python_scalar_tensors) scalar_division_temps(p.events, dtype_size(out_t(c, 0).dtype), t);
      p.events.push_back({K::FreeTemp, first, 0});
      p.events.push_back({K::FreeTemp, first + 1, 0});
      if (p.creates_node) {
        save_input(p, 0);
        save_input(p, 1);
      }
      return p;
    }
    case OpKind::L1Loss: {
      // l1_loss is composite: (input - target).abs() then mean, three autograd nodes in one call.
      // AbsBackward0 keeps the difference; the absolute values are freed after the mean
      // (measured on the CPU, 1.13: x[6,10] -> +240 diff, +240 abs, +4 out, +8 +4 -4 -8, -240).
      // Without autograd the difference is a temporary of the expression, freed before the mean.
      ForwardPlan p;
      p.output_alias.push_back(-1);
      p.creates_node = c.grad_mode && any_needs(c);
      int t = 0;
      int diff = -1;
      if (p.creates_node) {
        save(p, Ref::Kind::Extra, add_extra(p, "diff", in_bytes(c, 0)));
      } else {
        diff = add_temp(p.events, in_bytes(c, 0), t);
      }
      int abs_values = add_temp(p.events, in_bytes(c, 0), t);
      if (diff >= 0) p.events.push_back({K::FreeTemp, diff, 0});
      p.events.push_back({K::AllocOutput, 0, 0});
      if (c.device.python_scalar_tensors) scalar_division_temps(p.events, dtype_size(out_t(c, 0).dtype), t);
      p.events.push_back({K::FreeTemp, abs_values, 0});
      return p;
    }
    case OpKind::SmoothL1Loss:  // the same buffers as mse_loss (measured on the CPU, 1.13)
    case OpKind::MseLoss: {
      // The elementwise squared error is written into a buffer of the input's size that becomes
      // the storage of the returned 0-dim loss; a second buffer of that size is the reduction's
      // temporary.
      ForwardPlan p;
      p.output_alias.push_back(-1);
      p.creates_node = c.grad_mode && any_needs(c);
      p.output_bytes = in_bytes(c, 0);
      p.events.push_back({K::AllocOutput, 0, 0});
      int t = 0;
      add_temp(p.events, in_bytes(c, 0), t);
      p.events.push_back({K::FreeTemp, 0, 0});
      if (p.creates_node) {
        save_input(p, 0);
        save_input(p, 1);
      }
      return p;
    }
    case OpKind::QuantLinear: {
      // The kernel's temporaries live while it runs; the output is made after the dequantized
      // weight (bitsandbytes MatMul4Bit: F.linear(A, dequantize_4bit(B)...)). Autograd keeps the
      // input (MatMul4Bit / MatMul8bitLt save A; B is the stored weight).
      ForwardPlan p;
      p.output_alias.push_back(-1);
      p.creates_node = c.grad_mode && any_needs(c);
      int t = 0, aux = -1, main = -1;
      if (op.attrs.aux_bytes > 0) aux = add_temp(p.events, op.attrs.aux_bytes, t);
      if (op.attrs.temp_bytes > 0) main = add_temp(p.events, op.attrs.temp_bytes, t);
      if (aux >= 0) p.events.push_back({K::FreeTemp, aux, 0});
      p.events.push_back({K::AllocOutput, 0, 0});
      if (main >= 0) p.events.push_back({K::FreeTemp, main, 0});
      if (p.creates_node) save_input(p, 0);
      return p;
    }
    case OpKind::Opaque: {
      ForwardPlan p = op.attrs.inplace ? aliased_outputs(c) : fresh_outputs(c);
      if (p.creates_node) {
        for (size_t i = 0; i < op.inputs.size(); ++i) {
          if (i == 0 && op.attrs.inplace) {
            // The write destroys input 0, which the backward reads: autograd keeps a copy made
            // before the op (hardswish_, hardsigmoid_, silu_ clone self, as hardtanh_ above;
            // dropout_ keeps its input-sized noise tensor, the same bytes).
            int k = add_extra(p, "clone", in_bytes(c, 0));
            save(p, Ref::Kind::Extra, k);
          } else {
            save_input(p, static_cast<int>(i));
          }
        }
      }
      return p;
    }
  }
  HEADROOM_CHECK(false, "no forward rule for op kind " + std::string(op_kind_name(op.kind)));
}

BackwardPlan backward_plan(const RuleContext& c, bool incoming_contiguous) {
  const Op& op = c.op;
  switch (op.kind) {
    case OpKind::Softmax: {
      // CUDA's softmax_backward_cuda_out (aten/src/ATen/native/cuda/SoftMax.cu) computes
      // `Tensor tmp = grad * output` after the structured kernel has made grad_input, and frees it
      // when it returns (measured on the H100 with 2.11: llama's, bert's and gpt2's attention
      // probabilities, one temporary of the output's size per call). The CPU kernel has none
      // (DeviceProfile::softmax_backward_temp).
      BackwardPlan b = new_grads(c);
      if (c.device.softmax_backward_temp && needs(c, 0)) {
        int t = 0;
        add_temp(b.events, out_bytes(c, 0), t);
        b.events.push_back({K::FreeTemp, 0, 0});
      }
      return b;
    }
    case OpKind::QuantLinear: {
      // MatMul4Bit.backward: grad_A = grad_output @ dequantize_4bit(B): the weight is dequantized
      // again (the same temporaries as the forward), the gradient of the input is new.
      BackwardPlan b;
      int t = 0, aux = -1, main = -1;
      if (op.attrs.aux_bytes > 0) aux = add_temp(b.events, op.attrs.aux_bytes, t);
      if (op.attrs.temp_bytes > 0) main = add_temp(b.events, op.attrs.temp_bytes, t);
      if (aux >= 0) b.events.push_back({K::FreeTemp, aux, 0});
      if (needs(c, 0)) push_grad(b, {0, GradOut::Kind::New, in_bytes(c, 0), true});
      if (main >= 0) b.events.push_back({K::FreeTemp, main, 0});
      return b;
    }
    case OpKind::Add:
    case OpKind::AddScalar: {
      BackwardPlan b;
      int t = 0;
      for (size_t i = 0; i < op.inputs.size(); ++i) {
        if (needs(c, static_cast<int>(i))) push_broadcast_grad(c, b, static_cast<int>(i), incoming_contiguous, t);
      }
      return b;
    }
    case OpKind::Sub: {
      BackwardPlan b;
      int t = 0;
      if (needs(c, 0)) push_broadcast_grad(c, b, 0, incoming_contiguous, t);
      if (needs(c, 1)) push_grad(b, {1, GradOut::Kind::New, in_bytes(c, 1), true});
      return b;
    }
    case OpKind::Contiguous: {
      BackwardPlan b;
      if (needs(c, 0)) push_grad(b, {0, GradOut::Kind::Incoming, 0, incoming_contiguous});
      return b;
    }
    case OpKind::View: {
      // reshape of the gradient: a view when it is contiguous, a copy otherwise.
      BackwardPlan b;
      if (!needs(c, 0)) return b;
      if (incoming_contiguous) push_grad(b, {0, GradOut::Kind::ViewOfIncoming, 0, true});
      else push_grad(b, {0, GradOut::Kind::New, in_bytes(c, 0), true});
      return b;
    }
    case OpKind::Permute:
    case OpKind::Transpose: {
      BackwardPlan b;
      if (!needs(c, 0)) return b;
      std::vector<int64_t> perm = op.attrs.perm;
      if (op.kind == OpKind::Transpose) {
        perm.clear();
        for (size_t i = 0; i < in_t(c, 0).shape.size(); ++i) perm.push_back(static_cast<int64_t>(i));
        std::swap(perm[static_cast<size_t>(op.attrs.perm[0])], perm[static_cast<size_t>(op.attrs.perm[1])]);
      }
      bool identity = is_identity_perm(perm, in_t(c, 0).shape);
      // A gradient dense in the output's layout, permuted back, is dense in the input's: the
      // gradient of ConvNeXt's channels-last map (a channels-last convolution's grad_input)
      // permuted to [N,H,W,C] is contiguous, and layer_norm's backward copies nothing.
      auto dense = [](const Tensor& t) { return t.contiguous || t.channels_last; };
      bool layouts = op.kind == OpKind::Permute && (in_t(c, 0).channels_last || out_t(c, 0).channels_last) &&
                     dense(in_t(c, 0)) && dense(out_t(c, 0));
      push_grad(b, {0, GradOut::Kind::ViewOfIncoming, 0, incoming_contiguous && (identity || layouts)});
      return b;
    }
    case OpKind::Expand: {
      BackwardPlan b;
      int t = 0;
      if (needs(c, 0)) push_broadcast_grad(c, b, 0, incoming_contiguous, t);
      return b;
    }
    case OpKind::Cat: {
      // The gradient of each input is a narrow() view of the incoming gradient; it keeps a
      // contiguous layout only when every dimension before the cat dimension has size 1.
      BackwardPlan b;
      bool outer = true;
      for (int64_t d = 0; d < op.attrs.dim; ++d) outer = outer && out_t(c, 0).shape[static_cast<size_t>(d)] == 1;
      for (size_t i = 0; i < op.inputs.size(); ++i) {
        if (needs(c, static_cast<int>(i))) {
          push_grad(b, {static_cast<int>(i), GradOut::Kind::ViewOfIncoming, 0, incoming_contiguous && outer});
        }
      }
      return b;
    }
    case OpKind::Sum: {
      BackwardPlan b;
      if (needs(c, 0)) push_grad(b, {0, GradOut::Kind::ViewOfIncoming, 0, false});
      return b;
    }
    case OpKind::Linear: {
      // addmm/mm backward: grad.mm(W) for the input, grad.t().mm(x) for the weight (already in
      // the weight's layout), the bias gradient a sum over rows. Each mm first makes a
      // non-contiguous incoming gradient contiguous (a temporary per mm).
      // Without a bias, PyTorch 2.x makes the weight's gradient first
      // (DeviceProfile::mm_weight_grad_first).
      BackwardPlan b;
      int t = 0;
      std::vector<size_t> order;
      for (size_t i = 0; i < op.inputs.size(); ++i) order.push_back(i);
      if (op.inputs.size() == 2 && c.device.mm_weight_grad_first) std::swap(order[0], order[1]);
      for (size_t i : order) {
        if (!needs(c, static_cast<int>(i))) continue;
        int copy = -1;
        if (!incoming_contiguous && i < 2) copy = add_temp(b.events, out_bytes(c, 0), t);
        push_grad(b, {static_cast<int>(i), GradOut::Kind::New, in_bytes(c, static_cast<int>(i)), true});
        if (copy >= 0) b.events.push_back({K::FreeTemp, copy, 0});
        if (i == 2) {
          // The bias gradient sums the rows of grad (addmm's sum_to): a CUDA reduction.
          CudaReduction r;
          r.num_outputs = in_t(c, 2).numel();
          r.inputs_per_output = out_t(c, 0).numel() / std::max<int64_t>(1, r.num_outputs);
          reduction_staging(c, b, t, r);
        }
      }
      return b;
    }
    case OpKind::BatchNorm2d: {
      BackwardPlan b;
      int t = 0;
      int dead = -1;
      if (needs(c, 0) && c.device.batch_norm_cpu_temporaries) dead = add_temp(b.events, in_bytes(c, 0), t);
      // cudnn_batch_norm_backward allocates grad_input, then grad_weight and grad_bias (measured
      // on the H100); the CPU kernel makes the input's gradient last.
      const bool input_first = !c.device.batch_norm_cpu_temporaries;
      if (input_first && needs(c, 0)) push_grad(b, {0, GradOut::Kind::New, in_bytes(c, 0), true});
      if (needs(c, 1)) push_grad(b, {1, GradOut::Kind::New, in_bytes(c, 1), true});
      if (needs(c, 2)) push_grad(b, {2, GradOut::Kind::New, in_bytes(c, 2), true});
      if (!input_first && needs(c, 0)) push_grad(b, {0, GradOut::Kind::New, in_bytes(c, 0), true});
      if (dead >= 0) b.events.push_back({K::FreeTemp, dead, 0});
      return b;
    }
    case OpKind::LayerNorm: {
      // native_layer_norm_backward: a contiguous copy of a non-contiguous input first, then dX,
      // dgamma, dbeta, then grad.contiguous() of a non-contiguous incoming gradient; both copies
      // are freed when the call returns (measured: 1,024 + 1,024 bytes for the [2,4,4,8] case).
      BackwardPlan b;
      int t = 0, x_copy = -1, dy_copy = -1;
      if (!in_t(c, 0).contiguous) x_copy = add_temp(b.events, in_bytes(c, 0), t);
      for (const GradOut& g : new_grads(c).grads) push_grad(b, g);
      if (!incoming_contiguous) dy_copy = add_temp(b.events, out_bytes(c, 0), t);
      if (c.device.layer_norm_backward_temp) {
        int k = add_temp(b.events, checked_mul(2 * c.device.threads, in_t(c, 0).shape.back() * 4, "layer_norm temp"), t);
        b.events.push_back({K::FreeTemp, k, 0});
      }
      if (x_copy >= 0) b.events.push_back({K::FreeTemp, x_copy, 0});
      if (dy_copy >= 0) b.events.push_back({K::FreeTemp, dy_copy, 0});
      return b;
    }
    case OpKind::Conv2d:
    case OpKind::ConvTranspose2d: {
      if (c.device.onednn_conv) {
        return op.kind == OpKind::ConvTranspose2d ? cpu_conv_transpose_backward(c, incoming_contiguous)
                                                  : cpu_conv_backward(c, incoming_contiguous);
      }
      // cuDNN (ConvShared.cpp cudnn_convolution_backward): backward-data makes grad_input, then
      // borrows its workspace for the call; backward-filter the same with grad_weight; the bias
      // gradient comes last (measured on the H100: +dX +ws -ws +dW +ws -ws +db).
      BackwardPlan b;
      int t = 0;
      auto pass = [&](int input) {
        push_grad(b, {input, GradOut::Kind::New, in_bytes(c, input), true});
        int64_t ws = conv_workspace(c, input == 0 ? ConvPass::BackwardData : ConvPass::BackwardFilter, in_bytes(c, input));
        if (ws > 0) {
          b.events.push_back({K::AllocTemp, t, ws, true});
          b.events.push_back({K::FreeTemp, t++, 0});
        }
      };
      // An fp32 depthwise convolution runs PyTorch's own kernel instead (ConvUtils.h
      // use_cudnn_depthwise takes cuDNN only for half precision or channels-last;
      // DepthwiseConv2d.cu): no workspace, and the weight's gradient is allocated before the
      // input's (measured in mobilenet_v2's backward).
      const bool depthwise = op.kind == OpKind::Conv2d && op.attrs.groups > 1 && op.attrs.groups == in_t(c, 0).shape[1];
      if (depthwise && needs(c, 1)) pass(1);
      if (needs(c, 0)) pass(0);
      if (!depthwise && needs(c, 1)) pass(1);
      if (op.inputs.size() > 2 && needs(c, 2)) push_grad(b, {2, GradOut::Kind::New, in_bytes(c, 2), true});
      return b;
    }
    case OpKind::Dropout: {
      BackwardPlan b;
      if (needs(c, 0)) push_grad(b, {0, GradOut::Kind::New, in_bytes(c, 0), true});
      return b;
    }
    case OpKind::AllGather:
    case OpKind::ReduceScatter: {
      // Each is the other's backward: the all-gather's gradient is reduce-scattered into a new
      // shard (layers.py backward: sub_grad_input = torch.empty(dim_size)), the reduce-scatter's
      // is all-gathered into a new full tensor (mappings.py _gather_along_first_dim).
      BackwardPlan b;
      if (needs(c, 0)) push_grad(b, {0, GradOut::Kind::New, in_bytes(c, 0), true});
      return b;
    }
    case OpKind::Split: {
      // split_backward concatenates the outputs' gradients (zeros for missing ones): one buffer.
      BackwardPlan b;
      if (needs(c, 0)) push_grad(b, {0, GradOut::Kind::New, in_bytes(c, 0), true});
      return b;
    }
    case OpKind::BceWithLogitsLoss: {
      // sigmoid(input) - target, scaled by grad / numel: the gradient, then the mean's scalar.
      BackwardPlan b = new_grads(c);
      int t = 0;
      if (c.device.python_scalar_tensors) scalar_division_temps(b.events, dtype_size(out_t(c, 0).dtype), t);
      return b;
    }
    case OpKind::L1Loss: {
      // MeanBackward0 (grad.expand(sizes) / numel: a buffer of the input's size, after the
      // scalar's two temporaries), AbsBackward0 (sgn(diff) then grad * sgn: the input's
      // gradient), SubBackward0 passes it on (measured on the CPU, 1.13, x[6,10]: +8 +4 +240
      // -4 -8, +240 sgn, +240 grad, -240 sgn, -240 mean's gradient, -240 diff).
      BackwardPlan b;
      if (!needs(c, 0)) return b;
      int t = 0;
      int a = -1, s8 = -1;
      if (c.device.python_scalar_tensors) {
        s8 = add_temp(b.events, 8, t);
        a = add_temp(b.events, dtype_size(out_t(c, 0).dtype), t);
      }
      int mean_grad = add_temp(b.events, in_bytes(c, 0), t);
      if (a >= 0) {
        b.events.push_back({K::FreeTemp, a, 0});
        b.events.push_back({K::FreeTemp, s8, 0});
      }
      int sgn = add_temp(b.events, in_bytes(c, 0), t);
      push_grad(b, {0, GradOut::Kind::New, in_bytes(c, 0), true});
      b.events.push_back({K::FreeTemp, sgn, 0});
      b.events.push_back({K::FreeTemp, mean_grad, 0});
      return b;
    }
    case OpKind::Mean:
    case OpKind::AdaptiveAvgPool2d: {
      // The gradient is grad.expand(sizes) / count, a new tensor in the default (NCHW) layout:
      // not dense in a channels-last input's layout (LayerNorm2d's permute back before a mean:
      // layer_norm's backward then copies it, measured in the layernorm2d-head case).
      const bool dense = !in_t(c, 0).channels_last;
      if (!mean_scalar_temps(c) || !needs(c, 0)) {
        BackwardPlan b = new_grads(c);
        for (GradOut& g : b.grads) g.contiguous = g.contiguous && dense;
        return b;
      }
      BackwardPlan b;
      int t = 0;
      int a = add_temp(b.events, 8, t), b2 = add_temp(b.events, dtype_size(in_t(c, 0).dtype), t);
      push_grad(b, {0, GradOut::Kind::New, in_bytes(c, 0), dense});
      b.events.push_back({K::FreeTemp, b2, 0});
      b.events.push_back({K::FreeTemp, a, 0});
      return b;
    }
    default:
      return new_grads(c);
  }
}

}  // namespace headroom
