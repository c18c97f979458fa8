// schedule/held_state.h: the model state a rank's program ends with, and the most its last
// optimizer step holds, are each the same for every candidate of one layout (each micro-batch,
// with and without recompute; for a pipeline, stage by stage), positive, and never above any
// candidate's peak. The layout search rejects a whole layout from one candidate on this
// (plan/layout_fit.h), so each engine and schedule it tries is checked here, candidate by
// candidate, on gpt2:layers=4.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "estimate/estimate.h"
#include "estimate/pipeline_estimate.h"
#include "options/run_args.h"
#include "plan/evaluate.h"
#include "plan/layout_fit.h"
#include "schedule/held_state.h"
#include "sim/device_catalog.h"
#include "small_gpt2_args.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

struct HeldCase {
  std::string name;
  RunArgs args;
  std::vector<int64_t> micro_batches;  // the candidates' sizes
};

void PrintTo(const HeldCase& c, std::ostream* os) { *os << c.name; }

RunArgs small_gpt2(const std::string& gpus) { return testing::small_gpt2_run(4, gpus); }

std::vector<HeldCase> held_cases() {
  std::vector<HeldCase> v;
  const std::vector<int64_t> every = {8, 4, 2, 1};
  auto add = [&](const std::string& name, RunArgs a, std::vector<int64_t> sizes) { v.push_back({name, std::move(a), std::move(sizes)}); };
  add("one_gpu_adam", small_gpt2("1"), every);
  {
    RunArgs a = small_gpt2("1");
    a.precision = "amp-fp16";  // autocast's weight copies each forward, GradScaler
    add("one_gpu_amp_fp16", a, every);
  }
  add("ddp", small_gpt2("2"), every);
  for (const char* z : {"1", "2", "3"}) {
    RunArgs a = small_gpt2("2");
    a.zero = z;
    add(std::string("zero") + z, a, every);
  }
  for (const char* f : {"full", "grad-op"}) {
    RunArgs a = small_gpt2("2");
    a.fsdp = f;
    add(std::string("fsdp_") + (f[0] == 'f' ? "full" : "grad_op"), a, every);
  }
  {
    RunArgs a = small_gpt2("2");
    a.zero = "2";
    a.offload_optimizer = "cpu";
    add("zero2_offload", a, every);
    a.zero = "3";
    a.offload_params = "cpu";
    add("zero3_offload", a, every);
  }
  for (bool sp : {false, true}) {
    RunArgs a = small_gpt2("4");
    a.tensor_parallel = "2";
    a.sequence_parallel = sp;
    a.megatron = sp;
    add(sp ? "megatron_tp2_sp_ddp" : "tp2_ddp", a, every);
    a.zero = sp ? "1" : "3";
    add(sp ? "megatron_tp2_sp_distributed_optimizer" : "tp2_zero3", a, every);
  }
  // Pipelines: at least P micro-batches a step (interleaved: a multiple of P).
  for (const char* schedule : {"1f1b", "interleaved"}) {
    RunArgs a = small_gpt2("4");
    a.pipeline_parallel = "2";
    a.zero = "1";
    a.megatron = true;
    a.micro_batch = "1";
    a.pipeline_schedule = schedule;
    if (schedule[0] == 'i') a.virtual_stages = "2";
    add(std::string("pp2_") + (schedule[0] == 'i' ? "interleaved" : "1f1b"), a, {4, 2, 1});
    a.tensor_parallel = "2";
    a.gpus = "8";
    add(std::string("pp2_tp2_") + (schedule[0] == 'i' ? "interleaved" : "1f1b"), a, {4, 2, 1});
  }
  return v;
}

class HeldState : public ::testing::TestWithParam<HeldCase> {};

TEST_P(HeldState, IsTheSameForEveryCandidateOfALayout) {
  const HeldCase& c = GetParam();
  Result<EstimateOptions> o = to_estimate_options(c.args, RunCommand::Estimate);
  ASSERT_TRUE(o.ok()) << o.error();
  const GpuSpec& spec = *gpu_spec(*o.value().gpu);
  PlanContext ctx(o.value(), int64_t{1} << 50, CostModel(spec));
  const ParallelOptions& layout = o.value().parallel;
  const int stages = static_cast<int>(layout.pipeline_parallel);
  // The stages an evaluation simulates (estimate/pipeline_estimate.h): 0, 1 and P - 1.
  const std::vector<int> simulated = stages > 1 ? std::vector<int>{0, 1, stages - 1} : std::vector<int>{0};
  std::vector<int64_t> held(static_cast<size_t>(stages), -1);
  std::vector<int64_t> in_step(static_cast<size_t>(stages), -1);
  std::vector<Evaluation> evaluated;
  for (int64_t m : c.micro_batches) {
    for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full}) {
      MemoryPlan plan = recompute_plan(ctx.graph(m), r);
      if (r != Recompute::None && plan.checkpoints.empty()) continue;
      evaluated.push_back(ctx.evaluate(Candidate{plan, m}));
      const std::string at = "micro-batch " + std::to_string(m) + ", recompute " + std::to_string(static_cast<int>(r));
      for (int stage : simulated) {
        ModelStateBytes bytes{evaluated.back().held_bytes, evaluated.back().optimizer_step_bytes};
        if (stages > 1) {
          ScheduleOptions s = schedule_options(o.value());
          s.plan = plan;
          const int k = static_cast<int>(8 / m);
          s.micro_batches = k;
          bytes = model_state(
              pipeline_stage_program(ctx.graph(m), s, layout.schedule(), stages, stage, k, static_cast<int>(layout.virtual_stages.value_or(1))).program);
        }
        EXPECT_GT(bytes.at_end, 0) << at;
        EXPECT_GE(bytes.in_optimizer_step, bytes.at_end) << at;
        int64_t& first = held[static_cast<size_t>(stage)];
        if (first < 0) first = bytes.at_end;
        EXPECT_EQ(bytes.at_end, first) << at << ", stage " << stage;
        int64_t& first_in_step = in_step[static_cast<size_t>(stage)];
        if (first_in_step < 0) first_in_step = bytes.in_optimizer_step;
        EXPECT_EQ(bytes.in_optimizer_step, first_in_step) << at << ", stage " << stage;
      }
    }
  }
  EXPECT_GE(evaluated.size(), 2 * c.micro_batches.size());
  // What the search rests on: any candidate's state is within every candidate's peak.
  for (const Evaluation& a : evaluated) {
    for (const Evaluation& b : evaluated) EXPECT_LE(a.optimizer_step_bytes, b.exact_peak_bytes);
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, HeldState, ::testing::ValuesIn(held_cases()),
                         [](const ::testing::TestParamInfo<HeldCase>& i) { return i.param.name; });

Step step(Phase phase, int iteration, int32_t first_event, int32_t end_event) {
  Step s;
  s.phase = phase;
  s.iteration = iteration;
  s.first_event = first_event;
  s.end_event = end_event;
  return s;
}

// A program without training iterations has no model state to train.
TEST(HeldStateOf, AnInferenceProgramIsZero) {
  Program p;
  p.buffers.push_back({100, Category::Weights, "w", kNone});
  p.events.push_back({Event::Kind::Alloc, Category::Weights, 0});
  p.steps.push_back(step(Phase::Inference, 0, 0, 1));
  EXPECT_EQ(model_state(p).at_end, 0);
}

// By hand: a weight allocated in setup, a gradient made in iteration 1 and freed in iteration
// 2, an optimizer state made in iteration 1, a gradient made in iteration 2 and an activation of
// iteration 2 never freed: the program ends holding 100 + 30 + 40 bytes of model state.
TEST(HeldStateOf, CountsTheModelStateLiveAtTheEnd) {
  Program p;
  p.buffers = {{100, Category::Weights, "w", kNone},
               {40, Category::Gradients, "w.grad", kNone},
               {30, Category::OptimizerState, "exp_avg", kNone},
               {40, Category::Gradients, "w.grad", kNone},
               {500, Category::Activations, "x", kNone}};
  using K = Event::Kind;
  p.events = {{K::Alloc, Category::Weights, 0},  // setup
              {K::Alloc, Category::Gradients, 1}, {K::Alloc, Category::OptimizerState, 2},  // iteration 1
              {K::Free, Category::Gradients, 1},   {K::Alloc, Category::Activations, 4}, {K::Alloc, Category::Gradients, 3}};
  p.steps = {step(Phase::Setup, 0, 0, 1), step(Phase::Backward, 1, 1, 2), step(Phase::Optimizer, 1, 2, 3), step(Phase::Optimizer, 2, 3, 4),
             step(Phase::Forward, 2, 4, 5), step(Phase::Backward, 2, 5, 6)};
  EXPECT_EQ(model_state(p).at_end, 170);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

// The plain candidate at micro-batch 4 of a run, evaluated without a budget.
Evaluation evaluate_at_four(const RunArgs& a) {
  Result<EstimateOptions> o = to_estimate_options(a, RunCommand::Estimate);
  EXPECT_TRUE(o.ok()) << o.error();
  return PlanContext(o.value(), int64_t{1} << 50, CostModel(*gpu_spec(*o.value().gpu))).evaluate(Candidate{MemoryPlan{}, 4});
}

// By hand, gpt2:layers=4 in bf16 (Psi = 67,736,832 parameters; weights 139,667,976 bytes: 2 Psi
// plus each layer's causal-mask buffer, 1,048,576 bytes, and masked_bias, 2).
TEST(HeldStateOf, PinnedByHandForOneGpuDdpAndZero) {
  const int64_t psi = 67'736'832, weights = 139'667'976;
  auto held = [](const RunArgs& a) { return evaluate_at_four(a).held_bytes; };
  // One GPU, torch.optim Adam on bf16 parameters: exp_avg and exp_avg_sq, 2 Psi each (1.13 keeps
  // `step` on the host); the gradients are gone, the step ends with zero_grad(set_to_none=True).
  EXPECT_EQ(held(small_gpt2("1")), weights + 4 * psi);  // 410,615,304
  // DDP over 2: and its rebuilt buckets, 2 Psi.
  EXPECT_EQ(held(small_gpt2("2")), weights + 4 * psi + 2 * psi);
  // DeepSpeed ZeRO-1 over 2: the bf16 parameters and this rank's fp32 partition and its two Adam
  // moments, 12 Psi / 2 bytes; the 16-bit gradients are freed by the step.
  RunArgs z = small_gpt2("2");
  z.zero = "1";
  EXPECT_EQ(held(z), weights + 12 * psi / 2);
}

// The optimizer step of the same runs, by hand (same Psi and weights as above).
TEST(HeldStateOf, OptimizerStepPinnedByHandForOneGpuDdpAndZero) {
  const int64_t psi = 67'736'832, weights = 139'667'976;
  auto in_step = [](const RunArgs& a) { return evaluate_at_four(a).optimizer_step_bytes; };
  // One GPU: the bf16 gradients (2 Psi) are still there, beside exp_avg and exp_avg_sq (4 Psi), and
  // 2.x's foreach Adam makes one list, exp_avg_sq_sqrt (2 Psi): weights + 8 Psi = 681,562,632.
  EXPECT_EQ(in_step(small_gpt2("1")), weights + 8 * psi);
  // DDP over 2: and its buckets (2 Psi): weights + 10 Psi.
  EXPECT_EQ(in_step(small_gpt2("2")), weights + 10 * psi);
  // ZeRO-1 over 2: the fp32 partition and its moments (12 Psi / 2), the full bf16 gradients
  // (2 Psi), and the step's fp32 gradient partition (4 Psi / 2): weights + 10 Psi.
  RunArgs z = small_gpt2("2");
  z.zero = "1";
  EXPECT_EQ(in_step(z), weights + 10 * psi);
  // ZeRO-2 over 2: the gradients are this rank's partition only, grads_in_partition (2 Psi / 2),
  // and the step allocates the fp32 gradient partition before it frees them: weights + 9 Psi.
  z.zero = "2";
  EXPECT_EQ(in_step(z), weights + 9 * psi);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
