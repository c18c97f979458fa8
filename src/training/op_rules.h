// What one op does to memory under PyTorch's eager execution, forward and backward: which buffers
// it allocates (outputs, extra outputs such as pooling indices or dropout masks, temporaries), in
// which order, what autograd saves for backward, and what the backward node allocates.
// Facts come from tools/autograd/derivatives.yaml and from allocation traces of PyTorch on CPU
// (docs/research/pytorch-cpu-op-traces.md); device differences come from DeviceProfile.
//
// A rule is a pure function of the op, the shapes, the device and whether autograd records.
// Plans refer to buffers by local index: Input(i), Output(j), Extra(k), Temp(t), Grad(i).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "training/device_profile.h"

namespace headroom {

struct RuleContext {
  const Graph& graph;
  const Op& op;
  const DeviceProfile& device;
  bool grad_mode = false;         // autograd records (training forward)
  bool module_training = false;   // modules in training mode (batch norm statistics, dropout)
  std::vector<bool> input_requires_grad;  // per op input
};

struct LocalEvent {
  enum class Kind : uint8_t { AllocOutput, AllocExtra, AllocTemp, FreeTemp, AllocGrad };
  Kind kind;
  int index = 0;       // output, extra, temp or grad index
  int64_t bytes = 0;   // for AllocTemp
  bool workspace = false;  // an AllocTemp that is a library workspace (cuDNN)
  // An AllocTemp that is a CUDA reduction's staging buffer: the reduction's index in
  // BackwardPlan::cuda_reductions (-1 otherwise).
  int32_t reduction = -1;
};

struct Ref {
  enum class Kind : uint8_t { Input, Output, Extra };
  Kind kind;
  int index;
};

struct ExtraBuffer {
  std::string name;  // "indices", "mask", "mean", "rstd"
  int64_t bytes = 0;
};

struct ForwardPlan {
  // Per output: -1 for a new buffer, or the index of the input whose storage it shares
  // (views, in-place ops, identity dropout).
  std::vector<int> output_alias;
  std::vector<ExtraBuffer> extras;
  std::vector<LocalEvent> events;  // allocation order inside the op
  std::vector<Ref> saved;          // kept until this op's backward node has run
  bool creates_node = false;       // an autograd node records this op
  int64_t output_bytes = -1;       // storage size of output 0 when it differs from its shape's
  // Output 0 is a view of Megatron's persistent all-gather buffer (sequence parallelism), which
  // the interpreter allocates on first use and keeps: no allocation by the op itself.
  bool into_gather_buffer = false;
};

// How a backward node produces the gradient of one of its inputs.
struct GradOut {
  int input = 0;
  enum class Kind : uint8_t {
    New,       // a new buffer of `bytes`
    Incoming,  // the incoming gradient itself (add, contiguous), no allocation
    ViewOfIncoming,  // a view of the incoming gradient (view, permute, narrow), no allocation
  };
  Kind kind = Kind::New;
  int64_t bytes = 0;
  // Layout of the produced gradient: dense in the forward tensor's own layout (contiguous, or
  // NHWC for a channels-last tensor), or not.
  bool contiguous = true;
};

struct BackwardPlan {
  std::vector<GradOut> grads;      // for inputs that require grad, in input order
  std::vector<LocalEvent> events;  // AllocGrad(g) refers to grads[g]; temporaries too
  // Every CUDA reduction whose staging the plan asked for (borrowed or not): what of the plan
  // depends on the GPU's SM counts (Program::cuda_reductions).
  std::vector<CudaReduction> cuda_reductions;
};

ForwardPlan forward_plan(const RuleContext& ctx);
// `incoming_contiguous`: whether the gradient arriving for the op's output is contiguous.
BackwardPlan backward_plan(const RuleContext& ctx, bool incoming_contiguous);

// Whether the op is differentiable with respect to input i at all (indices and targets are not).
bool differentiable_input(const Op& op, int input);

}  // namespace headroom
