#include "schedule/interpreter.h"

#include <algorithm>
#include <string>
#include <vector>

#include "util/checked.h"
#include "util/error.h"

namespace headroom::schedule_detail {

std::vector<TensorId> Interpreter::trainable() const {
  std::vector<TensorId> ps;
  for (const Tensor& t : g_.tensors) {
    if (t.role == TensorRole::Parameter && t.tied_to == kNone && param_grad_[static_cast<size_t>(t.id)] != kNone) ps.push_back(t.id);
  }
  return ps;
}

void Interpreter::optimizer_step(int iteration) {
  std::vector<TensorId> ps = trainable();
  begin_step(Phase::Optimizer, iteration, 0, kNone, std::string(optimizer_name(o_.optimizer)) + ".step()");
  record_function();
  const bool adam = o_.optimizer == OptimizerKind::Adam || o_.optimizer == OptimizerKind::AdamW;
  if (!state_created_) {
    // State is created lazily by step() for each parameter, in parameter order.
    for (TensorId p : ps) {
      const Tensor& t = g_.tensor(p);
      if (adam) {
        state(4, t.name + ".step");
        state(param_state_bytes(t), t.name + ".exp_avg");
        state(param_state_bytes(t), t.name + ".exp_avg_sq");
      } else if (o_.optimizer == OptimizerKind::Momentum) {
        state(param_state_bytes(t), t.name + ".momentum_buffer");
      }
    }
    state_created_ = true;
  }
  if (adam) {
    if (o_.foreach) {
      // _multi_tensor_adam: sqrt of every exp_avg_sq, then denom = sqrt + eps, both lists alive
      // until the update is done.
      std::vector<BufferId> sq, denom;
      for (TensorId p : ps) sq.push_back(temp(param_state_bytes(g_.tensor(p)), g_.tensor(p).name + ".sqrt"));
      std::vector<BufferId> eps = python_scalar("eps");
      for (TensorId p : ps) denom.push_back(temp(param_state_bytes(g_.tensor(p)), g_.tensor(p).name + ".denom"));
      for (auto it = eps.rbegin(); it != eps.rend(); ++it) unref(*it);
      for (auto it = denom.rbegin(); it != denom.rend(); ++it) unref(*it);
      for (auto it = sq.rbegin(); it != sq.rend(); ++it) unref(*it);
    } else {
      // _single_tensor_adam: denom = (exp_avg_sq.sqrt() / c).add_(eps); the sqrt result dies
      // after the division, denom when the next iteration rebinds it.
      BufferId prev = kNone;
      for (TensorId p : ps) {
        BufferId s = temp(param_state_bytes(g_.tensor(p)), g_.tensor(p).name + ".sqrt");
        std::vector<BufferId> c = python_scalar("bias_correction2_sqrt");
        BufferId d = temp(param_state_bytes(g_.tensor(p)), g_.tensor(p).name + ".denom");
        for (auto it = c.rbegin(); it != c.rend(); ++it) unref(*it);
        unref(s);
        if (prev != kNone) unref(prev);
        prev = d;
      }
      if (prev != kNone) unref(prev);
    }
  }
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

void Interpreter::record_function() {
  if (!o_.device.optimizer_record_function) return;
  BufferId handle = temp(4, "record_function handle");
  BufferId holder = temp(288, "record_function holder");
  unref(holder);
  unref(handle);
}

void Interpreter::cublas_workspace(BufferId& slot, const char* name) {
  if (slot != kNone || o_.device.cublas_workspace_bytes <= 0) return;
  slot = new_buffer(o_.device.cublas_workspace_bytes, Category::Workspaces, name, kNone);
  alloc(slot);
  ref(slot);
}

std::vector<BufferId> Interpreter::python_scalar(const std::string& what) {
  if (!o_.device.python_scalar_tensors) return {};
  return {temp(8, what + " (float64 scalar)"), temp(4, what + " (cast)")};
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
