// `plan --strategy checkpoint` with Rotor's schedules (docs/planning.md's table, A100-SXM4-40GB):
// on bert-large at batch 16, seq 512 and 54 % of its activations the Rotor plan is chosen, is
// really nested, fits when re-estimated on its own, and is faster than the single-level segments
// the strategy would otherwise return; on resnet50 at batch 128 and 30 % it is faster too (its
// sweeps are all at one level there).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "estimate/estimate.h"
#include "graph_dsl.h"
#include "plan/planner.h"
#include "report/plan_report.h"
#include "schedule/memory_plan.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

// The chosen plan of `plan MODEL --strategy checkpoint --activation-budget f`, checked as above;
// returns how many of its regions lie inside another.
int check_rotor_plan(const std::string& model, int64_t batch, int64_t seq, double f) {
  EstimateOptions run;
  run.model = model;
  run.batch = batch;
  if (seq > 0) run.seq = seq;
  run.mode = RunMode::Training;
  run.optimizer = OptimizerKind::Adam;
  run.gpu = GpuOptions{};
  run.gpu->gpu = "A100-SXM4-40GB";
  // The scenarios were sized under the `activation` workspace policy. cuDNN 9's rule (cudnn9, the
  // CUDA default) makes resnet50's strided 1x1 convolutions at batch 128 borrow input + output
  // (616 MB for layer2's downsample), so at 30% no checkpoint plan fits; the planner's behaviour
  // checked here does not depend on which workspaces the convolutions borrow.
  run.conv_workspace = ConvWorkspace::Activation;
  PlanRequest req;
  req.run = run;
  req.activation_fraction = f;
  req.strategy = "checkpoint";
  Result<Plan> r = make_plan(req);
  EXPECT_TRUE(r.ok()) << r.error();
  if (!r.ok()) return -1;
  const Plan& p = r.value();
  EXPECT_TRUE(p.feasible);
  const StrategyResult& s = p.chosen;
  EXPECT_NE(s.note.find("(Rotor)"), std::string::npos) << s.note;
  const std::vector<CheckpointSegment>& rs = s.candidate.plan.checkpoints;
  int inner = 0;
  for (size_t j = 0; j < rs.size(); ++j) {
    bool inside = false;
    for (size_t i = 0; i < j; ++i) inside = inside || rs[i].contains(rs[j]);
    inner += inside ? 1 : 0;
  }
  // Faster than the segments (their step time is in the note: "single-level segments: X ms").
  const size_t at = s.note.find("single-level segments: ");
  EXPECT_NE(at, std::string::npos) << s.note;
  if (at == std::string::npos) return -1;
  const double segments_ms = std::strtod(s.note.c_str() + at + 23, nullptr);
  EXPECT_LT(s.eval.time.total_ms, segments_ms);
  // Re-estimated alone, on a device of the budget's size: the same peak, within the budget.
  EstimateOptions o = run;
  o.plan = s.candidate.plan;
  o.gpu->gpu_memory = p.budget_bytes;
  Result<Estimate> e = estimate(o);
  EXPECT_TRUE(e.ok()) << e.error();
  if (!e.ok() || !e.value().device) return -1;
  EXPECT_EQ(e.value().device->device_total_bytes, s.eval.peak_bytes);
  EXPECT_LE(e.value().device->device_total_bytes, p.budget_bytes);
  return inner;
}

EstimateOptions bert_large_a100() {
  EstimateOptions run;
  run.model = "bert-large";
  run.batch = 16;
  run.seq = 512;
  run.mode = RunMode::Training;
  run.optimizer = OptimizerKind::Adam;
  run.gpu = GpuOptions{};
  run.gpu->gpu = "A100-SXM4-40GB";
  return run;
}

TEST(NestedStrategy, BertLargeAt50PercentNestsAndBeatsSegments) {
  // 23 regions, 3 of them inside another: 1,610.5 ms against the segments' 1,616.0 ms. At 50 %
  // (docs/planning.md's row) the CUDA profile's PyTorch 2.x rules (the softmax backward's
  // temporary, gradients summed in place) now make the 18 single-level segments the faster
  // plan (+11.0 %), so the nesting case was pinned at 55 %; the CUDA reductions' staging
  // buffers of the bias gradients (training/cuda_reduce.h) moved the peak the fraction is taken
  // of (54 %), and again when they split by the A100's 108 SMs instead of the H100's 132 (its
  // 8,192 rows of bias gradient stage less): 52 %, where the plan nests as before.
  EXPECT_EQ(check_rotor_plan("bert-large", 16, 512, 0.52), 3);
}

TEST(NestedStrategy, JsonRegionsReEstimateThePlan) {
  // decisions.checkpoint_regions are the chosen plan's regions as --checkpoint ranges, nested
  // ones included: estimate with them alone gives the plan's peak (the same interpreter run).
  const EstimateOptions run = bert_large_a100();
  PlanRequest req;
  req.run = run;
  req.activation_fraction = 0.52;
  req.strategy = "checkpoint";
  Result<Plan> r = make_plan(req);
  ASSERT_TRUE(r.ok()) << r.error();
  const Plan& p = r.value();
  ASSERT_EQ(p.checkpoint_regions.size(), p.chosen.candidate.plan.checkpoints.size());
  ASSERT_EQ(p.checkpoint_regions.size(), 23u);  // 3 inside another (above)
  EXPECT_NE(plan_json(p).find("\"checkpoint_regions\": [\n      \"" + p.checkpoint_regions.front() + "\""), std::string::npos);
  EstimateOptions o = run;
  o.checkpoint_ranges = p.checkpoint_regions;
  o.gpu->gpu_memory = p.budget_bytes;
  Result<Estimate> e = estimate(o);
  ASSERT_TRUE(e.ok()) << e.error();
  ASSERT_TRUE(e.value().device.has_value());
  EXPECT_EQ(e.value().device->device_total_bytes, p.chosen.eval.peak_bytes);
}

TEST(NestedStrategy, Resnet50At28PercentBeatsSegments) {
  // 5 regions, none nested: +18.9 % against the segments' +21.5 %. (This was the 30% budget
  // before the CUDA profile took cuDNN's allocation order, each gradient before its call's
  // workspace and batch norm's output before its statistics, which moved the peak the fraction
  // is taken of; at 30% the single-level segments are chosen now.)
  EXPECT_EQ(check_rotor_plan("resnet50", 128, 0, 0.28), 0);
}

// The regions of a plan that lie inside another.
int nested_regions(const std::vector<CheckpointSegment>& rs) {
  int inner = 0;
  for (size_t j = 0; j < rs.size(); ++j) {
    bool inside = false;
    for (size_t i = 0; i < j; ++i) inside = inside || rs[i].contains(rs[j]);
    inner += inside ? 1 : 0;
  }
  return inner;
}

// The chosen plan re-estimated on its own (its regions, offloads and micro-batch) gives the peak
// the planner judged it by, within the budget.
void expect_reestimated(const EstimateOptions& run, const Plan& p) {
  EstimateOptions o = run;
  o.plan = p.chosen.candidate.plan;
  if (p.chosen.candidate.micro_batch != 0) o.micro_batch = p.chosen.candidate.micro_batch;
  if (o.gpu) o.gpu->gpu_memory = p.budget_bytes;
  Result<Estimate> e = estimate(o);
  ASSERT_TRUE(e.ok()) << e.error();
  const int64_t peak = o.gpu ? e.value().device->device_total_bytes : e.value().peak_bytes;
  EXPECT_EQ(peak, p.chosen.eval.peak_bytes);
  EXPECT_LE(peak, p.budget_bytes);
}

TEST(NestedStrategy, AccumulateCheckpointNestsWhereItWins) {
  // mlp:layers=32,dim=256, batch 2048, CPU profile, SGD (single tensor), 25 MiB. With single-level
  // segments only, the best was 256 x 8 with 2 segments (+210.2 %, the binary before nested joint
  // plans); at micro-batch 512 the segments do not fit but Rotor's regions do, 5 of 12 nested:
  // +135.5 %.
  EstimateOptions run;
  run.model = "mlp:layers=32,dim=256";
  run.batch = 2048;
  run.mode = RunMode::Training;
  run.optimizer = OptimizerKind::Sgd;
  run.foreach = false;
  run.device = "cpu";
  PlanRequest req;
  req.run = run;
  req.budget_bytes = int64_t{25} << 20;
  req.strategy = "accumulate+checkpoint";
  Result<Plan> r = make_plan(req);
  ASSERT_TRUE(r.ok()) << r.error();
  const Plan& p = r.value();
  ASSERT_TRUE(p.feasible);
  EXPECT_EQ(p.chosen.eval.micro_batch, 512);
  EXPECT_NE(p.chosen.note.find("(Rotor); single-level segments do not fit"), std::string::npos) << p.chosen.note;
  EXPECT_EQ(nested_regions(p.chosen.candidate.plan.checkpoints), 5);
  expect_reestimated(run, p);
}

// `plan MODEL --strategy offload+checkpoint` on the A100 profile at a fraction of the activations.
Plan offload_checkpoint_plan(const EstimateOptions& run, double f) {
  PlanRequest req;
  req.run = run;
  req.activation_fraction = f;
  req.strategy = "offload+checkpoint";
  Result<Plan> r = make_plan(req);
  EXPECT_TRUE(r.ok()) << r.error();
  return r.ok() ? r.value() : Plan{};
}

TEST(NestedStrategy, OffloadCheckpointNestsWhereItWins) {
  // bert-large at 30 %: 24 offloaded layers and Rotor's regions over the rest (2 nested), +15.7 %,
  // against +18.2 % with single-level segments (12 offloaded layers, 21 segments, the binary
  // before); the note gives the segments' time on the same offloads.
  const EstimateOptions run = bert_large_a100();
  const Plan p = offload_checkpoint_plan(run, 0.3);
  ASSERT_TRUE(p.feasible);
  const StrategyResult& s = p.chosen;
  EXPECT_NE(s.note.find("(Rotor)"), std::string::npos) << s.note;
  EXPECT_GT(nested_regions(s.candidate.plan.checkpoints), 0);
  EXPECT_FALSE(s.candidate.plan.offload.empty());
  const size_t at = s.note.find("single-level segments: ");
  ASSERT_NE(at, std::string::npos) << s.note;
  EXPECT_LT(s.eval.time.total_ms, std::strtod(s.note.c_str() + at + 23, nullptr));
  expect_reestimated(run, p);
}

TEST(NestedStrategy, ReRunOfAnOffloadedInputFetchesItInItsOwnStep) {
  // bert-base:layers=2, batch 2, seq 128: layer 1's query is offloaded (it saves its input, layer
  // 0's output hidden state) and a region from context.permute to attention.output.LayerNorm
  // reads that hidden state too (the residual add), so its checkpoint keeps it. Before the re-run
  // it must be on the device again: it was copied back between steps ("steps must tile the
  // events", an internal error; offload+checkpoint on bert-large hit it). Now a step of its own
  // allocates the copy, 2 x 128 x 768 x 4 = 786,432 bytes, right before the re-run, in each
  // training step and for both implementations.
  for (CheckpointImpl impl : {CheckpointImpl::Reentrant, CheckpointImpl::NonReentrant}) {
    EstimateOptions o;
    o.model = "bert-base:layers=2,vocab=1000";
    o.batch = 2;
    o.seq = 128;
    o.mode = RunMode::Training;
    o.optimizer = OptimizerKind::Sgd;
    o.gpu = GpuOptions{};
    o.gpu->gpu = "A100-SXM4-40GB";
    o.keep_program = true;
    o.offload_ops = {"bert.encoder.layer.1.attention.self.query"};
    o.checkpoint_ranges = {"bert.encoder.layer.1.attention.self.context.permute..bert.encoder.layer.1.attention.output.LayerNorm"};
    o.plan.checkpoint_impl = impl;
    Result<Estimate> r = estimate(o);
    ASSERT_TRUE(r.ok()) << r.error();
    const Program& p = r.value().program;
    EXPECT_EQ(testing::check_oracles(p), "");
    int fetches = 0;
    for (size_t k = 0; k + 1 < p.steps.size(); ++k) {
      const Step& st = p.steps[k];
      if (st.label.rfind("prefetch for the re-run (", 0) != 0) continue;
      ++fetches;
      EXPECT_TRUE(p.steps[k + 1].recompute) << p.steps[k + 1].label;
      ASSERT_EQ(st.end_event - st.first_event, 1);
      const Event& e = p.events[static_cast<size_t>(st.first_event)];
      EXPECT_EQ(e.kind, Event::Kind::Alloc);
      EXPECT_EQ(p.buffers[static_cast<size_t>(e.buffer)].bytes, 786432);
    }
    EXPECT_EQ(fetches, 2) << checkpoint_impl_name(impl);  // one per training step
  }
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
