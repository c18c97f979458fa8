// The planner: the cost model on hand-derived cases, the segment DP against exhaustive search,
// the sqrt(n) rule's O(sqrt L) memory, and the oracle that every plan called feasible fits its
// budget when re-simulated independently (estimate() with the plan, on the caching allocator).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "estimate/estimate.h"
#include "cost/cost_model.h"
#include "schedule/checkpoint_region.h"
#include "plan/planner.h"
#include "plan/segment_dp.h"
#include "plan/stages.h"
#include "sim/simulate.h"

namespace headroom {
namespace {

GpuSpec round_gpu(double flops, double bandwidth, double link) {
  GpuSpec g;
  g.name = "round";
  g.fp32_flops = flops;
  g.memory_bandwidth_bytes_per_s = bandwidth;
  g.host_link.bandwidth_bytes_per_s = link;
  return g;
}

CostConstants exact_constants() {
  CostConstants c;
  c.compute_efficiency = 1;
  c.memory_efficiency = 1;
  c.host_link_efficiency = 1;
  c.copy_latency_us = 0;
  return c;
}

TEST(CostModel, LinearIsComputeBoundOnTheRoofline) {
  // mlp:layers=1,dim=1024 at batch 1024: op 0 is Linear(1024, 1024).
  // FLOPs = 2 * 1024 * 1024 * 1024 = 2,147,483,648 -> at 1e12 FLOP/s: 2.147483648 ms.
  // Bytes = x 4 MiB + W 4 MiB + b 4 KiB + out 4 MiB = 12,587,008 -> at 1e11 B/s: 0.126 ms.
  // Compute bound: 2.147483648 ms + 6 us launch = 2.153483648 ms; backward 2x.
  EstimateOptions o;
  o.model = "mlp:layers=1,dim=1024";
  Graph g = build_graph(o, 1024);
  CostModel m(round_gpu(1e12, 1e11, 1e10), exact_constants());
  const Op& lin = g.op(0);
  ASSERT_EQ(lin.kind, OpKind::Linear);
  EXPECT_EQ(lin.flops, 2147483648LL);
  EXPECT_EQ(lin.bytes_moved, 12587008);
  OpCost c = m.op_cost(g, lin);
  EXPECT_NEAR(c.forward_ms, 2.153483648, 1e-12);
  EXPECT_NEAR(c.backward_ms, 2 * 2.153483648, 1e-12);
  // GELU (op 1) reads 4 MiB and writes 4 MiB: 8,388,608 B at 1e11 B/s = 0.08388608 ms, memory
  // bound (its 4 FLOP/element = 16.8 MFLOP take 0.0168 ms); + 6 us.
  EXPECT_NEAR(m.op_cost(g, g.op(1)).forward_ms, 0.08388608 + 0.006, 1e-12);
  // One copy of 1e8 bytes at 1e10 B/s: 10 ms.
  EXPECT_NEAR(m.transfer_ms(100000000), 10.0, 1e-12);
}

// Two-layer MLP with offloading of GELU 1's and linear 2's saved activations (the program of
// MemoryPlan.OffloadFreesSavedActivationsUntilTheBackwardPrefetchesThem): each op costs 1 ms
// of launch (compute ~ 0 on an infinitely fast GPU), each backward 2 ms, Adam-free SGD launches
// 4 kernels per parameter tensor (4 tensors: 16 ms). Transfers are 32 bytes.
struct OffloadRun {
  MemoryPlan plan;
  Graph g;
  Program p;
  CostModel m;
};
OffloadRun offload_run(double link_bytes_per_s) {
  EstimateOptions o;
  o.model = "mlp:layers=2,dim=4";
  o.batch = 2;
  o.optimizer = OptimizerKind::Sgd;
  o.foreach = false;
  o.cublas_workspace_bytes = 0;
  o.iterations = 1;
  o.plan.offload = {1, 2};
  Graph g = build_graph(o, 2);
  Program p = build_program(g, schedule_options(o));
  CostConstants c = exact_constants();
  c.launch_us = 1000;
  return {o.plan, std::move(g), std::move(p), CostModel(round_gpu(1e30, 1e30, link_bytes_per_s), c)};
}
IterationTime offload_timeline(double link_bytes_per_s) {
  OffloadRun r = offload_run(link_bytes_per_s);
  return iteration_time(r.m, r.g, r.p, r.plan, OptimizerKind::Sgd, 1);
}

TEST(CostModel, CopiesHiddenBehindComputeCostNothing) {
  // 32 B at 32,000 B/s = 1 ms per copy. Steps: 1..5 forward (ops 0-3, loss: 1 ms each), 6 seed,
  // 7 loss node, 8..11 nodes 3..0 (2 ms each), then the optimizer (16 ms).
  // "0" out: ready at the end of step 1 (t=1), done 2, due at the end of step 2 (t=2): no wait.
  // "1" out: ready t=2, done 3, due end of step 3 (t=3). "1" in: issued at the start of step 8
  // (t=7), done 8, due at step 9's start (t=9). "0" in: issued t=9, done 10, due t=11.
  // Total 5 + 10 + 16 = 31 ms, no stall; the engines were busy 4 ms.
  IterationTime t = offload_timeline(32000);
  EXPECT_NEAR(t.compute_ms, 15, 1e-9);
  EXPECT_NEAR(t.optimizer_ms, 16, 1e-9);
  EXPECT_NEAR(t.stall_ms, 0, 1e-9);
  EXPECT_NEAR(t.transfer_ms, 4, 1e-9);
  EXPECT_EQ(t.transfer_bytes, 4 * 32);
  EXPECT_NEAR(t.total_ms, 31, 1e-9);
}

TEST(CostModel, SlowCopiesStallAtTheirDeadlines) {
  // 32 B at 8,000 B/s = 4 ms per copy.
  // step 1 ends t=1: "0" out starts, done 5. Step 2 ends t=2: "1" out waits for the engine
  // (5), done 9; "0" due now: stall 3 -> t=5. Step 3 ends t=6: "1" due: stall 3 -> t=9.
  // Steps 4, 5 -> 11; seed; step 7 -> 13. Step 8 starts: "1" in, done 17; ends 15. Step 9
  // starts: wait 2 -> 17; "0" in, done 21; ends 19. Step 10 starts: wait 2 -> 21; ends 23.
  // Step 11 -> 25; optimizer -> 41. Stalls 3 + 3 + 2 + 2 = 10.
  IterationTime t = offload_timeline(8000);
  EXPECT_NEAR(t.stall_ms, 10, 1e-9);
  EXPECT_NEAR(t.total_ms, 41, 1e-9);
}

TEST(CostModel, StepTimesAreTheTimelineOfIterationTime) {
  // The program of SlowCopiesStallAtTheirDeadlines: the counted steps span its 41 ms, each step
  // ends where the next starts, and the stalls widen the steps that wait: step 1 [0, 1), step 2
  // [1, 5) (1 ms + 3 ms waiting for "0" out), step 3 [5, 9) (1 ms + 3 ms for "1" out).
  OffloadRun r = offload_run(8000);
  const Program& p = r.p;
  StepTimes t = step_times(r.m, r.g, p, r.plan, OptimizerKind::Sgd, 1);
  IterationTime it = iteration_time(r.m, r.g, p, r.plan, OptimizerKind::Sgd, 1);
  ASSERT_EQ(t.start_ms.size(), p.steps.size());
  std::vector<size_t> counted;
  for (size_t s = 0; s < p.steps.size(); ++s) {
    if (s + 1 < p.steps.size()) {
      EXPECT_EQ(t.end_ms[s], t.start_ms[s + 1]) << s;
    }
    EXPECT_LE(t.start_ms[s], t.end_ms[s]) << s;
    if (p.steps[s].iteration == 1 && p.steps[s].phase != Phase::Setup) counted.push_back(s);
  }
  ASSERT_GE(counted.size(), 3u);
  const double t0 = t.start_ms[counted.front()];
  EXPECT_NEAR(t.end_ms[counted.back()] - t0, it.total_ms, 1e-9);
  EXPECT_NEAR(it.total_ms, 41, 1e-9);
  EXPECT_NEAR(t.end_ms[counted[0]] - t0, 1, 1e-9);
  EXPECT_NEAR(t.end_ms[counted[1]] - t0, 5, 1e-9);
  EXPECT_NEAR(t.end_ms[counted[2]] - t0, 9, 1e-9);
}

// The segment model of segment_dp.h evaluated directly on one labelling of the stages
// (0 stored, 1 starts a checkpointed segment, 2 continues it), in the DP's slots.
struct Labelled {
  bool feasible;
  double ms;
};
Labelled evaluate_labels(const std::vector<SegmentStage>& st, const std::vector<int>& label, int64_t budget, int slots) {
  const int64_t unit = std::max<int64_t>(1, budget / slots);
  const int64_t cap = std::min<int64_t>(slots, budget / unit);
  auto sl = [&](int64_t v) { return v <= 0 ? 0 : (v + unit - 1) / unit; };
  int64_t m = 0;
  double ms = 0;
  for (size_t i = 0; i < st.size();) {
    if (label[i] == 0) {
      m += sl(st[i].kept_bytes);
      if (m > cap) return {false, 0};
      ++i;
      continue;
    }
    size_t j = i;
    int64_t full = sl(st[i].kept_bytes);
    while (j + 1 < st.size() && label[j + 1] == 2) full += sl(st[++j].kept_bytes);
    if (m + full > cap) return {false, 0};
    for (size_t k = i; k <= j; ++k) ms += st[k].forward_ms;
    m += sl(st[i].boundary_bytes);
    if (m > cap) return {false, 0};
    i = j + 1;
  }
  return {true, ms};
}

TEST(SegmentDp, EqualsExhaustiveSearchOnRandomChains) {
  std::mt19937 rng(7);
  int compared = 0, infeasible = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 7);
    std::vector<SegmentStage> st(static_cast<size_t>(n));
    int64_t total = 0;
    for (SegmentStage& s : st) {
      s.kept_bytes = 1 + static_cast<int64_t>(rng() % 1000);
      s.boundary_bytes = 1 + static_cast<int64_t>(rng() % 300);
      s.forward_ms = 0.5 + static_cast<double>(rng() % 100) / 10.0;
      total += s.kept_bytes;
    }
    const int64_t budget = total * static_cast<int64_t>(20 + rng() % 90) / 100;
    const int slots = 50 + static_cast<int>(rng() % 200);
    double best = std::numeric_limits<double>::infinity();
    std::vector<int> label(static_cast<size_t>(n), 0);
    std::function<void(size_t)> go = [&](size_t i) {
      if (i == label.size()) {
        Labelled l = evaluate_labels(st, label, budget, slots);
        if (l.feasible) best = std::min(best, l.ms);
        return;
      }
      for (int v = 0; v < 3; ++v) {
        if (v == 2 && (i == 0 || label[i - 1] == 0)) continue;
        label[i] = v;
        go(i + 1);
      }
    };
    go(0);
    SegmentPlan p = solve_segments(st, budget, slots);
    ASSERT_EQ(p.feasible, best < std::numeric_limits<double>::infinity()) << "trial " << trial;
    if (!p.feasible) {
      ++infeasible;
      continue;
    }
    EXPECT_NEAR(p.recompute_ms, best, 1e-9) << "trial " << trial;
    // The reconstructed segments cost what the DP says and satisfy the model.
    std::vector<int> mine(static_cast<size_t>(n), 0);
    for (const SegmentRange& r : p.segments) {
      mine[static_cast<size_t>(r.first)] = 1;
      for (int k = r.first + 1; k <= r.last; ++k) mine[static_cast<size_t>(k)] = 2;
    }
    Labelled l = evaluate_labels(st, mine, budget, slots);
    EXPECT_TRUE(l.feasible) << "trial " << trial;
    EXPECT_NEAR(l.ms, p.recompute_ms, 1e-9) << "trial " << trial;
    ++compared;
  }
  EXPECT_GT(compared, 100);
  EXPECT_GT(infeasible, 0);
}

TEST(SegmentDp, SqrtSegmentsCoverAllButTheLastRun) {
  // 16 stages: 4 segments of 4, the last one kept: [0,3], [4,7], [8,11].
  std::vector<SegmentRange> s = sqrt_segments(16);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0], (SegmentRange{0, 3}));
  EXPECT_EQ(s[2], (SegmentRange{8, 11}));
  EXPECT_TRUE(sqrt_segments(1).empty());
}

// Activation memory (peak less what the same run holds without any activation: weights,
// inputs, gradients) of an MLP of L layers, with and without sqrt(n).
int64_t activation_peak(int layers, bool sqrt_plan) {
  EstimateOptions o;
  o.model = "mlp:layers=" + std::to_string(layers) + ",dim=32";
  o.batch = 4096;
  o.optimizer = OptimizerKind::Sgd;
  o.foreach = false;
  o.cublas_workspace_bytes = 0;
  o.iterations = 1;
  Graph g = build_graph(o, 4096);
  if (sqrt_plan) {
    std::vector<Stage> stages = chain_stages(g);
    for (const SegmentRange& r : sqrt_segments(static_cast<int>(stages.size()))) {
      // As the sqrt strategy places them: a segment reading only the model input would give its
      // parameters no gradients (validate_plan rejects it), so it starts one stage later.
      CheckpointSegment seg{stages[static_cast<size_t>(r.first)].first, stages[static_cast<size_t>(r.last)].last};
      if (!checkpoint_region_problem(g, seg).empty()) seg.first = stages[static_cast<size_t>(r.first) + 1].first;
      o.plan.checkpoints.push_back(seg);
    }
  }
  Result<Estimate> e = estimate(o);
  EXPECT_TRUE(e.ok());
  // Weights + their gradients (SGD: no state) + input and target (4096 x 32 x 4 each). Every
  // activation is 512 KiB; a layer's weights 4.2 KB: activations dominate.
  const int64_t fixed = 2 * g.weights_bytes() + 2 * 4096 * 32 * 4;
  return e.value().peak_bytes - fixed;
}

TEST(SqrtCheckpointing, ActivationMemoryGrowsAsTheSquareRootOfDepth) {
  // Keep everything: activation memory is linear in L (x4 from 64 to 256 layers, up to the
  // constant of the loss and the backward's transient gradients). sqrt(n): x2 (sqrt 4).
  const double keep = static_cast<double>(activation_peak(256, false)) / static_cast<double>(activation_peak(64, false));
  const double sq = static_cast<double>(activation_peak(256, true)) / static_cast<double>(activation_peak(64, true));
  EXPECT_GT(keep, 3.8);
  EXPECT_LT(keep, 4.2);
  EXPECT_GT(sq, 1.6);
  EXPECT_LT(sq, 2.4);
  // And the saving at depth 256 is large: under a fifth of keep-everything.
  EXPECT_LT(activation_peak(256, true) * 5, activation_peak(256, false));
}

// ---- The oracle: every plan that says it fits, fits. --------------------------------------
void expect_plans_fit(EstimateOptions run, double activation_fraction) {
  run.gpu = GpuOptions{};
  run.gpu->gpu = "A100-SXM4-40GB";
  PlanRequest req;
  req.run = run;
  req.activation_fraction = activation_fraction;
  Result<Plan> r = make_plan(req);
  ASSERT_TRUE(r.ok()) << r.error();
  const Plan& p = r.value();
  req.budget_bytes = p.budget_bytes;
  int feasible = 0;
  auto check = [&](const StrategyResult& s) {
    if (!s.applicable || !s.eval.feasible) return;
    ++feasible;
    EstimateOptions o = run;
    o.plan = s.candidate.plan;
    if (s.single_tensor_optimizer) o.foreach = false;
    if (s.candidate.micro_batch > 0 && s.candidate.micro_batch != run.batch) o.micro_batch = s.candidate.micro_batch;
    o.gpu->gpu_memory = *req.budget_bytes;
    Result<Estimate> e = estimate(o);
    ASSERT_TRUE(e.ok()) << e.error();
    ASSERT_TRUE(e.value().device.has_value());
    EXPECT_LE(e.value().device->device_total_bytes, *req.budget_bytes) << run.model << " " << s.name;
    EXPECT_FALSE(e.value().device->allocator_oom) << run.model << " " << s.name;
    EXPECT_EQ(e.value().device->device_total_bytes, s.eval.peak_bytes) << run.model << " " << s.name;
  };
  for (const StrategyResult& s : p.alternatives) check(s);
  if (p.feasible) check(p.chosen);
  EXPECT_GT(feasible, 0) << run.model << " at " << activation_fraction;
}

TEST(PlannerOracle, ResNet18) {
  EstimateOptions o;
  o.model = "resnet18";
  o.batch = 64;
  expect_plans_fit(o, 0.5);
  expect_plans_fit(o, 0.3);
}

TEST(PlannerOracle, BertAndGpt2) {
  EstimateOptions o;
  o.model = "bert-base";
  o.batch = 16;
  o.seq = 256;
  expect_plans_fit(o, 0.5);
  o.model = "gpt2";
  o.batch = 8;
  o.seq = 512;
  expect_plans_fit(o, 0.5);
}

TEST(Planner, FitsAsIsChoosesNothing) {
  PlanRequest req;
  req.run.model = "mlp:layers=2,dim=64";
  req.run.batch = 8;
  req.budget_bytes = int64_t{1} << 30;
  Result<Plan> r = make_plan(req);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_TRUE(r.value().feasible);
  EXPECT_EQ(r.value().strategy, "none");
  EXPECT_EQ(r.value().alternatives.size(), strategy_names().size());
}

TEST(Planner, ImpossibleBudgetNamesTheSmallestPeak) {
  // 1 MiB cannot hold resnet18's 46.8 MB of weights: nothing fits; the smallest peak comes
  // from some strategy and is above the budget.
  PlanRequest req;
  req.run.model = "resnet18";
  req.run.batch = 8;
  req.budget_bytes = int64_t{1} << 20;
  Result<Plan> r = make_plan(req);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_FALSE(r.value().feasible);
  EXPECT_GT(r.value().smallest_peak_bytes, *req.budget_bytes);
  EXPECT_FALSE(r.value().smallest_peak_strategy.empty());
}

TEST(Planner, BadRequestsAreInputErrors) {
  PlanRequest req;
  req.run.model = "resnet18";
  EXPECT_FALSE(make_plan(req).ok());  // neither --gpu nor --budget
  req.budget_bytes = 1 << 30;
  req.strategy = "magic";
  Result<Plan> r = make_plan(req);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("unknown strategy 'magic'"), std::string::npos);
  req.strategy = "auto";
  req.run.mode = RunMode::Inference;
  EXPECT_FALSE(make_plan(req).ok());
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

TEST(ModelChain, ResNet18ChainHasItsStagesTimesAndInput) {
  // resnet18 at batch 8: stages conv1, bn1+relu, maxpool, 8 BasicBlocks, avgpool, flatten, fc:
  // 14. x_0 = the images, 8 x 3 x 224 x 224 x 4 = 4,816,896 bytes; x_L = the logits,
  // 8 x 1000 x 4 = 32,000 bytes. The stages' forward times add up to every model op's forward.
  PlanRequest req;
  req.run.model = "resnet18";
  req.run.batch = 8;
  req.budget_bytes = int64_t{8} << 30;
  Result<Plan> r = make_plan(req);
  ASSERT_TRUE(r.ok()) << r.error();
  const Chain& c = r.value().chain;
  ASSERT_EQ(c.length(), 14);
  EXPECT_EQ(c.x_bytes.front(), 4816896);
  EXPECT_EQ(c.x_bytes.back(), 32000);
  EstimateOptions o = req.run;
  Graph g = build_graph(o, 8);
  CostModel m(DeviceCatalog::builtin().find(kDefaultCostGpu));
  double model_ms = 0, chain_ms = 0;
  for (const Op& op : g.ops) {
    if (op.stage == OpStage::Model) model_ms += m.op_cost(g, op).forward_ms;
  }
  for (double f : c.fwd_ms) chain_ms += f;
  EXPECT_NEAR(chain_ms, model_ms, 1e-9);
  for (int i = 0; i < c.length(); ++i) EXPECT_GE(c.xbar(i + 1), c.x(i + 1));
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

TEST(PlannerOracle, SingleTensorPassWhenTheOptimizerHoldsThePeak) {
  // An MLP at batch 1: Adam's foreach update (PyTorch 2.x: one parameter-sized list on top of
  // weights P, gradients P and two moments 2P: 5P) holds the peak, which no activation strategy
  // touches. mlp:layers=8,dim=1024: P = 8 x (1024 x 1024 + 1024) x 4 = 33,587,200 bytes. The
  // single-tensor loop holds at most a weight's sqrt and denom (the denom it carries over is a
  // bias's), 2 x 4,194,304 = 0.25P: 4.25P, below 95% of 5P even with the two cuBLAS workspaces
  // (2 x 8,519,680, about 0.5P) on both. (With one weight per half of the parameters the loop's
  // two weight-sized temporaries equal the one list: mlp:layers=2,dim=2048 peaks at 5P both ways.)
  EstimateOptions o;
  o.model = "mlp:layers=8,dim=1024";
  o.batch = 1;
  o.gpu = GpuOptions{};
  o.gpu->gpu = "A100-SXM4-40GB";
  o.gpu->context_bytes = 0;
  PlanRequest probe;
  probe.run = o;
  Result<Plan> base = make_plan(probe);
  ASSERT_TRUE(base.ok()) << base.error();
  ASSERT_EQ(base.value().baseline.peak_phase, Phase::Optimizer);
  // 5% below the foreach peak: only the single-tensor update fits.
  PlanRequest req = probe;
  req.budget_bytes = base.value().baseline.peak_bytes * 95 / 100;
  Result<Plan> r = make_plan(req);
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_TRUE(r.value().feasible);
  EXPECT_TRUE(r.value().chosen.single_tensor_optimizer);
  EXPECT_FALSE(r.value().foreach);
  EstimateOptions check = o;
  check.foreach = false;
  check.plan = r.value().chosen.candidate.plan;
  if (r.value().chosen.candidate.micro_batch > 0 && r.value().chosen.candidate.micro_batch != 1) check.micro_batch = r.value().chosen.candidate.micro_batch;
  check.gpu->gpu_memory = *req.budget_bytes;
  Result<Estimate> e = estimate(check);
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_LE(e.value().device->device_total_bytes, *req.budget_bytes);
}

}  // namespace
}  // namespace headroom
