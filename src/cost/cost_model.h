// The time side of a run: how long each step of a Program takes on a GPU of the catalog, how
// copies to and from host memory overlap with it, and how long loading the weights takes. A
// roofline per op (FLOPs against the device's peak for the op's dtype, bytes against its memory
// bandwidth, plus a launch cost), a fixed ratio for the backward, and a two-engine copy timeline
// for offloading (docs/planning.md). `plan` orders strategies with it, `estimate` reports step
// time and throughput with it (cost/run_time.h), `pack` loads weights with its host-link numbers.
//
// Every constant lives in CostConstants, with where its value comes from. docs/performance.md
// compares the model with published measurements (per-case errors).
//
// Invariants: times are non-negative and finite; an empty program takes 0 ms; the total of an
// iteration is compute + recompute + optimizer + stalls, each reported apart.
#pragma once

#include <cstdint>
#include <vector>

#include "cost/cost_constants.h"
#include "ir/graph.h"
#include "schedule/memory_plan.h"
#include "schedule/program.h"
#include "sim/device_catalog.h"
#include "training/optimizer.h"

namespace headroom {

// What one op costs forward and backward on a GPU (milliseconds).
struct OpCost {
  double forward_ms = 0;
  double backward_ms = 0;
};

class CostModel {
 public:
  CostModel(const GpuSpec& gpu, CostConstants constants = {});

  const GpuSpec& gpu() const { return gpu_; }
  const CostConstants& constants() const { return c_; }

  // REQUIRES: op belongs to g. `no_workspace`: the op runs a workspace-free convolution.
  OpCost op_cost(const Graph& g, const Op& op, bool no_workspace = false) const;
  // One optimizer step's parameter update (Step::update; 0 ms when it is empty), `kind`'s rule
  // giving the bytes read and written per updated byte (traffic_per_param_byte).
  //  - On the device, a roofline: traffic x update.bytes at the memory efficiency, plus its
  //    launches: optimizer_kernels_per_tensor per tensor (PerTensor), the same per group of
  //    foreach_tensors_per_launch tensors (Foreach), one per such group (Fused).
  //  - On the host: update.elements x host_ranks / the host's rate (DeepSpeedCPUAdam's for
  //    Fused, torch.optim's otherwise), times the rule's traffic over Adam's for another rule
  //    (a host update is bound by memory bandwidth as the device's is). No launches.
  double update_ms(const ParamUpdate& update, OptimizerKind kind) const;
  // One copy of `bytes` over the host link, either direction.
  double transfer_ms(int64_t bytes) const;
  // Loading `bytes` of weights in `tensors` tensors from host memory, pinned or pageable:
  // load_fixed + tensors x load_per_tensor + bytes / (link x host_link_efficiency [x pageable_factor]).
  double load_ms(int64_t bytes, int64_t tensors, bool pinned) const;
  // FLOP/s the op runs at: tensor cores for convolutions and GEMMs when the dtype has them
  // (fp32 convolutions use TF32, cuDNN's default; fp32 matmuls do not, PyTorch's default since
  // 1.12), the CUDA-core fp32 rate otherwise.
  double op_flops_per_s(const Graph& g, const Op& op) const;

 private:
  GpuSpec gpu_;
  CostConstants c_;
};

// The time of one training iteration (or of the inference pass) of a program.
struct IterationTime {
  double compute_ms = 0;     // forward and backward steps as scheduled
  double recompute_ms = 0;   // forward ops re-run by checkpointing
  double optimizer_ms = 0;  // the optimizer steps' updates (CostModel::update_ms), host ones included
  double stall_ms = 0;       // compute waiting for copies (offload deadlines, late prefetches)
  double transfer_ms = 0;    // busy time of the copy engines (overlapped or not)
  int64_t transfer_bytes = 0;
  double total_ms = 0;       // compute + recompute + optimizer + stall
  // FLOPs the counted steps execute: each op's forward FLOPs, x backward_factor for a backward
  // step, again for a recomputed forward (the optimizer's elementwise update is not counted).
  double flops = 0;
};

// `iteration`: the training iteration to time (the last one is the steady state); 0 for an
// inference program. `g`: the graph the program was built from; `plan`: its memory plan.
// Each optimizer step costs its own update (Step::update, set by the interpreter for every
// engine: the whole model for torch.optim, a rank's partition under ZeRO, FSDP's shards,
// Megatron's main params); a host step (ZeRO-Offload, FSDP CPUOffload) holds the timeline as
// the engines do: DeepSpeed does not overlap its CPU step with the GPU by default (the paper's
// delayed parameter update is not in DeepSpeed, issue 1260), nor does FSDP.
IterationTime iteration_time(const CostModel& model, const Graph& g, const Program& p, const MemoryPlan& plan,
                             OptimizerKind optimizer, int iteration);

// When each step of the program starts and ends on the timeline iteration_time() builds, in ms
// from the program's first step (every iteration and setup included; the clock runs the same way
// whatever `iteration` counts). A step's span holds its waits for copies due at its start and end,
// so a stall shows as a longer step. Within the counted iteration of a training program (its
// non-setup steps, contiguous), end_ms of the last step - start_ms of the first = total_ms, up to
// rounding. For reports (the plan page's memory-over-time chart); it does not change any time.
struct StepTimes {
  std::vector<double> start_ms;  // one per Program::steps
  std::vector<double> end_ms;
};
StepTimes step_times(const CostModel& model, const Graph& g, const Program& p, const MemoryPlan& plan,
                     OptimizerKind optimizer, int iteration);

}  // namespace headroom
