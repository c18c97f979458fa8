// Data-parallel sharding of the model states (ZeRO / FSDP): what ONE rank's program holds. It is a
// rewrite applied by build_program while it interprets the graph, like a MemoryPlan; the rank's
// Program is then replayed on the same allocator model as a single-GPU estimate
// (docs/distributed.md).
//
//   engine DeepSpeed (runtime/zero/stage_1_and_2.py DeepSpeedZeroOptimizer, stage3.py
//   DeepSpeedZeroOptimizer_Stage3): the model holds its parameters in the graph's dtype (16-bit
//   under --precision bf16); the optimizer holds a flat fp32 master partition and its Adam
//   moments, made when the engine is built (single_partition_of_fp32_groups =
//   partition.clone().float(), then initialize_optimizer_states());
//     stage 1: full gradients in param.grad until the step;
//     stage 2: each gradient is copied into the ipg bucket (reduce_bucket_size elements,
//              allocated by backward()) and reduced into the flat grads_in_partition; both are
//              released by _release_ipg_buffers() in step();
//     stage 3: parameters partitioned per tensor (partition_parameters.py _partition_param:
//              ceil(numel / dp) elements); each op gathers the full parameters it reads
//              (fetch_sub_module) and releases them after it (release_sub_module), with the next
//              op's prefetched; gradients as in stage 2;
//     step:    the fp32 gradient partition is made for the optimizer (get_flat_partition /
//              _prepare_fp32_grad_for_sub_group) and freed after it; FusedAdam allocates nothing.
//   engine Fsdp (torch/distributed/fsdp, 1.13): fsdp_wrap picks the units. Param: one op's
//   parameters are one unit; Block: one FlatParameter per repeated block plus the root unit
//   (schedule/fsdp_units.h, interpreter_fsdp_units.cc). Each parameter is sharded to
//   ceil(numel / dp) elements, kept in fp32 under MixedPrecision(param_dtype = the graph's 16-bit
//   dtype); _unshard() allocates the unit's full parameters in the compute dtype before it runs
//   (forward and backward; backward_prefetch BACKWARD_PRE gathers the next unit as well),
//   _reshard() frees them after the unit's forward (FULL_SHARD; never the root's) or after its
//   backward (SHARD_GRAD_OP); _post_backward_hook reduce-scatters the full gradient (a block's
//   flat gradient, padded) into a new fp32 shard and frees it; torch.optim.Adam then holds its
//   state per shard.
//
//   engine Megatron (Megatron-LM's own DistributedDataParallel, megatron/core/distributed/
//   distributed_data_parallel.py and param_and_grad_buffer.py; interpreter_megatron.cc): every
//   trainable parameter's gradient lives in one contiguous main_grad buffer (fp32 under bf16:
//   accumulate_allreduce_grads_in_fp32), allocated when the model is wrapped and never freed;
//   stage 0: Float16OptimizerWithFloat16Params, an fp32 main copy of every parameter and Adam on
//            it (18 bytes per bf16 parameter);
//   stage 1: --use-distributed-optimizer: the parameters also move into one contiguous padded
//            param_data buffer, the fp32 main params and Adam states cover this rank's 1/dp of
//            the buffer (6 + 12/dp bytes per parameter).
//
//   offload (schedule/offload.h documents each rule): DeepSpeed's offload_optimizer (cpu: ZeRO-Offload,
//   nvme: ZeRO-Infinity) moves the fp32 master, its gradient and the optimizer states to the
//   host (or NVMe) and runs the step there; offload_param (stage 3) and FSDP's
//   CPUOffload(offload_params=True) keep the parameter shards on the host and gather them to the
//   device per op. Host-resident states are Program::host entries, never device events.
//
// Invariants: data_parallel >= 1; zero_stage in 0..3; a layout with data_parallel == 1 and
// stage 0 under DeepSpeed in fp32 changes nothing (the program equals PyTorch's).
#pragma once

#include <cstdint>

namespace headroom {

enum class ShardingEngine : uint8_t { None, DeepSpeed, Fsdp, Megatron };
enum class OffloadDevice : uint8_t { None, Cpu, Nvme };
// FSDP's auto_wrap_policy: Param, one unit per op's parameters (the finest wrapping);
// Block, one unit per repeated block (transformer_auto_wrap_policy) plus the root unit holding
// every parameter outside the blocks (schedule/fsdp_units.h).
enum class FsdpWrap : uint8_t { Param, Block };

struct Sharding {
  ShardingEngine engine = ShardingEngine::None;  // None: plain PyTorch (DDP keeps a full replica)
  int data_parallel = 1;
  int zero_stage = 0;  // FSDP: FULL_SHARD 3, SHARD_GRAD_OP 2, NO_SHARD 0; Megatron: 1 = distributed optimizer
  // DeepSpeed's reduce_bucket_size (elements of the gradient dtype), the ipg bucket of stage 2
  // and 3. DeepSpeed's default is 5e8.
  int64_t reduce_bucket_elements = 500000000;
  bool prefetch_forward = true;   // gather the next op's parameters while one computes
  bool prefetch_backward = true;
  FsdpWrap fsdp_wrap = FsdpWrap::Param;  // FSDP only: what one FlatParameter holds
  OffloadDevice offload_optimizer = OffloadDevice::None;  // DeepSpeed zero_optimization.offload_optimizer
  bool offload_params = false;  // DeepSpeed stage 3 offload_param (cpu); FSDP CPUOffload(offload_params=True)
  // ZeRO-Infinity (offload_optimizer nvme): the optimizer swapper's pinned host buffers,
  // buffer_count of them, each as large as the largest sub-group (sub_group_size elements at
  // most). DeepSpeed's defaults (runtime/zero/offload_config.py, config.py).
  int64_t sub_group_size = 1000000000;
  int swap_buffer_count = 4;
  // PyTorch DDP (no engine, data-parallel > 1): the Reducer's gradient buckets
  // (schedule/interpreter_ddp.cc), _DEFAULT_FIRST_BUCKET_BYTES and bucket_cap_mb.
  bool ddp_buckets = false;
  int64_t ddp_first_bucket_bytes = 1024 * 1024;
  int64_t ddp_bucket_cap_bytes = 25 * 1024 * 1024;

  bool optimizer_offloaded() const { return offload_optimizer != OffloadDevice::None; }
  bool active() const { return engine != ShardingEngine::None; }
  bool params_sharded() const { return active() && zero_stage >= 2 && (zero_stage == 3 || engine == ShardingEngine::Fsdp); }
  bool grads_sharded() const { return active() && zero_stage >= 2; }
  bool optimizer_sharded() const { return active() && zero_stage >= 1; }
  // FSDP's SHARD_GRAD_OP keeps the gathered parameters from the forward to the unit's backward.
  bool reshard_after_forward() const { return !(engine == ShardingEngine::Fsdp && zero_stage == 2); }
  // Elements of a parameter of `numel` elements one rank holds in a partitioned state.
  int64_t shard(int64_t numel) const { return (numel + data_parallel - 1) / data_parallel; }
};

}  // namespace headroom
