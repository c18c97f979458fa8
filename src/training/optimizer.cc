#include "training/optimizer.h"

#include <algorithm>

#include "training/optimizer_rules.h"

namespace headroom {

std::string_view optimizer_name(OptimizerKind k) { return optimizer_rule(k).name; }

std::optional<OptimizerKind> parse_optimizer(std::string_view name) {
  for (const OptimizerRule& r : optimizer_rules()) {
    if (r.name == name) return r.kind;
  }
  return std::nullopt;
}

bool optimizer_has_foreach(OptimizerKind k) { return optimizer_rule(k).has_foreach; }

std::string_view zero_grad_name(ZeroGrad z) { return z == ZeroGrad::SetToNone ? "none" : "zeros"; }

std::optional<ZeroGrad> parse_zero_grad(std::string_view name) {
  for (ZeroGrad z : {ZeroGrad::SetToNone, ZeroGrad::Zeros}) {
    if (zero_grad_name(z) == name) return z;
  }
  return std::nullopt;
}

int optimizer_state_tensors(OptimizerKind k) {
  const std::vector<StateRule>& state = optimizer_rule(k).state;
  return static_cast<int>(std::count_if(state.begin(), state.end(), [](const StateRule& s) {
    return (s.size == SizeRule::StateLikeParam || s.size == SizeRule::WholeParam) && s.when == ParamCondition::Always;
  }));
}

bool optimizer_has_step_tensor(OptimizerKind k) {
  const std::vector<StateRule>& state = optimizer_rule(k).state;
  return std::any_of(state.begin(), state.end(), [](const StateRule& s) { return s.size == SizeRule::Fp32Scalar; });
}

}  // namespace headroom
