// The optimizer step as data (training/optimizer_rules.h): the table's invariants, its size
// rules by hand, the event trace each entry replays, worked out from the upstream code each
// entry cites, and an optimizer added as one registered entry.
//
// The traces run mlp:layers=1,dim=128 at batch 4: one Linear, 0.weight [128, 128] (16,384
// elements, 65,536 fp32 bytes) and 0.bias [128] (512 bytes). A trace lists the events of the
// ".step()" step: "+name bytes" an allocation, "-name" a free.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "estimate/estimate.h"
#include "training/optimizer_rules.h"
#include "util/error.h"

// GCC 12 warns about members left to their defaults in designated initializers (the table's
// entries name only what differs from the defaults).
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

struct Traces {
  std::string first, second;  // the ".step()" of iterations 1 and 2
};

std::string step_trace(const Program& p, int iteration) {
  for (const Step& s : p.steps) {
    if (s.phase != Phase::Optimizer || s.iteration != iteration || !s.label.ends_with(".step()")) continue;
    std::string out;
    for (int32_t e = s.first_event; e < s.end_event; ++e) {
      const Event& ev = p.events[static_cast<size_t>(e)];
      const Buffer& b = p.buffers[static_cast<size_t>(ev.buffer)];
      if (!out.empty()) out += " | ";
      if (ev.kind == Event::Kind::Alloc) out += "+" + b.name + " " + std::to_string(b.bytes);
      if (ev.kind == Event::Kind::Free) out += "-" + b.name;
    }
    return out;
  }
  return "no step";
}

EstimateOptions mlp_options(OptimizerKind k, bool foreach, const char* device = "cuda") {
  EstimateOptions o;
  o.model = "mlp:layers=1,dim=128";
  o.batch = 4;
  o.optimizer = k;
  if (optimizer_has_foreach(k)) o.foreach = foreach;  // else --foreach/--no-foreach are errors
  o.device = device;
  o.keep_program = true;
  return o;
}

Traces traces(const EstimateOptions& o) {
  Result<Estimate> e = estimate(o);
  EXPECT_TRUE(e.ok()) << e.error();
  if (!e.ok()) return {};
  return {step_trace(e.value().program, 1), step_trace(e.value().program, 2)};
}

TEST(OptimizerRules, OneValidEntryPerKindInEnumOrder) {
  const std::deque<OptimizerRule>& rules = optimizer_rules();
  ASSERT_GE(rules.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    const OptimizerRule& r = rules[i];
    EXPECT_EQ(static_cast<size_t>(r.kind), i);
    EXPECT_EQ(validate_optimizer_rule(r), "") << r.name;
    EXPECT_FALSE(r.source.empty()) << r.name;
    EXPECT_EQ(parse_optimizer(r.name), r.kind) << r.name;
    EXPECT_EQ(optimizer_has_foreach(r.kind), r.has_foreach) << r.name;
  }
}

TEST(OptimizerRules, ValidateNamesTheBrokenInvariant) {
  OptimizerRule leak{.name = "leak", .single_tensor = {{.kind = UpdateOpKind::Alloc, .slot = 0, .what = ".t"}}};
  EXPECT_NE(validate_optimizer_rule(leak).find("slot 0 still holds a value"), std::string::npos) << validate_optimizer_rule(leak);
  OptimizerRule twice{.name = "twice",
                      .single_tensor = {{.kind = UpdateOpKind::Alloc, .slot = 1}, {.kind = UpdateOpKind::Alloc, .slot = 1},
                                        {.kind = UpdateOpKind::Drop, .slot = 1}}};
  EXPECT_NE(validate_optimizer_rule(twice).find("allocated while it holds"), std::string::npos);
  OptimizerRule range{.name = "range", .single_tensor = {{.kind = UpdateOpKind::Drop, .slot = kOptimizerSlots}}};
  EXPECT_NE(validate_optimizer_rule(range).find("out of range"), std::string::npos);
  OptimizerRule carry{.name = "carry", .has_foreach = true,
                      .foreach = {{.kind = UpdateOpKind::Alloc, .slot = 0}, {.kind = UpdateOpKind::Carry, .slot = 0}}};
  EXPECT_NE(validate_optimizer_rule(carry).find("carry in a foreach"), std::string::npos);
  OptimizerRule undeclared{.name = "undeclared",
                           .foreach = {{.kind = UpdateOpKind::Alloc, .slot = 0}, {.kind = UpdateOpKind::Drop, .slot = 0}}};
  EXPECT_NE(validate_optimizer_rule(undeclared).find("without has_foreach"), std::string::npos);
  OptimizerRule undeclared_v2{.name = "undeclared_v2",
                              .foreach_v2 = {{.kind = UpdateOpKind::Alloc, .slot = 0}, {.kind = UpdateOpKind::Drop, .slot = 0}}};
  EXPECT_NE(validate_optimizer_rule(undeclared_v2).find("foreach_v2 program without has_foreach"), std::string::npos);
  OptimizerRule leak_v2{.name = "leak_v2", .has_foreach = true, .foreach_v2 = {{.kind = UpdateOpKind::Alloc, .slot = 3}}};
  EXPECT_NE(validate_optimizer_rule(leak_v2).find("foreach_v2: slot 3 still holds"), std::string::npos) << validate_optimizer_rule(leak_v2);
  // A leak on one side of a condition only: the factored parameters keep slot 2.
  OptimizerRule factored_leak{.name = "factored",
                              .single_tensor = {{.kind = UpdateOpKind::Alloc, .slot = 2, .when = ParamCondition::Factored},
                                                {.kind = UpdateOpKind::Drop, .slot = 2, .when = ParamCondition::NotFactored}}};
  EXPECT_NE(validate_optimizer_rule(factored_leak).find("slot 2"), std::string::npos);
}

TEST(OptimizerRules, SizeRulesByHand) {
  Tensor t;
  t.shape = {3, 5, 7};  // 105 elements
  t.dtype = DType::F16;
  EXPECT_EQ(optimizer_bytes(SizeRule::StateLikeParam, t, 1234), 1234);  // what the interpreter says
  EXPECT_EQ(optimizer_bytes(SizeRule::WholeParam, t, 1234), 210);       // 105 x 2
  EXPECT_EQ(optimizer_bytes(SizeRule::Fp32LikeParam, t, 0), 420);       // 105 x 4
  EXPECT_EQ(optimizer_bytes(SizeRule::Uint8LikeParam, t, 0), 105);
  EXPECT_EQ(optimizer_bytes(SizeRule::Fp32Scalar, t, 0), 4);
  EXPECT_EQ(optimizer_bytes(SizeRule::BlockAbsmax, t, 0), 4);    // ceil(105 / 2048) = 1 block
  EXPECT_EQ(optimizer_bytes(SizeRule::FactoredRow, t, 0), 60);   // shape[:-1] = [3, 5]: 15 x 4
  EXPECT_EQ(optimizer_bytes(SizeRule::FactoredCol, t, 0), 84);   // [3] + [7]: 21 x 4
  Tensor big;
  big.shape = {4097};
  EXPECT_EQ(optimizer_bytes(SizeRule::BlockAbsmax, big, 0), 12);  // ceil(4097 / 2048) = 3 blocks
  EXPECT_TRUE(param_condition_holds(ParamCondition::From8bitMin, big));
  EXPECT_TRUE(param_condition_holds(ParamCondition::NotFactored, big));
  Tensor edge;
  edge.shape = {64, 64};  // exactly min_8bit_size: 8-bit
  EXPECT_TRUE(param_condition_holds(ParamCondition::From8bitMin, edge));
  edge.shape = {4095};
  EXPECT_TRUE(param_condition_holds(ParamCondition::Below8bitMin, edge));
  Tensor empty;
  empty.shape = {0, 8};  // a zero-size dimension: no division by it
  EXPECT_EQ(optimizer_bytes(SizeRule::FactoredRow, empty, 0), 0);
  EXPECT_EQ(optimizer_bytes(SizeRule::FactoredCol, empty, 0), 32);  // [] + [8]: 8 x 4
}

TEST(OptimizerReplay, SgdAndMomentum) {
  // SGD: p.add_(grad) in place, nothing allocated. Momentum: the buffers on the first step only.
  EXPECT_EQ(traces(mlp_options(OptimizerKind::Sgd, false)).first, "");
  EXPECT_EQ(traces(mlp_options(OptimizerKind::Sgd, true)).second, "");
  for (bool foreach : {false, true}) {
    Traces t = traces(mlp_options(OptimizerKind::Momentum, foreach));
    EXPECT_EQ(t.first, "+0.weight.momentum_buffer 65536 | +0.bias.momentum_buffer 512");
    EXPECT_EQ(t.second, "");
  }
}

TEST(OptimizerReplay, AdamSingleTensorAndForeach) {
  // The cuda profile (PyTorch 2.11, as validation/measured_cuda.json measured): step 1 makes
  // exp_avg and exp_avg_sq for each parameter before the update; `step` is
  // torch.tensor(0.), a CPU tensor, so no device memory.
  const std::string state =
      "+0.weight.exp_avg 65536 | +0.weight.exp_avg_sq 65536 | +0.bias.exp_avg 512 | +0.bias.exp_avg_sq 512 | ";
  // _single_tensor_adam: sqrt, then denom; the sqrt dies with the expression, weight's denom
  // when the bias' iteration rebinds it, the bias' after the loop.
  const std::string single =
      "+0.weight.sqrt 65536 | +0.weight.denom 65536 | -0.weight.sqrt | "
      "+0.bias.sqrt 512 | +0.bias.denom 512 | -0.bias.sqrt | -0.weight.denom | -0.bias.denom";
  // 2.x's _multi_tensor_adam: one list, exp_avg_sq_sqrt = _foreach_sqrt(exp_avg_sqs), divided
  // and shifted by eps in place, freed last-made first: the step peaks at the state plus one
  // fp32 copy of the parameters (65,536 + 512), not two as 1.13's sqrt + denom lists.
  const std::string foreach =
      "+0.weight.exp_avg_sq_sqrt 65536 | +0.bias.exp_avg_sq_sqrt 512 | -0.bias.exp_avg_sq_sqrt | -0.weight.exp_avg_sq_sqrt";
  for (OptimizerKind k : {OptimizerKind::Adam, OptimizerKind::AdamW}) {
    Traces s = traces(mlp_options(k, false));
    EXPECT_EQ(s.first, state + single);
    EXPECT_EQ(s.second, single);
    Traces f = traces(mlp_options(k, true));
    EXPECT_EQ(f.first, state + foreach);
    EXPECT_EQ(f.second, foreach);
  }
}

TEST(OptimizerReplay, AdamOnTheCpuProfileTakesPythonScalars) {
  // The cpu profile (PyTorch 1.13): step() opens a record_function (4-byte handle, 288-byte
  // holder), the CPU `step` tensors (4 bytes each) are device memory, and a Python float
  // operand becomes a float64 0-dim tensor and its fp32 cast.
  const std::string record = "+record_function handle 4 | +record_function holder 288 | -record_function holder | -record_function handle | ";
  const std::string scalar = "+bias_correction2_sqrt (float64 scalar) 8 | +bias_correction2_sqrt (cast) 4";
  const std::string drop_scalar = "-bias_correction2_sqrt (cast) | -bias_correction2_sqrt (float64 scalar)";
  const std::string state =
      "+0.weight.step 4 | +0.weight.exp_avg 65536 | +0.weight.exp_avg_sq 65536 | "
      "+0.bias.step 4 | +0.bias.exp_avg 512 | +0.bias.exp_avg_sq 512 | ";
  const std::string single = "+0.weight.sqrt 65536 | " + scalar + " | +0.weight.denom 65536 | " + drop_scalar +
                             " | -0.weight.sqrt | +0.bias.sqrt 512 | " + scalar + " | +0.bias.denom 512 | " + drop_scalar +
                             " | -0.bias.sqrt | -0.weight.denom | -0.bias.denom";
  Traces s = traces(mlp_options(OptimizerKind::Adam, false, "cpu"));
  EXPECT_EQ(s.first, record + state + single);
  EXPECT_EQ(s.second, record + single);
  // 1.13's _multi_tensor_adam: the sqrt list, then denom = _foreach_add(sqrt, eps) out of place.
  Traces f = traces(mlp_options(OptimizerKind::Adam, true, "cpu"));
  EXPECT_EQ(f.second, record +
                          "+0.weight.sqrt 65536 | +0.bias.sqrt 512 | +eps (float64 scalar) 8 | +eps (cast) 4 | "
                          "+0.weight.denom 65536 | +0.bias.denom 512 | -eps (cast) | -eps (float64 scalar) | "
                          "-0.bias.denom | -0.weight.denom | -0.bias.sqrt | -0.weight.sqrt");
}

TEST(OptimizerReplay, EightBitStateAndNoTemporaries) {
  // weight: 16,384 >= 4096 elements: uint8 state1/state2 (16,384 each) and fp32 absmax of
  // 16,384 / 2048 = 8 blocks (32 bytes each); bias: 128 < 4096: fp32 state1/state2 (512).
  // Per parameter, then one fused kernel: no temporaries, nothing on step 2.
  for (OptimizerKind k : {OptimizerKind::AdamW8bit, OptimizerKind::PagedAdamW8bit}) {
    Traces t = traces(mlp_options(k, false));
    EXPECT_EQ(t.first,
              "+0.weight.state1 16384 | +0.weight.state2 16384 | +0.weight.absmax1 32 | +0.weight.absmax2 32 | "
              "+0.bias.state1 512 | +0.bias.state2 512");
    EXPECT_EQ(t.second, "");
  }
}

TEST(OptimizerReplay, LionPerParameter) {
  // exp_avg on the first step just before the parameter's update; update_fn's clone and result.
  const auto update = [](const std::string& p, int64_t bytes) {
    const std::string b = std::to_string(bytes);
    return "+" + p + ".exp_avg.clone " + b + " | +" + p + ".update " + b + " | -" + p + ".exp_avg.clone | -" + p + ".update";
  };
  Traces t = traces(mlp_options(OptimizerKind::Lion, false));
  EXPECT_EQ(t.first, "+0.weight.exp_avg 65536 | " + update("0.weight", 65536) + " | +0.bias.exp_avg 512 | " + update("0.bias", 512));
  EXPECT_EQ(t.second, update("0.weight", 65536) + " | " + update("0.bias", 512));
}

TEST(OptimizerReplay, AdafactorFactoredAndNot) {
  // weight [128, 128]: exp_avg_sq_row [128] and exp_avg_sq_col [128] fp32 (512 each); grad**2,
  // + eps, the power dropped, _approx_sq_grad rebinding `update`. bias [128]: exp_avg_sq (512),
  // no factored estimate.
  const std::string weight =
      "+0.weight.grad_pow2 65536 | +0.weight.update 65536 | -0.weight.grad_pow2 | +0.weight._approx_sq_grad 65536 | "
      "-0.weight.update | -0.weight._approx_sq_grad";
  const std::string bias = "+0.bias.grad_pow2 512 | +0.bias.update 512 | -0.bias.grad_pow2 | -0.bias.update";
  Traces t = traces(mlp_options(OptimizerKind::Adafactor, false));
  EXPECT_EQ(t.first, "+0.weight.exp_avg_sq_row 512 | +0.weight.exp_avg_sq_col 512 | " + weight + " | +0.bias.exp_avg_sq 512 | " + bias);
  EXPECT_EQ(t.second, weight + " | " + bias);
}

// Live bytes over the events: the value before the optimizer step `label` of `iteration`, and the
// highest inside it.
std::pair<int64_t, int64_t> live_around_step(const Program& p, const std::string& label, int iteration) {
  int64_t live = 0, before = -1, high = 0;
  for (const Step& s : p.steps) {
    const bool target = s.phase == Phase::Optimizer && s.iteration == iteration && s.label == label;
    if (target) before = high = live;
    for (int32_t e = s.first_event; e < s.end_event; ++e) {
      const Event& ev = p.events[static_cast<size_t>(e)];
      const int64_t b = p.buffers[static_cast<size_t>(ev.buffer)].bytes;
      if (ev.kind == Event::Kind::Alloc) live += b;
      if (ev.kind == Event::Kind::Free) live -= b;
      if (target) high = std::max(high, live);
    }
    if (target) return {before, high};
  }
  return {-1, -1};
}

TEST(OptimizerRules, ARegisteredEntryIsAnOptimizer) {
  // A test optimizer in one table entry: an fp32 exponential moving average of each parameter
  // made before the update (like torch.optim), and per parameter a like-p `delta` next to the
  // tensors of a Python float `decay`.
  const OptimizerKind kEma = static_cast<OptimizerKind>(100);
  if (!parse_optimizer("test-ema")) {
    register_optimizer_rule(OptimizerRule{
        .kind = kEma, .name = "test-ema", .source = "tests/optimizer_rules_test.cc",
        .state = {{".ema", SizeRule::Fp32LikeParam}},
        .single_tensor = {{.kind = UpdateOpKind::Alloc, .slot = 0, .size = SizeRule::StateLikeParam, .what = ".delta"},
                          {.kind = UpdateOpKind::Scalar, .slot = 1, .what = "decay"},
                          {.kind = UpdateOpKind::Drop, .slot = 1},
                          {.kind = UpdateOpKind::Drop, .slot = 0}},
        .traffic_per_param_byte = 4});
  }
  ASSERT_EQ(parse_optimizer("test-ema"), kEma);
  EXPECT_EQ(optimizer_name(kEma), "test-ema");
  EXPECT_THROW(register_optimizer_rule(OptimizerRule{.kind = static_cast<OptimizerKind>(101), .name = "test-ema"}), InputError);
  EXPECT_THROW(register_optimizer_rule(OptimizerRule{.kind = OptimizerKind::Adam, .name = "other"}), InputError);
  OptimizerRule leaking{.kind = static_cast<OptimizerKind>(102), .name = "leaking",
                        .single_tensor = {{.kind = UpdateOpKind::Alloc, .slot = 0}}};
  EXPECT_THROW(register_optimizer_rule(leaking), InputError);

  // On the cpu profile (its Python scalars: float64 8 + fp32 cast 4 bytes), step 1:
  EstimateOptions o = mlp_options(kEma, false, "cpu");  // no foreach program: single-tensor
  Result<Estimate> e = estimate(o);
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_EQ(step_trace(e.value().program, 1),
            "+record_function handle 4 | +record_function holder 288 | -record_function holder | -record_function handle | "
            "+0.weight.ema 65536 | +0.bias.ema 512 | "
            "+0.weight.delta 65536 | +decay (float64 scalar) 8 | +decay (cast) 4 | -decay (cast) | -decay (float64 scalar) | "
            "-0.weight.delta | +0.bias.delta 512 | +decay (float64 scalar) 8 | +decay (cast) 4 | -decay (cast) | "
            "-decay (float64 scalar) | -0.bias.delta");
  // The step's high water over what was live before it: both ema (65,536 + 512) + the weight's
  // delta 65,536 + the scalar's 8 + 4 = 131,596 bytes.
  auto [before, high] = live_around_step(e.value().program, "test-ema.step()", 1);
  ASSERT_GE(before, 0);
  EXPECT_EQ(high - before, 131'596);
  // The same run with SGD has the same live bytes before the step (same forward and backward).
  Result<Estimate> sgd = estimate(mlp_options(OptimizerKind::Sgd, false, "cpu"));
  ASSERT_TRUE(sgd.ok()) << sgd.error();
  EXPECT_EQ(live_around_step(sgd.value().program, "sgd.step()", 1).first, before);
  // --foreach is an error for a rule without a foreach program, as for the built-in ones.
  o.foreach = true;
  Result<Estimate> bad = estimate(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("test-ema"), std::string::npos) << bad.error();
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
