#include "training/optimizer_rules.h"

#include <array>
#include <utility>

#include "util/checked.h"
#include "util/error.h"

// GCC 12 warns about members left to their defaults in designated initializers (the table's
// entries name only what differs from the defaults).
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace headroom {
namespace {

using UK = UpdateOpKind;
using S = SizeRule;
using C = ParamCondition;

UpdateOp alloc(int slot, SizeRule size, std::string_view suffix, ParamCondition when = C::Always) {
  return UpdateOp{UK::Alloc, slot, size, suffix, when, 0};
}
UpdateOp scalar(int slot, std::string_view argument) { return UpdateOp{UK::Scalar, slot, S::Fp32Scalar, argument, C::Always, 0}; }
UpdateOp drop(int slot, ParamCondition when = C::Always) { return UpdateOp{UK::Drop, slot, S::Fp32Scalar, {}, when, 0}; }
UpdateOp rebind(int slot, int from, ParamCondition when = C::Always) {
  return UpdateOp{UK::Rebind, slot, S::Fp32Scalar, {}, when, from};
}
UpdateOp carry(int slot) { return UpdateOp{UK::Carry, slot, S::Fp32Scalar, {}, C::Always, 0}; }

std::vector<OptimizerRule> make_rules() {
  std::vector<OptimizerRule> rules;

  // torch/optim/sgd.py SGD.step -> _single_tensor_sgd / _multi_tensor_sgd, momentum 0:
  // param.add_(d_p, alpha=-lr) in place; no state. Traffic: read p and grad, write p.
  rules.push_back({.kind = OptimizerKind::Sgd, .name = "sgd", .source = "torch.optim.SGD (_single_tensor_sgd, _multi_tensor_sgd)",
                   .has_foreach = true, .traffic_per_param_byte = 3});

  // The same with momentum: the first step's buf = torch.clone(d_p).detach() becomes
  // momentum_buffer; later steps update it in place (buf.mul_(momentum).add_(d_p)).
  rules.push_back({.kind = OptimizerKind::Momentum, .name = "momentum",
                   .source = "torch.optim.SGD(momentum>0) (_single_tensor_sgd, _multi_tensor_sgd)",
                   .state = {{".momentum_buffer", S::StateLikeParam}},
                   .has_foreach = true, .traffic_per_param_byte = 5});

  // torch/optim/adam.py Adam.step (2.x: Adam._init_group): state['step'] = torch.tensor(0.), a
  // 0-dim fp32 CPU tensor (since 1.12; on the parameter's device only when capturable or fused),
  // exp_avg and exp_avg_sq = zeros_like(p), for every parameter, then adam().
  //   _single_tensor_adam (1.13 and 2.11): denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt)
  //     .add_(eps): the sqrt, the Python float's tensors, the quotient (denom); the scalar and
  //     the sqrt die with the expression, denom when the next parameter's iteration rebinds it.
  //   _multi_tensor_adam in 1.13: exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs), divided in
  //     place, then denom = torch._foreach_add(exp_avg_sq_sqrt, eps): both lists alive until the
  //     update ends.
  //   _multi_tensor_adam in 2.x (2.11, per device and dtype group of
  //     _group_tensors_by_device_and_dtype, one group here): exp_avg_sq_sqrt =
  //     torch._foreach_sqrt(device_exp_avg_sqs), then _foreach_div_ and _foreach_add_(.., eps) in
  //     place and _foreach_addcdiv_ into the parameters: one list, freed when the group's update
  //     ends (last made first, as the measured CUDA trace shows). The step counters are bumped
  //     on the CPU (_foreach_add_ with a CPU tensor), lerp_/mul_/addcmul_ work in place.
  // Traffic: read p, grad, exp_avg, exp_avg_sq; write p, exp_avg, exp_avg_sq.
  const std::vector<StateRule> adam_state = {{".step", S::Fp32Scalar, C::Always, true},
                                             {".exp_avg", S::StateLikeParam},
                                             {".exp_avg_sq", S::StateLikeParam}};
  const std::vector<UpdateOp> adam_single = {
      alloc(0, S::StateLikeParam, ".sqrt"), scalar(1, "bias_correction2_sqrt"), alloc(2, S::StateLikeParam, ".denom"),
      drop(1), drop(0), carry(2)};
  const std::vector<UpdateOp> adam_foreach = {
      alloc(0, S::StateLikeParam, ".sqrt"), scalar(1, "eps"), alloc(2, S::StateLikeParam, ".denom"), drop(1), drop(2), drop(0)};
  const std::vector<UpdateOp> adam_foreach_v2 = {alloc(0, S::StateLikeParam, ".exp_avg_sq_sqrt"), drop(0)};
  rules.push_back({.kind = OptimizerKind::Adam, .name = "adam", .source = "torch.optim.Adam (_single_tensor_adam, _multi_tensor_adam)",
                   .state = adam_state, .single_tensor = adam_single, .has_foreach = true, .foreach = adam_foreach,
                   .foreach_v2 = adam_foreach_v2});
  // torch/optim/adamw.py: the same state and expressions (_single_tensor_adamw, _multi_tensor_adamw
  // in 1.13; 2.x's AdamW is Adam with decoupled_weight_decay=True, whose param.mul_(1 - lr *
  // weight_decay) / _foreach_mul_ works in place).
  rules.push_back({.kind = OptimizerKind::AdamW, .name = "adamw",
                   .source = "torch.optim.AdamW (_single_tensor_adamw, _multi_tensor_adamw)", .state = adam_state,
                   .single_tensor = adam_single, .has_foreach = true, .foreach = adam_foreach, .foreach_v2 = adam_foreach_v2});

  // bitsandbytes/optim/optimizer.py Optimizer8bit.step: per parameter, init_state then
  // update_step. init_state: under min_8bit_size (4096 elements) 32-bit state1/state2, else
  // uint8 state1/state2 and, block-wise, fp32 absmax1/absmax2 of ceil(n / 2048) blocks; `step`
  // is a Python int, the qmaps are shared by all parameters. update_step runs one fused kernel
  // (functional.optimizer_update_8bit_blockwise): no temporaries.
  const std::vector<StateRule> eight_bit_state = {
      {".state1", S::Fp32LikeParam, C::Below8bitMin}, {".state2", S::Fp32LikeParam, C::Below8bitMin},
      {".state1", S::Uint8LikeParam, C::From8bitMin}, {".state2", S::Uint8LikeParam, C::From8bitMin},
      {".absmax1", S::BlockAbsmax, C::From8bitMin},   {".absmax2", S::BlockAbsmax, C::From8bitMin}};
  rules.push_back({.kind = OptimizerKind::AdamW8bit, .name = "adamw8bit",
                   .source = "bitsandbytes.optim.AdamW8bit (Optimizer8bit.init_state, update_step)",
                   .state_init = StateInit::PerParameter, .state = eight_bit_state});
  // bitsandbytes.optim.PagedAdamW8bit: the same state in CUDA unified memory (get_state_buffer
  // with is_paged); counted on the device, where the driver may page it out under pressure.
  rules.push_back({.kind = OptimizerKind::PagedAdamW8bit, .name = "paged-adamw8bit",
                   .source = "bitsandbytes.optim.PagedAdamW8bit (Optimizer8bit.init_state, update_step)",
                   .state_init = StateInit::PerParameter, .state = eight_bit_state});

  // lion_pytorch/lion_pytorch.py Lion.step: per parameter, exp_avg = zeros_like(p), then
  // update_fn: update = exp_avg.clone().mul_(beta1).add(grad, alpha=1 - beta1).sign_(): the
  // clone and the add's result; the clone goes when the expression ends, `update` when
  // update_fn returns.
  rules.push_back({.kind = OptimizerKind::Lion, .name = "lion", .source = "lion_pytorch.Lion (step, update_fn)",
                   .state_init = StateInit::PerParameter, .state = {{".exp_avg", S::WholeParam}},
                   .single_tensor = {alloc(0, S::WholeParam, ".exp_avg.clone"), alloc(1, S::WholeParam, ".update"), drop(0),
                                     drop(1)}});

  // transformers/optimization.py Adafactor.step (defaults: beta1=None, relative_step): per
  // parameter, _get_options' factored (rank >= 2) keeps fp32 exp_avg_sq_row (shape[:-1]) and
  // exp_avg_sq_col (shape[:-2] + shape[-1:]), else fp32 exp_avg_sq. The update:
  // update = (grad**2) + eps (two fp32 p-sized tensors, the power dropped), then factored
  // update = self._approx_sq_grad(...) rebinds it; the rest is in place.
  rules.push_back({.kind = OptimizerKind::Adafactor, .name = "adafactor",
                   .source = "transformers.optimization.Adafactor (step, _get_options, _approx_sq_grad)",
                   .state_init = StateInit::PerParameter,
                   .state = {{".exp_avg_sq_row", S::FactoredRow, C::Factored},
                             {".exp_avg_sq_col", S::FactoredCol, C::Factored},
                             {".exp_avg_sq", S::Fp32LikeParam, C::NotFactored}},
                   .single_tensor = {alloc(0, S::Fp32LikeParam, ".grad_pow2"), alloc(1, S::Fp32LikeParam, ".update"), drop(0),
                                     alloc(2, S::Fp32LikeParam, "._approx_sq_grad", C::Factored), rebind(1, 2, C::Factored),
                                     drop(1)}});
  return rules;
}

// Replays `ops` on slot counts for a parameter whose conditions are `holds`, checking the
// invariants of optimizer_rules.h.
std::string check_program(const std::vector<UpdateOp>& ops, bool single_tensor, const std::array<bool, 5>& holds) {
  std::array<int, kOptimizerSlots> live{};
  std::array<bool, kOptimizerSlots> carried{};
  for (const UpdateOp& op : ops) {
    const auto in_range = [](int s) { return s >= 0 && s < kOptimizerSlots; };
    if (!in_range(op.slot) || (op.kind == UK::Rebind && !in_range(op.from))) return "slot out of range";
    if (!holds[static_cast<size_t>(op.when)]) continue;
    const size_t s = static_cast<size_t>(op.slot);
    switch (op.kind) {
      case UK::Alloc:
      case UK::Scalar:
        if (live[s] != 0) return "slot " + std::to_string(op.slot) + " allocated while it holds a value";
        live[s] = 1;
        break;
      case UK::Drop: live[s] = 0; break;
      case UK::Rebind:
        live[s] = live[static_cast<size_t>(op.from)];
        live[static_cast<size_t>(op.from)] = 0;
        break;
      case UK::Carry:
        if (!single_tensor) return "carry in a foreach program";
        carried[s] = true;
        live[s] = 0;
        break;
    }
  }
  for (size_t s = 0; s < live.size(); ++s) {
    if (live[s] != 0) return "slot " + std::to_string(s) + " still holds a value at the end";
  }
  return "";
}

}  // namespace

namespace {

// A deque: registering a rule leaves references to the others valid.
std::deque<OptimizerRule>& table() {
  static std::deque<OptimizerRule> rules = [] {
    std::vector<OptimizerRule> built = make_rules();
    return std::deque<OptimizerRule>(built.begin(), built.end());
  }();
  return rules;
}

}  // namespace

const std::deque<OptimizerRule>& optimizer_rules() { return table(); }

const OptimizerRule& optimizer_rule(OptimizerKind k) {
  const std::deque<OptimizerRule>& rules = table();
  const size_t i = static_cast<size_t>(k);
  if (i < rules.size() && rules[i].kind == k) return rules[i];  // the named kinds, in enum order
  for (const OptimizerRule& r : rules) {
    if (r.kind == k) return r;
  }
  HEADROOM_CHECK(false, "no optimizer rule for kind " + std::to_string(i));
  return rules.front();
}

void register_optimizer_rule(OptimizerRule rule) {
  for (const OptimizerRule& r : table()) {
    if (r.kind == rule.kind) throw InputError("optimizer kind " + std::to_string(static_cast<int>(rule.kind)) + " already has a rule");
    if (r.name == rule.name) throw InputError("optimizer name '" + std::string(rule.name) + "' already has a rule");
  }
  if (std::string e = validate_optimizer_rule(rule); !e.empty()) throw InputError(e);
  table().push_back(std::move(rule));
}

std::vector<std::string> optimizer_names() {
  std::vector<std::string> names;
  for (const OptimizerRule& r : table()) names.emplace_back(r.name);
  return names;
}

std::string optimizer_names_phrase() {
  const std::vector<std::string> names = optimizer_names();
  std::string phrase;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) phrase += i + 1 == names.size() ? " or " : ", ";
    phrase += names[i];
  }
  return phrase;
}

bool param_condition_holds(ParamCondition c, const Tensor& t) {
  switch (c) {
    case C::Always: return true;
    case C::Below8bitMin: return t.numel() < 4096;
    case C::From8bitMin: return t.numel() >= 4096;
    case C::Factored: return t.shape.size() >= 2;
    case C::NotFactored: return t.shape.size() < 2;
  }
  return false;
}

int64_t optimizer_bytes(SizeRule s, const Tensor& t, int64_t state_like_param) {
  switch (s) {
    case S::StateLikeParam: return state_like_param;
    case S::WholeParam: return t.bytes();
    case S::Fp32LikeParam: return checked_mul(t.numel(), 4, "optimizer state");
    case S::Uint8LikeParam: return t.numel();
    case S::Fp32Scalar: return 4;
    case S::BlockAbsmax: return checked_mul((t.numel() + 2047) / 2048, 4, "absmax");
    case S::FactoredRow:
    case S::FactoredCol: {
      // Products of the kept dimensions (no division: a zero-size dimension stays exact).
      const size_t rank = t.shape.size();
      HEADROOM_CHECK(rank >= 2, "factored state of a tensor of rank < 2");
      int64_t n = s == S::FactoredCol ? t.shape.back() : 1;
      for (size_t d = 0; d + (s == S::FactoredRow ? 1 : 2) < rank; ++d) n = checked_mul(n, t.shape[d], "factored state");
      return checked_mul(n, 4, "factored state");
    }
  }
  return 0;
}

std::string validate_optimizer_rule(const OptimizerRule& r) {
  if (!r.foreach.empty() && !r.has_foreach) return std::string(r.name) + ": a foreach program without has_foreach";
  if (r.has_foreach && r.state_init == StateInit::PerParameter) {
    return std::string(r.name) + ": a foreach implementation makes its state before the update";
  }
  if (!r.foreach_v2.empty() && !r.has_foreach) return std::string(r.name) + ": a foreach_v2 program without has_foreach";
  for (const std::vector<UpdateOp>* program : {&r.foreach, &r.foreach_v2}) {
    for (const UpdateOp& op : *program) {
      if (op.when != ParamCondition::Always && op.kind != UpdateOpKind::Alloc) {
        return std::string(r.name) + " foreach: only an allocation may depend on the parameter";
      }
    }
  }
  // Every parameter falls on one side of each condition pair: check the four combinations.
  for (bool small : {false, true}) {
    for (bool factored : {false, true}) {
      const std::array<bool, 5> holds = {true, small, !small, factored, !factored};
      for (bool single : {true, false}) {
        std::string e = check_program(single ? r.single_tensor : r.foreach, single, holds);
        if (!e.empty()) return std::string(r.name) + (single ? " single-tensor: " : " foreach: ") + e;
      }
      if (std::string e = check_program(r.foreach_v2, false, holds); !e.empty()) return std::string(r.name) + " foreach_v2: " + e;
    }
  }
  return "";
}

}  // namespace headroom
