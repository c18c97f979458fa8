// Optimizers as PyTorch's torch.optim implements them, described by what they allocate:
// state created on the first step (momentum buffers, Adam moments, step counters) and the
// temporaries of an update, for the single-tensor loop and the foreach (multi-tensor) path.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace headroom {

enum class OptimizerKind : uint8_t { Sgd, Momentum, Adam, AdamW };

std::string_view optimizer_name(OptimizerKind k);
std::optional<OptimizerKind> parse_optimizer(std::string_view name);

// Per-parameter state tensors, each the size of the parameter (Adam: exp_avg, exp_avg_sq).
int optimizer_state_tensors(OptimizerKind k);
// Adam keeps a 0-dim fp32 `step` tensor per parameter (PyTorch >= 1.12): 4 bytes each.
bool optimizer_has_step_tensor(OptimizerKind k);

}  // namespace headroom
