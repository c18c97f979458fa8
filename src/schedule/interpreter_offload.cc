// Engine offloading in the interpreter: DeepSpeed's offload_optimizer (ZeRO-Offload on cpu,
// ZeRO-Infinity on nvme) and offload_param, and PyTorch 1.13 FSDP's
// CPUOffload(offload_params=True). What moves to the host is recorded as Program::host entries
// (never device events); what stays on the device keeps its buffers and lifetimes, so the peak
// still comes from replaying the rank's Program. Each rule names the engine code it follows
// (DeepSpeed runtime/zero/stage_1_and_2.py, stage3.py, swap_tensor/optimizer_utils.py; torch
// 1.13 distributed/fsdp/fully_sharded_data_parallel.py and flat_param.py).
//
// Not modelled (transient, at most one parameter's shard): stage 3's per-parameter
// grad_buffer.to(device) / .float() copies in partition_grads, the device copy of a parameter
// shard before its all-gather (FSDP _use_low_precision_shard / _flat_param_to, DeepSpeed's
// ds_tensor.to(device)), and host-side temporaries of the CPU optimizer.
#include "schedule/interpreter.h"

#include <algorithm>
#include <string>

#include "training/optimizer_rules.h"
#include "util/checked.h"
#include "util/error.h"

namespace headroom::schedule_detail {

void Interpreter::host_state(int64_t bytes, std::string name, bool nvme) {
  p_.host.push_back(HostState{bytes, std::move(name), nvme});
}

bool Interpreter::param_on_host(const Tensor& t) const {
  return o_.sharding.offload_params && t.role == TensorRole::Parameter && t.tied_to == kNone;
}

int64_t Interpreter::host_param_bytes(const Tensor& t) const {
  // DeepSpeed: the 16-bit partition (ds_tensor) moves to pinned host memory
  // (partition_parameters.py _partition_param with offload_param device cpu). FSDP: the
  // FlatParameter's _local_shard is pinned on the host (_init_param_attributes), fp32 under
  // MixedPrecision as on the device.
  return sharded_param_bytes(t);
}

void Interpreter::deepspeed_offload_states(int64_t part) {
  const Sharding& s = o_.sharding;
  const bool nvme = s.offload_optimizer == OffloadDevice::Nvme;
  const int64_t elem = low_precision_ ? 2 : 4;  // DeepSpeed's self.dtype: the model's parameters
  const int64_t fp32_part = checked_mul(part, 4, "offloaded state bytes");
  if (s.zero_stage < 3) {
    // stage_1_and_2.py: single_partition_of_fp32_groups = ...to(self.device).clone().float()
    // with self.device 'cpu' (pinned); initialize_optimizer_states gives it a pinned fp32
    // .grad that the reduced gradients are copied into; DeepSpeedCPUAdam keeps the moments
    // beside it.
    host_state(fp32_part, "fp32 master partition");
    host_state(fp32_part, "fp32 gradient partition");
    for (const std::string& moment : partition_moments()) host_state(fp32_part, moment);
    // __init__ (cpu_offload): temp_grad_buffer_for_cpu_offload on the host and
    // temp_grad_buffer_for_gpu_offload on the device, largest_param_numel elements each.
    int64_t largest = 0;
    for (const Tensor& t : g_.tensors) {
      if (t.role == TensorRole::Parameter && t.tied_to == kNone) largest = std::max(largest, t.numel());
    }
    const int64_t staging = checked_mul(largest, elem, "offloaded state bytes");
    host_state(staging, "temp_grad_buffer_for_cpu_offload");
    BufferId gpu_staging = new_buffer(staging, Category::Workspaces, "temp_grad_buffer_for_gpu_offload", kNone);
    alloc(gpu_staging);
    ref(gpu_staging);
    if (o_.micro_batches > 1) {
      // async_accumulate_grad_in_cpu_via_gpu: each parameter of the rank's partition gets a
      // host buffer of its full numel in the model's dtype (accumulated_grads_in_cpu). Rank 0's
      // partition holds the parameters whose flat offset is below the partition size.
      int64_t offset = 0;
      int64_t in_partition = 0;
      for (const Tensor& t : g_.tensors) {
        if (t.role != TensorRole::Parameter || t.tied_to != kNone) continue;
        if (offset < part) in_partition = checked_add(in_partition, t.numel(), "offloaded state bytes");
        offset = checked_add(offset, t.numel(), "offloaded state bytes");
      }
      host_state(checked_mul(in_partition, elem, "offloaded state bytes"), "accumulated_grads_in_cpu (rank 0)");
    }
    return;
  }
  // stage3.py: self.device is 'cpu' under offload_optimizer, so grad_partitions_flat_buffer
  // (_setup_for_real_optimizer; gradient_accumulation_dtype, the model's dtype) is on the host.
  host_state(checked_mul(part, elem, "offloaded state bytes"), "grad_partitions_flat_buffer");
  // _create_fp32_partitions and initialize_optimizer_states: the fp32 partition, its fp32
  // gradient (subgroup_gradient_buffer) and the moments, on the host or swapped to NVMe.
  host_state(fp32_part, "fp32 master partition", nvme);
  host_state(fp32_part, "fp32 gradient partition", nvme);
  for (const std::string& moment : partition_moments()) host_state(fp32_part, moment, nvme);
  if (nvme) {
    // OptimizerSwapper: SwapBufferManager(num_elems=largest_numel, count=buffer_count) of
    // pinned fp32 buffers, largest_numel the largest sub-group aligned to AIO_ALIGNED_BYTES
    // (1024 bytes = 256 fp32 elements, intra_op_parallelism 1) by _io_aligned_numel.
    int64_t largest = std::min(part, s.sub_group_size);
    largest = (largest + 255) / 256 * 256;
    host_state(checked_mul(checked_mul(largest, 4, "offloaded state bytes"), s.swap_buffer_count, "offloaded state bytes"),
               "optimizer swap buffers (" + std::to_string(s.swap_buffer_count) + " x largest sub-group)");
  }
}

void Interpreter::offload_gradient(TensorId param, GradValue g) {
  const Sharding& s = o_.sharding;
  const Tensor& t = g_.tensor(param);
  if (s.engine == ShardingEngine::Fsdp) {
    // _post_backward_hook: the full gradient is reduce-scattered into a new device shard, then
    // param._cpu_grad.copy_(grad) (pinned, made at lazy init: a host state) and the device
    // shard dropped; micro-batches cannot accumulate outside no_sync() (resolve_offload).
    BufferId shard = new_buffer(param_state_bytes(t), Category::Gradients, buffer_name(t.name, ".grad (shard, to host)"), kNone);
    alloc(shard);
    ref(shard);
    unref(g.buffer);
    unref(shard);
    if (!grad_on_host_[static_cast<size_t>(param)] && !state_created_) {
      host_state(param_state_bytes(t), t.name + "._cpu_grad");
    }
  } else {
    // reduce_ipg_grads -> copy_grads_in_partition (stage 1/2: cpu_offload returns after the
    // copy to the host partition) or partition_grads (stage 3: into the host
    // grad_partitions_flat_buffer): no grads_in_partition on the device.
    unref(g.buffer);
  }
  grad_on_host_[static_cast<size_t>(param)] = true;
}

void Interpreter::host_optimizer_step(int iteration) {
  std::vector<TensorId> ps = trainable();
  begin_step(Phase::Optimizer, iteration, 0, kNone, std::string(optimizer_name(o_.optimizer)) + ".step() on the host (CPUOffload)");
  // The user's torch.optim over the host shards (_cpu_grad into param.grad), on the CPU.
  set_update(torch_optim_update(ps, true));
  if (!state_created_) {
    // torch.optim on the host shards: the rule's state made lazily by the first step, like on
    // the device; its temporaries are host memory too (not modelled, see above).
    for (TensorId p : ps) create_optimizer_state(p, true);
    state_created_ = true;
  }
  end_step();
  begin_step(Phase::Optimizer, iteration, 0, kNone, "zero_grad(set_to_none=True)");
  for (TensorId p : ps) grad_on_host_[static_cast<size_t>(p)] = false;
  end_step();
}

}  // namespace headroom::schedule_detail
