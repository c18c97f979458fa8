// FSDP with one FlatParameter per block (--fsdp-wrap block, schedule/fsdp_units.h), following
// torch/distributed/fsdp in PyTorch 1.13:
//   forward   FullyShardedDataParallel.forward: the root's _pre_forward_unshard runs first and
//             the root stays unsharded after its forward ("Do not free the root's parameters in
//             the post-forward for FULL_SHARD"); each block is unsharded
//             (FlatParamHandle.unshard -> _alloc_padded_unsharded_flat_param: the padded
//             flat parameter in the compute dtype) before its first op and resharded after its
//             last (_post_forward -> _reshard) under FULL_SHARD; SHARD_GRAD_OP keeps it;
//   backward  _pre_backward_hook unshards the unit again and, with BACKWARD_PRE (the default),
//             prefetches the next unit in the backward's order (_prefetch_handles): two units
//             live, besides the root. The module's parameters are views of the FlatParameter
//             (FlatParamHandle._get_unflat_views: torch.split + view), so their gradients wait
//             in the split node until the unit's last arrives; its backward (a cat) makes the
//             unsharded flat gradient, AccumulateGrad steals it as flat_param.grad, and
//             _post_backward_hook reshards the unit, pads the gradient
//             (F.pad(grad_flatten, [0, num_pad]), a copy), reduce-scatters into
//             output = torch.zeros_like(chunks[0]), casts it to the parameter dtype
//             (_cast_grad_to_param_dtype, fp32 under MixedPrecision) and keeps it as
//             _saved_grad_shard (later micro-batches add into it); the unsharded gradient and the
//             padded copy go when the hook returns.
// The persistent shards (parameters, optimizer states) are the units' flat shards
// (interpreter_fsdp_flat.cc); the gradient shard is the unit's.
#include "schedule/interpreter.h"

#include <string>
#include <vector>

#include "util/checked.h"
#include "util/error.h"

namespace headroom::schedule_detail {

void Interpreter::init_fsdp_units() {
  const Sharding& s = o_.sharding;
  if (s.engine != ShardingEngine::Fsdp || s.fsdp_wrap != FsdpWrap::Block || !gathers_) return;
  fsdp_units_ = fsdp_block_units(g_);
  const size_t n = fsdp_units_.units.size();
  param_unit_.assign(g_.tensors.size(), -1);
  for (size_t u = 0; u < n; ++u) {
    for (TensorId p : fsdp_units_.units[u].params) param_unit_[static_cast<size_t>(p)] = static_cast<int>(u);
  }
  unit_gathered_.assign(n, kNone);
  unit_grads_.assign(n, {});
  unit_got_.assign(n, {});
  unit_pending_.assign(n, 0);
  unit_done_.assign(n, false);
  unit_grad_shard_.assign(n, kNone);
}

void Interpreter::gather_unit(int u) {
  if (u < 0 || unit_gathered_[static_cast<size_t>(u)] != kNone || (in_backward_ && unit_done_[static_cast<size_t>(u)])) return;
  const FsdpUnit& unit = fsdp_units_.units[static_cast<size_t>(u)];
  if (unit.params.empty()) return;
  // NO_SHARD under MixedPrecision casts the whole flat parameter (_use_low_precision_shard);
  // the sharded strategies gather the padded one.
  const int world = o_.sharding.params_sharded() ? o_.sharding.data_parallel : 1;
  const int64_t elements = fsdp_padded_elements(unit.elements, world);
  const int64_t bytes = checked_mul(elements, dtype_size(g_.tensor(unit.params.front()).dtype), "FSDP unit bytes");
  BufferId b = new_buffer(bytes, Category::Weights, buffer_name(unit.name, " FlatParameter (unsharded)"), kNone);
  alloc(b);
  ref(b);
  unit_gathered_[static_cast<size_t>(u)] = b;
}

void Interpreter::release_unit(int u) {
  if (u < 0) return;
  BufferId& b = unit_gathered_[static_cast<size_t>(u)];
  if (b == kNone) return;
  unref(b);
  b = kNone;
}

void Interpreter::prefetch_next_unit(int i) {
  const int current = fsdp_units_.op_unit[static_cast<size_t>(i)];
  if (current < 0) return;  // FSDP's hooks run for units only
  for (int j = i - 1; j >= 0; --j) {
    const int u = fsdp_units_.op_unit[static_cast<size_t>(j)];
    if (!unit_reach_[static_cast<size_t>(j)] || u < 0 || u == current || unit_done_[static_cast<size_t>(u)]) continue;
    gather_unit(u);
    return;
  }
}

void Interpreter::begin_unit_backward(const std::vector<bool>& reach) {
  if (!block_units()) return;
  unit_reach_ = reach;
  for (size_t u = 0; u < fsdp_units_.units.size(); ++u) {
    unit_done_[u] = false;
    unit_pending_[u] = 0;
    BufferId& shard = unit_grad_shard_[u];
    bool kept = false;
    for (TensorId p : fsdp_units_.units[u].params) {
      if (deps_[static_cast<size_t>(p)] > 0) ++unit_pending_[u];
      kept = kept || param_grad_[static_cast<size_t>(p)] != kNone;
    }
    if (!kept) shard = kNone;  // zero_grad(set_to_none=True) freed it
  }
}

bool Interpreter::unit_gradients() const {
  const Sharding& s = o_.sharding;
  return block_units() && s.grads_sharded() && !s.offload_params;
}

void Interpreter::unit_gradient(TensorId param, GradValue g) {
  const int u = param_unit_[static_cast<size_t>(param)];
  HEADROOM_CHECK(u >= 0 && unit_pending_[static_cast<size_t>(u)] > 0, "FSDP unit gradient out of order for " + g_.tensor(param).name);
  if (unit_gradients()) {
    unit_grads_[static_cast<size_t>(u)].push_back(g.buffer);
    unit_got_[static_cast<size_t>(u)].push_back(param);
  } else {
    // NO_SHARD under MixedPrecision and CPUOffload keep the parameter-wise gradient path.
    reduce_gradient(param, g);
  }
  if (--unit_pending_[static_cast<size_t>(u)] == 0) unit_post_backward(u);
}

void Interpreter::unit_post_backward(int u) {
  const Sharding& s = o_.sharding;
  if (!unit_gradients()) {
    release_unit(u);
    unit_done_[static_cast<size_t>(u)] = true;
    return;
  }
  const FsdpUnit& unit = fsdp_units_.units[static_cast<size_t>(u)];
  const int64_t elem = dtype_size(g_.tensor(unit.params.front()).dtype);  // the compute dtype
  const int64_t padded = fsdp_padded_elements(unit.elements, s.data_parallel);
  const int64_t shard = padded / s.data_parallel;
  // The split node's backward: one cat of the unit's parameter gradients.
  BufferId flat = new_buffer(checked_mul(unit.elements, elem, "FSDP unit bytes"), Category::Gradients,
                             buffer_name(unit.name, " FlatParameter.grad (unsharded)"), kNone);
  alloc(flat);
  ref(flat);
  for (BufferId b : unit_grads_[static_cast<size_t>(u)]) unref(b);
  unit_grads_[static_cast<size_t>(u)].clear();
  // _post_backward_hook: _reshard(free_unsharded_flat_param) for the sharded strategies.
  release_unit(u);
  unit_done_[static_cast<size_t>(u)] = true;
  BufferId padded_copy = temp(checked_mul(padded, elem, "FSDP unit bytes"), buffer_name(unit.name, " F.pad(grad_flatten)"));
  BufferId output = temp(checked_mul(shard, elem, "FSDP unit bytes"), buffer_name(unit.name, " reduce-scatter output"));
  if (fsdp_mixed_) {
    // output.data = output.data.to(param.dtype): the fp32 shard, the 16-bit one freed.
    BufferId cast = temp(checked_mul(shard, 4, "FSDP unit bytes"), buffer_name(unit.name, " reduce-scatter output (fp32)"));
    unref(output);
    output = cast;
  }
  BufferId& saved = unit_grad_shard_[static_cast<size_t>(u)];
  if (saved == kNone) {
    // param._saved_grad_shard = output; _finalize_params makes it flat_param.grad.
    retag(output, Category::Gradients);
    saved = output;
    for (TensorId got : unit_got_[static_cast<size_t>(u)]) {
      const TensorId p = flat_carrier(got);  // the FlatParameter's carrier, when the unit is flattened
      if (param_grad_[static_cast<size_t>(p)] != kNone) continue;
      param_grad_[static_cast<size_t>(p)] = saved;  // zero_grad drops one reference per parameter
      ref(saved);
    }
    unref(output);  // the references are the parameters' now
  } else {
    unref(output);  // param._saved_grad_shard += output
  }
  unit_got_[static_cast<size_t>(u)].clear();
  unref(padded_copy);
  unref(flat);
}

}  // namespace headroom::schedule_detail
