#include "training/optimizer.h"

namespace headroom {

std::string_view optimizer_name(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::Sgd: return "sgd";
    case OptimizerKind::Momentum: return "momentum";
    case OptimizerKind::Adam: return "adam";
    case OptimizerKind::AdamW: return "adamw";
    case OptimizerKind::AdamW8bit: return "adamw8bit";
    case OptimizerKind::PagedAdamW8bit: return "paged-adamw8bit";
    case OptimizerKind::Lion: return "lion";
    case OptimizerKind::Adafactor: return "adafactor";
  }
  return "?";
}

std::optional<OptimizerKind> parse_optimizer(std::string_view name) {
  for (OptimizerKind k : {OptimizerKind::Sgd, OptimizerKind::Momentum, OptimizerKind::Adam, OptimizerKind::AdamW,
                          OptimizerKind::AdamW8bit, OptimizerKind::PagedAdamW8bit, OptimizerKind::Lion,
                          OptimizerKind::Adafactor}) {
    if (optimizer_name(k) == name) return k;
  }
  return std::nullopt;
}

std::string_view zero_grad_name(ZeroGrad z) { return z == ZeroGrad::SetToNone ? "none" : "zeros"; }

std::optional<ZeroGrad> parse_zero_grad(std::string_view name) {
  for (ZeroGrad z : {ZeroGrad::SetToNone, ZeroGrad::Zeros}) {
    if (zero_grad_name(z) == name) return z;
  }
  return std::nullopt;
}

int optimizer_state_tensors(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::Sgd: return 0;
    case OptimizerKind::Momentum: return 1;
    case OptimizerKind::Adam:
    case OptimizerKind::AdamW: return 2;
    case OptimizerKind::Lion: return 1;
    // Not whole-size fp32 tensors: see interpreter_optimizer.cc.
    case OptimizerKind::AdamW8bit:
    case OptimizerKind::PagedAdamW8bit:
    case OptimizerKind::Adafactor: return 0;
  }
  return 0;
}

bool optimizer_has_foreach(OptimizerKind k) {
  return k == OptimizerKind::Sgd || k == OptimizerKind::Momentum || k == OptimizerKind::Adam || k == OptimizerKind::AdamW;
}

bool optimizer_has_step_tensor(OptimizerKind k) {
  return k == OptimizerKind::Adam || k == OptimizerKind::AdamW;
}

}  // namespace headroom
