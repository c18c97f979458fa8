// Optimizers as PyTorch's torch.optim implements them, described by what they allocate:
// state created on the first step (momentum buffers, Adam moments, step counters) and the
// temporaries of an update, for the single-tensor loop and the foreach (multi-tensor) path.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace headroom {

enum class OptimizerKind : uint8_t { Sgd, Momentum, Adam, AdamW };

// What optimizer.zero_grad() does with the gradients after each step (torch/optim/optimizer.py
// Optimizer.zero_grad; nn.Module.zero_grad the same):
//   SetToNone (set_to_none=True, PyTorch >= 2.0's default): p.grad = None, the buffers are freed.
//   Zeros (set_to_none=False, the default before 2.0, and what a Hugging Face Trainer run with
//   PyTorch < 2.0 did through model.zero_grad()): the buffers are zeroed in place and kept, so
//   from the second step on every gradient is held through the forward and the backward, and
//   AccumulateGrad adds each new gradient into it (torch/csrc/autograd/functions/accumulate_grad.h)
//   instead of stealing it.
enum class ZeroGrad : uint8_t { SetToNone, Zeros };
std::string_view zero_grad_name(ZeroGrad z);            // "none", "zeros" (the CLI's words)
std::optional<ZeroGrad> parse_zero_grad(std::string_view name);

std::string_view optimizer_name(OptimizerKind k);
std::optional<OptimizerKind> parse_optimizer(std::string_view name);

// Per-parameter state tensors, each the size of the parameter (Adam: exp_avg, exp_avg_sq).
int optimizer_state_tensors(OptimizerKind k);
// Adam keeps a 0-dim fp32 `step` tensor per parameter (PyTorch >= 1.12): 4 bytes each.
bool optimizer_has_step_tensor(OptimizerKind k);

}  // namespace headroom
