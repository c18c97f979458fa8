#include "schedule/interpreter.h"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "training/optimizer_rules.h"
#include "util/checked.h"
#include "util/error.h"

namespace headroom::schedule_detail {

std::vector<TensorId> Interpreter::trainable() const {
  std::vector<TensorId> ps;
  for (const Tensor& t : g_.tensors) {
    if (t.role == TensorRole::Parameter && t.tied_to == kNone &&
        (param_grad_[static_cast<size_t>(t.id)] != kNone || grad_on_host_[static_cast<size_t>(t.id)])) {
      ps.push_back(t.id);
    }
  }
  return ps;
}

void Interpreter::optimizer_step(int iteration) {
  if (o_.sharding.engine == ShardingEngine::Fsdp && o_.sharding.offload_params) {
    host_optimizer_step(iteration);
    return;
  }
  std::vector<TensorId> ps = trainable();
  begin_step(Phase::Optimizer, iteration, 0, kNone, std::string(optimizer_name(o_.optimizer)) + ".step()");
  set_update(torch_optim_update(ps, false));
  record_function();
  const bool create = !state_created_;
  state_created_ = true;
  replay_optimizer_update(ps, create);
  end_step();
  if (o_.zero_grad == ZeroGrad::Zeros) {
    // _foreach_zero_ (or zero_()) on the kept gradients: in place, nothing allocated or freed.
    begin_step(Phase::Optimizer, iteration, 0, kNone, "zero_grad(set_to_none=False)");
    record_function();
    end_step();
    return;
  }
  begin_step(Phase::Optimizer, iteration, 0, kNone, "zero_grad(set_to_none=True)");
  record_function();
  for (TensorId p : ps) {
    unref(param_grad_[static_cast<size_t>(p)]);
    param_grad_[static_cast<size_t>(p)] = kNone;
  }
  end_step();
}

ParamUpdate Interpreter::torch_optim_update(const std::vector<TensorId>& ps, bool on_host) const {
  ParamUpdate u;
  if (ps.empty()) return u;
  for (TensorId p : ps) {
    const Tensor& t = g_.tensor(p);
    u.elements = checked_add(u.elements, param_state_elements(t), "optimizer update elements");
    u.bytes = checked_add(u.bytes, param_state_bytes(t), "optimizer update bytes");
  }
  u.tensors = static_cast<int32_t>(ps.size());
  u.kernels = o_.foreach && optimizer_rule(o_.optimizer).has_foreach ? UpdateKernels::Foreach : UpdateKernels::PerTensor;
  u.on_host = on_host;
  return u;
}

void Interpreter::create_optimizer_state(TensorId p, bool on_host) {
  const Tensor& t = g_.tensor(p);
  for (const StateRule& s : optimizer_rule(o_.optimizer).state) {
    if (!param_condition_holds(s.when, t)) continue;
    // A CPU tensor on a GPU: host memory that headroom does not count there (the host-offload
    // path keeps every state on the host and counts it).
    if (s.step_counter && !on_host && !o_.device.optimizer_step_on_device) continue;
    const int64_t bytes = optimizer_bytes(s.size, t, param_state_bytes(t));
    if (on_host) host_state(bytes, t.name + std::string(s.suffix));
    else state(bytes, buffer_name(t.name, s.suffix));
  }
}

void Interpreter::replay_optimizer_update(const std::vector<TensorId>& ps, bool create_state) {
  const OptimizerRule& rule = optimizer_rule(o_.optimizer);
  if (create_state && rule.state_init == StateInit::BeforeUpdate) {
    for (TensorId p : ps) create_optimizer_state(p, false);
  }
  // Slots are the update's Python locals; a foreach slot holds one tensor per parameter.
  using Slots = std::array<std::vector<BufferId>, kOptimizerSlots>;
  const auto drop = [this](std::vector<BufferId>& values) {
    for (auto it = values.rbegin(); it != values.rend(); ++it) unref(*it);
    values.clear();
  };
  // Runs `ops` for the parameters `over` (one, or all of them for foreach).
  const auto run = [&](const std::vector<UpdateOp>& ops, const std::vector<TensorId>& over, Slots& slots, Slots& carried) {
    for (const UpdateOp& op : ops) {
      std::vector<BufferId>& slot = slots[static_cast<size_t>(op.slot)];
      switch (op.kind) {
        case UpdateOpKind::Alloc:
          for (TensorId p : over) {
            const Tensor& t = g_.tensor(p);
            if (param_condition_holds(op.when, t)) {
              slot.push_back(temp(optimizer_bytes(op.size, t, param_state_bytes(t)), buffer_name(t.name, op.what)));
            }
          }
          break;
        case UpdateOpKind::Scalar: slot = python_scalar(std::string(op.what)); break;
        case UpdateOpKind::Drop:
        case UpdateOpKind::Rebind: {
          // Conditions on these appear in single-tensor programs only (validate_optimizer_rule).
          if (op.when != ParamCondition::Always && !param_condition_holds(op.when, g_.tensor(over.front()))) break;
          drop(slot);
          if (op.kind == UpdateOpKind::Drop) break;
          std::vector<BufferId>& from = slots[static_cast<size_t>(op.from)];
          slot = std::move(from);
          from.clear();
          break;
        }
        case UpdateOpKind::Carry: {
          std::vector<BufferId>& previous = carried[static_cast<size_t>(op.slot)];
          drop(previous);
          previous = std::move(slot);
          slot.clear();
          break;
        }
      }
    }
  };
  Slots slots, carried;
  if (o_.foreach && rule.has_foreach) {
    run(o_.device.torch_optim_v2 && !rule.foreach_v2.empty() ? rule.foreach_v2 : rule.foreach, ps, slots, carried);
  } else {
    for (TensorId p : ps) {
      if (create_state && rule.state_init == StateInit::PerParameter) create_optimizer_state(p, false);
      run(rule.single_tensor, {p}, slots, carried);
    }
  }
  for (std::vector<BufferId>& values : carried) drop(values);
}

void Interpreter::record_function() {
  if (!o_.device.optimizer_record_function) return;
  BufferId handle = temp(4, "record_function handle");
  BufferId holder = temp(288, "record_function holder");
  unref(holder);
  unref(handle);
}

std::vector<BufferId> Interpreter::python_scalar(const std::string& what) {
  if (!o_.device.python_scalar_tensors) return {};
  return {temp(8, buffer_name(what, " (float64 scalar)")), temp(4, buffer_name(what, " (cast)"))};
}

void Interpreter::state(int64_t bytes, std::string name) {
  BufferId b = new_buffer(bytes, Category::OptimizerState, std::move(name), kNone);
  alloc(b);
  ref(b);
}

BufferId Interpreter::temp(int64_t bytes, std::string name) {
  BufferId b = new_buffer(bytes, Category::Temporaries, std::move(name), kNone);
  alloc(b);
  ref(b);
  return b;
}

}  // namespace headroom::schedule_detail
