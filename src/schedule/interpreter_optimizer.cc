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
  record_function();
  const bool adam = o_.optimizer == OptimizerKind::Adam || o_.optimizer == OptimizerKind::AdamW;
  if (o_.optimizer == OptimizerKind::AdamW8bit || o_.optimizer == OptimizerKind::PagedAdamW8bit ||
      o_.optimizer == OptimizerKind::Lion || o_.optimizer == OptimizerKind::Adafactor) {
    fine_tuning_optimizer_step(ps);
  } else if (!state_created_) {
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

void Interpreter::fine_tuning_optimizer_step(const std::vector<TensorId>& ps) {
  const bool create = !state_created_;
  state_created_ = true;
  for (TensorId p : ps) {
    const Tensor& t = g_.tensor(p);
    const int64_t n = t.numel();
    switch (o_.optimizer) {
      case OptimizerKind::AdamW8bit:
      case OptimizerKind::PagedAdamW8bit:
        // bitsandbytes Optimizer8bit.init_state: tensors under min_8bit_size (4096 elements) keep
        // 32-bit state1/state2; larger ones uint8 state1/state2 and, block-wise, fp32 absmax1/2 of
        // ceil(n / 2048) blocks. `step` is a Python int; the qmaps are shared by all parameters.
        // The update is one fused kernel (optimizer_update_8bit_blockwise): no temporaries.
        if (!create) break;
        if (n < 4096) {
          state(checked_mul(n, 4, "optimizer state"), t.name + ".state1");
          state(checked_mul(n, 4, "optimizer state"), t.name + ".state2");
        } else {
          const int64_t blocks = (n + 2047) / 2048;
          state(n, t.name + ".state1");
          state(n, t.name + ".state2");
          state(checked_mul(blocks, 4, "absmax"), t.name + ".absmax1");
          state(checked_mul(blocks, 4, "absmax"), t.name + ".absmax2");
        }
        break;
      case OptimizerKind::Lion: {
        // lion_pytorch update_fn: exp_avg (like p); update = exp_avg.clone().mul_(beta1)
        // .add(grad, alpha=1 - beta1).sign_(): the clone and the add's result, the clone gone
        // when the expression ends, `update` when update_fn returns.
        if (create) state(t.bytes(), t.name + ".exp_avg");
        BufferId clone = temp(t.bytes(), t.name + ".exp_avg.clone");
        BufferId update = temp(t.bytes(), t.name + ".update");
        unref(clone);
        unref(update);
        break;
      }
      case OptimizerKind::Adafactor: {
        // transformers Adafactor (beta1=None, relative_step): rank >= 2 keeps exp_avg_sq_row
        // (shape[:-1]) and exp_avg_sq_col (shape[:-2] + shape[-1:]) in fp32, rank 1 exp_avg_sq.
        // step: update = grad**2 + eps (two p-sized fp32 tensors, the first dropped), the
        // factored estimate torch.mul(r_factor, c_factor) replaces it (rebinding), then in place.
        const std::vector<int64_t>& s = t.shape;
        const bool factored = s.size() >= 2;
        if (create) {
          if (factored) {
            const int64_t cols = s.back(), rows = n / cols, lead = rows / s[s.size() - 2];
            state(checked_mul(rows, 4, "exp_avg_sq_row"), t.name + ".exp_avg_sq_row");
            state(checked_mul(checked_mul(lead, cols, "exp_avg_sq_col"), 4, "exp_avg_sq_col"), t.name + ".exp_avg_sq_col");
          } else {
            state(checked_mul(n, 4, "exp_avg_sq"), t.name + ".exp_avg_sq");
          }
        }
        const int64_t f32 = checked_mul(n, 4, "adafactor update");
        BufferId sq = temp(f32, t.name + ".grad_pow2");
        BufferId update = temp(f32, t.name + ".update");
        unref(sq);
        if (factored) {
          BufferId approx = temp(f32, t.name + "._approx_sq_grad");
          unref(update);
          update = approx;
        }
        unref(update);
        break;
      }
      default:
        break;
    }
  }
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
