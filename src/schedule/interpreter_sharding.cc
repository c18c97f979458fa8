// ZeRO / FSDP in the interpreter: what one data-parallel rank holds (schedule/sharding.h says
// which engine function each rule follows). Nothing here computes a total: every state is a
// buffer with a lifetime, and the peak comes from replaying the rank's Program.
#include "schedule/interpreter.h"

#include <algorithm>
#include <string>
#include <vector>

#include "training/optimizer_rules.h"
#include "util/checked.h"
#include "util/error.h"

namespace headroom::schedule_detail {

namespace {

// The tensor owning the storage t views (a transpose of a weight reads the weight).
TensorId storage_root(const Graph& g, TensorId t) {
  while (g.tensor(t).alias_of != kNone) t = g.tensor(t).alias_of;
  const Tensor& x = g.tensor(t);
  return x.tied_to != kNone ? x.tied_to : t;
}

}  // namespace

void Interpreter::init_sharding() {
  const Sharding& s = o_.sharding;
  grad_on_host_.assign(g_.tensors.size(), false);
  if (!s.active()) return;
  HEADROOM_CHECK(s.data_parallel >= 1 && s.zero_stage >= 0 && s.zero_stage <= 3, "invalid sharding");
  bool low_precision = false;
  for (const Tensor& t : g_.tensors) {
    if (t.role != TensorRole::Parameter || t.tied_to != kNone) continue;
    flat_elements_ = checked_add(flat_elements_, t.numel(), "parameter elements");
    low_precision = low_precision || t.dtype != DType::F32;
  }
  low_precision_ = low_precision;
  fsdp_mixed_ = s.engine == ShardingEngine::Fsdp && low_precision;
  // Offloaded parameters are copied to the device for every op that reads them.
  gathers_ = s.params_sharded() || fsdp_mixed_ || s.offload_params;
  op_params_.assign(g_.ops.size(), {});
  next_param_op_.assign(g_.ops.size(), kNone);
  gathered_.assign(g_.ops.size(), {});
  for (const Op& op : g_.ops) {
    std::vector<TensorId>& ps = op_params_[static_cast<size_t>(op.id)];
    for (TensorId in : op.inputs) {
      TensorId root = storage_root(g_, in);
      if (g_.tensor(root).role == TensorRole::Parameter && std::find(ps.begin(), ps.end(), root) == ps.end()) ps.push_back(root);
    }
  }
  OpId next = kNone;
  for (int i = static_cast<int>(g_.ops.size()) - 1; i >= 0; --i) {
    next_param_op_[static_cast<size_t>(i)] = next;
    if (!op_params_[static_cast<size_t>(i)].empty()) next = i;
  }
  init_fsdp_units();
  init_fsdp_flat();
}

namespace {

// FlatParamHandle._get_shard: chunks[0].numel() of torch.chunk(world_size), ceil(elements / dp).
int64_t flat_shard_elements(int64_t elements, int dp) { return elements / dp + (elements % dp != 0 ? 1 : 0); }

}  // namespace

int64_t Interpreter::stored_param_bytes(const Tensor& t) const {
  return param_on_host(t) ? 0 : sharded_param_bytes(t);
}

int64_t Interpreter::sharded_param_bytes(const Tensor& t) const {
  const Sharding& s = o_.sharding;
  if (!s.active() || t.role != TensorRole::Parameter) return t.bytes();
  if (flat_member(t.id)) {
    // The unit's flat shard, held by its carrier (interpreter_fsdp_flat.cc); the other members are views.
    if (flat_carrier(t.id) != t.id) return 0;
    const int64_t numel = flat_shard_elements(flat_numel_[static_cast<size_t>(flat_of_[static_cast<size_t>(t.id)])], s.data_parallel);
    return checked_mul(numel, fsdp_mixed_ ? 4 : dtype_size(t.dtype), "sharded state bytes");
  }
  const int64_t numel = s.params_sharded() ? s.shard(t.numel()) : t.numel();
  // FSDP's FlatParameter keeps the fp32 values; MixedPrecision casts a 16-bit copy for compute.
  const int64_t elem = fsdp_mixed_ ? 4 : dtype_size(t.dtype);
  return checked_mul(numel, elem, "sharded state bytes");
}

int64_t Interpreter::param_state_bytes(const Tensor& t) const {
  const Sharding& s = o_.sharding;
  if (s.engine != ShardingEngine::Fsdp) return t.bytes();
  if (flat_member(t.id)) return sharded_param_bytes(g_.tensor(flat_carrier(t.id)));
  const int64_t numel = s.optimizer_sharded() ? s.shard(t.numel()) : t.numel();
  return checked_mul(numel, fsdp_mixed_ ? 4 : dtype_size(t.dtype), "sharded state bytes");
}

int64_t Interpreter::param_state_elements(const Tensor& t) const {
  const Sharding& s = o_.sharding;
  if (s.engine != ShardingEngine::Fsdp) return t.numel();
  if (flat_member(t.id)) return flat_shard_elements(flat_numel_[static_cast<size_t>(flat_of_[static_cast<size_t>(t.id)])], s.data_parallel);
  return s.optimizer_sharded() ? s.shard(t.numel()) : t.numel();
}

void Interpreter::deepspeed_setup_states() {
  const Sharding& s = o_.sharding;
  if (s.engine != ShardingEngine::DeepSpeed || o_.mode != RunMode::Training) return;
  // One flat group of all trainable parameters, partitioned over the ranks
  // (get_data_parallel_partitions); stage 0 keeps the whole group.
  const int64_t part = s.optimizer_sharded() ? s.shard(flat_elements_) : flat_elements_;
  if (s.optimizer_offloaded()) {
    deepspeed_offload_states(part);
    state_created_ = true;
    return;
  }
  // single_partition_of_fp32_groups: partition.clone().float() (a copy even for fp32 models).
  // Stage 0 in fp32 wraps no optimizer: the client's optimizer updates the parameters.
  if (s.optimizer_sharded() || low_precision_) state(checked_mul(part, 4, "sharded state bytes"), "fp32 master partition");
  // initialize_optimizer_states() runs one step on zero gradients: the moments exist from the
  // start, in fp32 like the master. FusedAdam keeps `step` in the param group (no tensor).
  for (const std::string& moment : partition_moments()) state(checked_mul(part, 4, "sharded state bytes"), moment);
  state_created_ = true;
}

std::vector<std::string> Interpreter::partition_moments() const {
  // The rule's states like the parameter (torch.optim's zeros_like(p)) become fp32 partitions
  // ("exp_avg partition"); a 0-dim `step` does not (FusedAdam keeps it in the param group), nor
  // do the 8-bit, factored or whole-parameter states of rules DeepSpeed has no partitioned
  // counterpart of here.
  std::vector<std::string> names;
  for (const StateRule& s : optimizer_rule(o_.optimizer).state) {
    if (s.size == SizeRule::StateLikeParam && s.when == ParamCondition::Always) names.push_back(std::string(s.suffix.substr(1)) + " partition");
  }
  return names;
}

void Interpreter::gather(OpId op) {
  if (!gathers_ || op == kNone) return;
  if (block_units()) {
    // The root module's forward begins before any other unit's.
    // In the backward (a checkpointed block's re-run included, which runs inside the unit after
    // its pre-backward hook) the hook prefetches the next unit with it.
    if (!in_backward_) gather_unit(fsdp_units_.root);
    gather_unit(fsdp_units_.op_unit[static_cast<size_t>(op)]);
    if (in_backward_ && o_.sharding.prefetch_backward) prefetch_next_unit(op);
    return;
  }
  std::vector<BufferId>& got = gathered_[static_cast<size_t>(op)];
  if (!got.empty()) return;
  for (TensorId p : op_params_[static_cast<size_t>(op)]) {
    const Tensor& t = g_.tensor(p);
    BufferId b = new_buffer(t.bytes(), Category::Weights, buffer_name(t.name, " (gathered)"), op);
    alloc(b);
    ref(b);
    got.push_back(b);
  }
}

void Interpreter::release_gather(OpId op) {
  if (!gathers_ || op == kNone) return;
  if (block_units()) {
    // _post_forward reshards a block (not the root) after its last op; in the backward (and a
    // checkpoint's re-run in it) the post-backward hook does (unit_post_backward).
    const int u = fsdp_units_.op_unit[static_cast<size_t>(op)];
    if (!in_backward_ && u >= 0 && u != fsdp_units_.root && fsdp_units_.units[static_cast<size_t>(u)].last == op) release_unit(u);
    return;
  }
  std::vector<BufferId>& got = gathered_[static_cast<size_t>(op)];
  for (BufferId b : got) unref(b);
  got.clear();
}

void Interpreter::release_all_gathered() {
  for (size_t u = 0; u < unit_gathered_.size(); ++u) release_unit(static_cast<int>(u));
  for (size_t i = 0; i < gathered_.size(); ++i) release_gather(static_cast<OpId>(i));
}

void Interpreter::reduce_bucket() {
  const Sharding& s = o_.sharding;
  // ZeRO-Offload forces contiguous_gradients (self.contiguous_gradients = contiguous_gradients or
  // self.cpu_offload), so stage 1 gets the bucket too.
  if (s.engine != ShardingEngine::DeepSpeed || !(s.grads_sharded() || s.optimizer_offloaded()) || ipg_bucket_ != kNone) return;
  // DeepSpeedZeroOptimizer.backward(): torch.empty(reduce_bucket_size) in the gradient dtype
  // (contiguous_gradients; one buffer, overlap_comm off).
  int64_t elem = 2;
  for (const Tensor& t : g_.tensors) {
    if (t.role == TensorRole::Parameter) {
      elem = dtype_size(t.dtype);
      break;
    }
  }
  ipg_bucket_ = new_buffer(checked_mul(s.reduce_bucket_elements, elem, "sharded state bytes"), Category::Workspaces, "ipg bucket (reduce_bucket_size)", kNone);
  alloc(ipg_bucket_);
  ref(ipg_bucket_);
}

void Interpreter::reduce_gradient(TensorId param, GradValue g) {
  const Sharding& s = o_.sharding;
  const Tensor& t = g_.tensor(flat_carrier(param));  // a FlatParameter's gradient shard is the unit's
  BufferId& pg = param_grad_[static_cast<size_t>(t.id)];
  if (s.optimizer_offloaded() || (s.engine == ShardingEngine::Fsdp && s.offload_params)) {
    offload_gradient(param, g);
    return;
  }
  if (s.engine == ShardingEngine::DeepSpeed) {
    // The gradient is copied into the ipg bucket and param.grad dropped; when the bucket is
    // reduced, this rank's part lands in grads_in_partition (allocated at the first reduction).
    if (grad_partition_ == kNone) {
      grad_partition_ = new_buffer(checked_mul(s.shard(flat_elements_), dtype_size(t.dtype), "sharded state bytes"), Category::Gradients,
                                   "grads_in_partition", kNone);
      alloc(grad_partition_);
      ref(grad_partition_);
    }
    pg = grad_partition_;  // marks the parameter as having a gradient; the step frees the buffer
  } else if (pg == kNone) {
    // _post_backward_hook: new_sharded_grad = torch.empty_like(chunk), reduce_scatter, cast to
    // the parameter dtype; later micro-batches add into the kept shard.
    pg = new_buffer(param_state_bytes(t), Category::Gradients, buffer_name(t.name, ".grad (shard)"), kNone);
    alloc(pg);
    ref(pg);
  }
  unref(g.buffer);
}

void Interpreter::deepspeed_optimizer_step(int iteration) {
  const Sharding& s = o_.sharding;
  std::vector<TensorId> ps = trainable();
  begin_step(Phase::Optimizer, iteration, 0, kNone, "DeepSpeed ZeRO-" + std::to_string(s.zero_stage) + " step()");
  // The optimizer reads an fp32 gradient for its partition: get_flat_partition(...).float()
  // (stage 1/2) or _prepare_fp32_grad_for_sub_group (stage 3; one sub-group, sub_group_size 1e9).
  const int64_t part = s.optimizer_sharded() ? s.shard(flat_elements_) : flat_elements_;
  // Under offload the step runs on the host (DeepSpeedCPUAdam on the host gradient); stage 1/2
  // then copies the updated master back: bit16_partitions[partition_id].data.copy_(
  // fp32_partition.to(current_device)): an fp32 device copy of the partition while it runs.
  // Stage 3 copies into its 16-bit partitions from the host (the cast happens there).
  const bool offloaded = s.optimizer_offloaded();
  // What the update runs over: the fp32 partition, one flat tensor (one parameter group). The
  // config's "Adam" is DeepSpeed's FusedAdam (engine.py _configure_basic_optimizer), one
  // multi_tensor_adam launch per group; under offload DeepSpeedCPUAdam on the host
  // (stage_1_and_2.py / stage3.py step). Stage 0 in fp32 keeps no flat partition: the optimizer
  // runs over the model's parameters.
  const bool flat = s.optimizer_sharded() || low_precision_;
  const bool fused = o_.optimizer == OptimizerKind::Adam || o_.optimizer == OptimizerKind::AdamW;
  if (part > 0) {
    set_update({.elements = part,
                .bytes = checked_mul(part, 4, "sharded state bytes"),
                .tensors = flat ? 1 : static_cast<int32_t>(ps.size()),
                .kernels = fused ? UpdateKernels::Fused : o_.foreach ? UpdateKernels::Foreach : UpdateKernels::PerTensor,
                .on_host = offloaded});
  }
  BufferId fp32_grad = offloaded ? kNone : temp(checked_mul(part, 4, "sharded state bytes"), "fp32 gradient partition");
  if (grad_partition_ != kNone) {
    // _release_ipg_buffers(): the bucket and grads_in_partition go before the update.
    unref(grad_partition_);
    grad_partition_ = kNone;
  }
  if (ipg_bucket_ != kNone) {
    unref(ipg_bucket_);
    ipg_bucket_ = kNone;
  }
  // FusedAdam updates the partition in place; the 16-bit parameters are refreshed in place
  // (all-gather into bit16_groups_flat, or the stage-3 partitions).
  if (fp32_grad != kNone) unref(fp32_grad);
  if (offloaded && s.zero_stage < 3) unref(temp(checked_mul(part, 4, "sharded state bytes"), "fp32 partition copied to the device"));
  end_step();
  begin_step(Phase::Optimizer, iteration, 0, kNone, "zero_grad(set_to_none=True)");
  for (TensorId p : ps) {
    BufferId& pg = param_grad_[static_cast<size_t>(p)];
    if (!s.grads_sharded() && !grad_on_host_[static_cast<size_t>(p)]) unref(pg);
    pg = kNone;
    grad_on_host_[static_cast<size_t>(p)] = false;
  }
  end_step();
}

}  // namespace headroom::schedule_detail
