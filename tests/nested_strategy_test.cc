// `plan --strategy checkpoint` with Rotor's schedules (docs/planning.md's table, A100-SXM4-40GB):
// on bert-large at batch 16, seq 512 and 50 % of its activations the Rotor plan is chosen, is
// really nested, fits when re-estimated on its own, and is faster than the single-level segments
// the strategy would otherwise return; on resnet50 at batch 128 and 30 % it is faster too (its
// sweeps are all at one level there).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "estimate/estimate.h"
#include "plan/planner.h"
#include "schedule/memory_plan.h"

namespace headroom {
namespace {

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

TEST(NestedStrategy, BertLargeAt50PercentNestsAndBeatsSegments) {
  // 24 regions, 3 of them inside another (docs/planning.md): +11.1 % against the segments' +11.5 %.
  EXPECT_EQ(check_rotor_plan("bert-large", 16, 512, 0.5), 3);
}

TEST(NestedStrategy, Resnet50At30PercentBeatsSegments) {
  // 5 regions, none nested: +18.9 % against the segments' +21.5 %.
  EXPECT_EQ(check_rotor_plan("resnet50", 128, 0, 0.3), 0);
}

}  // namespace
}  // namespace headroom
