// The optimizers headroom models and the zero_grad() that follows a step. What each one
// allocates (state made on the first step, the temporaries of an update for the single-tensor
// loop and the foreach path, in upstream's order) is data: one OptimizerRule per kind in
// training/optimizer_rules.cc, which the interpreter replays. The functions below read it.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace headroom {

// torch.optim's SGD (with and without momentum), Adam and AdamW, and beyond torch.optim what
// people fine-tune LLMs with (each rule in optimizer_rules.cc cites its source):
//   AdamW8bit       bitsandbytes.optim.AdamW8bit: block-wise 8-bit moments (1 byte each per
//                   element, an fp32 absmax per 2048-element block) for tensors of >= 4096
//                   elements, 32-bit moments for smaller ones; one fused kernel, no temporaries;
//   PagedAdamW8bit  bitsandbytes.optim.PagedAdamW8bit: the same state in CUDA unified memory
//                   (counted on the device; the driver may page it out under pressure);
//   Lion            lion_pytorch.Lion: one exp_avg per parameter, update temporaries;
//   Adafactor       transformers.optimization.Adafactor (defaults: no first moment, factored
//                   second moment for tensors of rank >= 2: row and column fp32 vectors).
enum class OptimizerKind : uint8_t { Sgd, Momentum, Adam, AdamW, AdamW8bit, PagedAdamW8bit, Lion, Adafactor };

// The optimizers with a foreach (multi-tensor) implementation (sgd, momentum, adam, adamw).
bool optimizer_has_foreach(OptimizerKind k);

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

// Per-parameter state tensors the size of the parameter, made for every parameter (Adam:
// exp_avg, exp_avg_sq; none for the 8-bit and factored rules).
int optimizer_state_tensors(OptimizerKind k);
// Adam keeps a 0-dim fp32 `step` tensor per parameter (PyTorch >= 1.12): 4 bytes each.
bool optimizer_has_step_tensor(OptimizerKind k);

}  // namespace headroom
