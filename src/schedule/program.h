// A Program is the memory story of one run: an ordered list of allocation, free and retag events
// on buffers, grouped into steps (one step = one op of the forward, one autograd node of the
// backward, one optimizer action). It is what the schedule stage produces and what every
// allocator model in sim/ consumes (XLA's driver/algorithm split).
//
// Invariants (checked by validate_program):
//  - every buffer is allocated exactly once, freed at most once, after its allocation;
//  - a retag only touches a live buffer;
//  - steps cover the events in order without gaps: steps[i].end_event == steps[i+1].first_event;
//  - only optimizer steps carry a parameter update (Step::update), all of its counts positive;
//  - a staging buffer's reduction (Buffer::reduction) is listed in cuda_reductions.
// Buffers still live at the end (weights, optimizer state) are simply never freed.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "training/cuda_reduce.h"

namespace headroom {

enum class Category : uint8_t {
  Weights,             // parameters and buffers (and casted weight copies under autocast)
  Inputs,              // model inputs and loss targets
  Gradients,           // parameter gradients (param.grad)
  OptimizerState,      // momentum buffers, Adam moments, step counters
  SavedActivations,    // forward outputs that autograd keeps for backward
  Activations,         // other forward outputs (alive until their last use)
  ActivationGradients, // gradients of activations during backward
  Temporaries,         // allocated and freed inside one op
  Workspaces,          // cuBLAS handle workspaces and cuDNN convolution workspaces
  KvCache,             // generation: the keys and values DynamicCache keeps between forwards
};
inline constexpr size_t kCategoryCount = 10;
std::string_view category_name(Category c);
using CategoryBytes = std::array<int64_t, kCategoryCount>;

enum class Phase : uint8_t { Setup, Inference, Forward, Backward, Optimizer };
std::string_view phase_name(Phase p);

using BufferId = int32_t;

struct Buffer {
  int64_t bytes = 0;
  Category category = Category::Activations;
  std::string name;    // tensor or role name, e.g. "layer1.0.conv1" or "layer1.0.conv1.weight.grad"
  OpId op = kNone;     // the graph op that made it (kNone for setup and optimizer buffers)
  // A CUDA reduction's staging buffer: its reduction's index in Program::cuda_reductions, whose
  // SM counts size it (-1 otherwise; the semaphores beside it do not depend on the GPU).
  int32_t reduction = -1;
};

struct Event {
  enum class Kind : uint8_t { Alloc, Free, Retag };
  Kind kind = Kind::Alloc;
  Category category = Category::Activations;  // new category, for Retag
  BufferId buffer = 0;
};

// How an optimizer update launches its kernels: what the cost model counts launches by.
enum class UpdateKernels : uint8_t {
  PerTensor,  // torch.optim's single-tensor loop: a few elementwise kernels per tensor
  Foreach,    // torch.optim's foreach: the same kernels once per group of tensors (MultiTensorApply)
  Fused,      // one multi-tensor kernel per group of tensors (DeepSpeed's and apex's FusedAdam);
              // on the host, DeepSpeedCPUAdam's one vectorized pass
};

// The parameter update one optimizer step performs, as data for the cost model
// (cost/cost_model.h CostModel::update_ms): set by the interpreter on each Phase::Optimizer step
// that updates parameters, left empty (elements == 0) on every other step, zero_grad's included.
// It counts what this rank's step touches, in the sizes the interpreter gives the buffers:
//  - elements: parameter elements updated: the whole model for torch.optim under DDP, this rank's
//    partition of the flat group under ZeRO (ceil(P / d), as the partition buffers are sized),
//    FSDP's flat shards (padding included), Megatron's fp32 main params or their 1/d pieces;
//  - bytes: the bytes of the values updated (the optimizer's copy: the parameters themselves for
//    torch.optim, 4 bytes an element for DeepSpeed's fp32 partition and Megatron's main params); the
//    device roofline reads and writes the optimizer rule's traffic_per_param_byte times these;
//  - tensors: tensors the update loops over (a ZeRO partition is one flat tensor per group).
// Invariant: elements, bytes and tensors are all zero or all positive.
struct ParamUpdate {
  int64_t elements = 0;
  int64_t bytes = 0;
  int32_t tensors = 0;
  UpdateKernels kernels = UpdateKernels::PerTensor;
  bool on_host = false;  // runs on the host's CPU (ZeRO-Offload, FSDP CPUOffload), not the GPU
  bool empty() const { return elements == 0; }
};

struct Step {
  Phase phase = Phase::Setup;
  int32_t iteration = 0;  // training step number (1, 2, ...); 0 for setup and inference
  int32_t micro_batch = 0;
  OpId op = kNone;        // graph op of a forward/backward step
  std::string label;      // "layer1.0.conv1", "backward layer1.0.conv1", "adam step"
  int32_t first_event = 0;
  int32_t end_event = 0;
  bool recompute = false; // a forward op re-run in the backward (checkpointing)
  ParamUpdate update;     // an optimizer step's parameter update (empty for every other step)
};

// A copy between device and host memory (offloading). To host: it may start at the end of step
// `ready_step` (the data exists) and must be done by the end of step `deadline_step` (the device
// buffer is freed then). To device: it may start at the beginning of `ready_step` (the buffer is
// allocated then) and must be done by the beginning of `deadline_step` (the node that reads it).
struct Transfer {
  BufferId buffer = 0;  // the device buffer copied out of, or into
  int64_t bytes = 0;
  OpId op = kNone;      // the op of the plan whose saved activation this is
  bool to_host = true;
  int32_t ready_step = 0;
  int32_t deadline_step = 0;
};

// A state that lives in host memory (or on NVMe) for the whole run under ZeRO-Offload /
// ZeRO-Infinity / FSDP CPU offload: it never touches the device allocator, so it is listed
// here rather than as a buffer with events.
struct HostState {
  int64_t bytes = 0;
  std::string name;
  bool nvme = false;  // on the NVMe drive (ZeRO-Infinity), not in host memory
};

// What a run asks of the CUDA stack beyond its tensors: with lazy module loading the CUDA
// context grows with the libraries and kernels a run uses (estimate/cuda_context.h). Set by the
// interpreter from the ops it runs.
struct ContextUse {
  bool forward = false;               // an op ran (kernels and the cuBLAS handle loaded)
  bool convolution = false;           // a convolution ran (cuDNN)
  bool backward = false;              // backward() ran on the autograd engine's device thread
  bool convolution_backward = false;  // a convolution's backward ran
};

struct Program {
  std::vector<Buffer> buffers;
  std::vector<Event> events;
  std::vector<Step> steps;
  std::vector<Transfer> transfers;  // in issue order; empty without offloading
  std::vector<HostState> host;      // empty without engine offloading
  ContextUse context_use;
  // Every CUDA reduction the interpreter's backward plans sized staging for (training/cuda_reduce.h),
  // with ScheduleOptions' SM counts: the program depends on the GPU's SM counts only through
  // these, so on a GPU where cuda_reduce_staging borrows for the same reductions it is this
  // program with each staging buffer (Buffer::reduction) resized (fit --gpu all shares programs
  // so, estimate/fit_all.cc). The micro-batch fold keeps the list; a pack's resident set joins
  // its programs' lists and renumbers its buffers' indices.
  std::vector<CudaReduction> cuda_reductions;
};

// Throws std::logic_error when an invariant above is broken.
void validate_program(const Program& p);

// Bytes per category live just before event `event` runs (the program's end: events.size()).
CategoryBytes category_bytes_before(const Program& program, int32_t event);

}  // namespace headroom
