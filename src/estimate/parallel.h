// The parallel layout of an estimate (--gpus, --zero, --fsdp): validated here and turned into
// the Sharding rewrite that build_program applies, so the estimate is the simulated program of
// one rank. The per-GPU summary reads that rank's simulated program; it adds no formula.
//
// Invariants: a layout needs --gpus, a multiple of the tensor-parallel size T; ZeRO and FSDP exclude each other; sharding applies to
// training on CUDA in fp32 or bf16 (DeepSpeed and FSDP hold 16-bit parameters themselves,
// not through autocast).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "schedule/pipeline_schedule.h"
#include "schedule/program.h"
#include "schedule/sharding.h"
#include "sim/simulate.h"

namespace headroom {

enum class FsdpStrategy : uint8_t { Full, GradOp, NoShard };
std::optional<FsdpStrategy> parse_fsdp_strategy(std::string_view s);
std::optional<FsdpWrap> parse_fsdp_wrap(std::string_view s);  // "block", "param"

struct ParallelOptions {
  int64_t gpus = 0;  // 0: no layout (a single-GPU estimate, no per_gpu summary)
  std::optional<int> zero_stage;
  std::optional<FsdpStrategy> fsdp;
  // --fsdp-wrap: FSDP's units; unset: block where the model has repeated blocks, else param.
  std::optional<FsdpWrap> fsdp_wrap;
  std::optional<int64_t> reduce_bucket_elements;  // DeepSpeed reduce_bucket_size
  // --megatron: Megatron-LM's own DistributedDataParallel (contiguous fp32 main_grad buffer);
  // with --zero 1 its distributed optimizer (ShardingEngine::Megatron, schedule/sharding.h).
  bool megatron = false;
  int64_t tensor_parallel = 1;  // Megatron tensor parallelism: data-parallel size gpus / T
  bool sequence_parallel = false;  // Megatron sequence parallelism (needs T > 1)
  std::optional<OffloadDevice> offload_optimizer;  // --offload-optimizer cpu|nvme (estimate/offload.h)
  bool offload_params = false;                     // --offload-params cpu
  // Megatron pipeline parallelism (schedule/pipeline_split.h): P stages; data-parallel size gpus / (T * P).
  int64_t pipeline_parallel = 1;
  std::optional<PipelineScheduleKind> pipeline_schedule;  // default 1f1b
  std::optional<int64_t> virtual_stages;                  // interleaved: model chunks per rank
  bool pipeline_given() const { return pipeline_parallel != 1 || pipeline_schedule || virtual_stages; }
  PipelineScheduleKind schedule() const { return pipeline_schedule.value_or(PipelineScheduleKind::OneFOneB); }
  bool given() const {
    return gpus > 0 || zero_stage || fsdp || fsdp_wrap || reduce_bucket_elements || megatron || tensor_parallel != 1 || sequence_parallel || offload_optimizer ||
           offload_params || pipeline_given();
  }
};

struct PerGpu {
  std::string layout;             // "8 GPUs: data-parallel 8, DeepSpeed ZeRO-3"
  int64_t gpus = 1;
  int64_t data_parallel = 1;
  int64_t tensor_parallel = 1;
  bool sequence_parallel = false;
  // Pipeline parallelism: the stage reported (the one with the highest peak), the micro-batches
  // whose activations it holds at once, and every stage's peak (index = stage).
  int64_t pipeline_parallel = 1;
  std::string pipeline_schedule;  // "1f1b", "gpipe", "interleaved"; "" without pipeline
  int stage = 0;
  int in_flight_micro_batches = 0;
  int layers_per_stage = 0;  // L / P
  std::vector<int64_t> stage_peak_bytes;
  std::string engine;             // "ddp", "deepspeed", "fsdp", "megatron"
  std::string fsdp_wrap;          // FSDP's units: "block" or "param"; "" for other engines
  int zero_stage = 0;
  // Parameters, gradients and optimizer states one rank holds when the optimizer step begins
  // (the last simulated iteration): what the ZeRO paper's Figure 1 counts.
  int64_t model_states_bytes = 0;
  // Saved activations, other activations and activation gradients at the rank's peak.
  int64_t activations_bytes = 0;
  int64_t peak_bytes = 0;
  // What the engine keeps off the device for this rank (offloading): host memory and NVMe.
  int64_t host_bytes = 0;
  int64_t nvme_bytes = 0;
};

// InputError for an invalid layout. `training`, `cuda` and `low_precision` (--precision bf16)
// describe the run; `amp` is --precision amp-*.
Sharding resolve_sharding(const ParallelOptions& p, bool training, bool cuda, bool amp, bool keeps_gradients);

// FSDP's wrap for graph g (the graph one rank runs): --fsdp-wrap, or block where g has repeated
// blocks (what --emit fsdp writes) and param otherwise. InputError for block on a model
// without blocks. Leaves other engines alone.
void resolve_fsdp_wrap(const ParallelOptions& p, const Graph& g, Sharding& s);

// "one rank of 8 GPUs (tensor-parallel 2, DeepSpeed ZeRO-3)"; "" without a layout.
std::string describe_layout(const ParallelOptions& p);

PerGpu per_gpu_summary(const ParallelOptions& p, const Sharding& s, const Program& program, const SimResult& sim);

}  // namespace headroom
