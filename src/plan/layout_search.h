// plan MODEL --gpus N --gpu NAME: the parallel layout that trains fastest within each GPU's
// memory. Every engine (DDP, DeepSpeed ZeRO 1-3, FSDP full and grad-op sharding) is tried at the
// largest micro-batch that fits, with accumulation making up the global batch; each candidate is
// one rank's program re-simulated by the planner's PlanContext (the same interpreter, allocator
// and roofline as estimate and plan), and its communication comes from plan/collectives.h.
//
// Each engine is also tried with every transformer block checkpointed (plan/layout_fit.h), and
// when no engine fits, the offload families (ZeRO-2 / ZeRO-3 / FSDP with CPU offload).
//
// Ranking: step time = compute (the roofline of the rank's program, all micro-batches, recompute
// included) + the host-link traffic of offloading + the communication that the backward pass cannot hide (DDP buckets, ZeRO's overlap_comm and FSDP's
// prefetch overlap collectives with the backward: exposed = max(0, comm - backward), backward
// taken as 2/3 of the compute, the cost model's backward_factor of 2). Megatron tensor
// parallelism (T = 2, 4, 8 within a machine, with DDP or ZeRO-1, 2, 3 over N / T) adds its activation
// all-reduces in full (plan/tensor_parallel_comm.h); with sequence parallelism (Megatron's
// layouts only: TP x DDP and ZeRO-1, and the pipelines' TP > 1) the all-reduces become
// reduce-scatters and all-gathers of the same bytes, and selective recompute is tried before
// full. The sequence- and pipeline-parallel families run on Megatron-LM's own DDP (--megatron:
// its fp32 main_grad buffer; ZeRO-1 is its distributed optimizer; schedule/interpreter_megatron.cc). Megatron pipeline parallelism (P x T x ZeRO-1, 1F1B and interleaved with v = 2 and 4
// model chunks where the stage's layers divide, plan/pipeline_layouts.h) adds its bubble and p2p
// sends; its memory is its peak stage's program, every block of the stage checkpointed when the
// plain program does not fit.
//
// Invariants: a ranked layout's re-simulated device total per GPU is <= the budget; ranked is
// ordered by step time, then engine order; every engine is either ranked or rejected with a
// reason (a tensor-parallel size whose rank graph cannot be built once, for both its engines);
// the output is deterministic, whatever the threads (families are searched apart, each with its
// own PlanContext, and merged in family order).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "estimate/estimate.h"
#include "plan/collectives.h"
#include "plan/layout_fit.h"
#include "plan/pipeline_layouts.h"
#include "util/error.h"

namespace headroom {

struct LayoutRequest {
  EstimateOptions run;                  // model, batch, optimizer, precision, GPU; no layout
  int64_t gpus = 0;
  std::optional<int64_t> global_batch;  // default: run.batch x gpus (run.batch per GPU)
  std::optional<double> interconnect_bytes_per_s;
  // Threads searching the families at once (0: one per hardware thread; 1: sequential). The result does not depend on it (outcomes are merged in
  // family order); tests compare the two.
  int threads = 0;
};

struct LayoutOption {
  std::string engine;  // "DDP", "ZeRO-1", ..., "FSDP full", "FSDP grad-op"
  ParallelOptions parallel;
  int64_t micro_batch = 0;
  int64_t micro_batches = 1;
  int64_t peak_bytes = 0;  // device total per GPU (context + reserved)
  double compute_ms = 0;     // the rank's simulated step: forward, backward, recompute, optimizer
  double optimizer_ms = 0;   // of which the optimizer steps (on the host CPU for offload families)
  StepCommunication comm;   // data-parallel collectives (overlap the backward)
  double exposed_comm_ms = 0;
  StepCommunication tensor_comm;  // tensor-parallel all-reduces (never hidden): tensor_parallel_comm.h
  int64_t offload_bytes = 0;  // host-link traffic per step of an offload family (plan/offload_traffic.h)
  double offload_ms = 0;
  PipelineOverhead pipeline;  // bubble and p2p sends of a pipeline layout (plan/pipeline_layouts.h)
  bool checkpointed = false;  // some recompute (plan/layout_fit.h): recompute != None
  Recompute recompute = Recompute::None;  // every block (Full) or each attention core (Selective)
  MemoryPlan plan;            // those checkpoints
  double step_ms = 0;
  double samples_per_s = 0;
};

struct LayoutRejection {
  std::string engine;
  std::string why;
};

struct LayoutPlan {
  std::string model;
  std::string gpu;
  int64_t gpus = 0;
  int64_t global_batch = 0;
  int64_t batch_per_gpu = 0;
  int64_t budget_bytes = 0;
  Interconnect link;
  std::vector<LayoutOption> ranked;
  std::vector<LayoutRejection> rejected;
  int evaluations = 0;
  EstimateOptions run;
};

Result<LayoutPlan> search_layouts(const LayoutRequest& request);

// The samples one rank runs per step: the global batch over the data-parallel size N / (T P) (the
// T P ranks of a tensor- and pipeline-parallel group run the same samples). `model_parallel`: T P.
int64_t rank_batch(const LayoutPlan& plan, int64_t model_parallel);

// The estimate options of a ranked layout (for --emit-deepspeed and reports).
EstimateOptions layout_options(const LayoutPlan& plan, const LayoutOption& option);

}  // namespace headroom
