// Non-reentrant checkpoint regions (torch.utils.checkpoint(..., use_reentrant=False), 1.13's
// _checkpoint_without_reentrant) on graphs small enough to derive every byte by hand, beside the
// reentrant numbers of nested_checkpoint_test. The measured counterparts are validation/ckpt.py's
// "-nr" schemes (validation_test).
#include <gtest/gtest.h>

#include "estimate/estimate.h"
#include "graph_dsl.h"
#include "ir/graph.h"
#include "options/run_args.h"
#include "plan/planner.h"
#include "schedule/memory_plan.h"
#include "tiny_mlp_options.h"
#include "util/error.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

// mlp:layers=3,dim=4, batch 2, fp32, SGD on the cuda profile (no RNG state is counted there).
// Ops: 0 linear, 1 GELU, 2 linear, 3 GELU, 4 linear, 5 GELU, then the MSE loss. Persistent 304
// bytes; every activation 32. A linear saves its input (and weight), a GELU its input.
EstimateOptions non_reentrant(std::vector<CheckpointSegment> regions) {
  EstimateOptions o = testing::tiny_mlp_sgd_options(3);
  o.plan.checkpoints = std::move(regions);
  o.plan.checkpoint_impl = CheckpointImpl::NonReentrant;
  return o;
}

std::vector<std::string> recompute_labels(const Program& p) {
  std::vector<std::string> out;
  for (const Step& s : p.steps) {
    if (s.recompute) out.push_back(s.label);
  }
  return out;
}

TEST(NonReentrantCheckpoint, ReRunsAtTheFirstUnpackAndKeepsNoOutput) {
  // Region {2..5}. forward: as reentrant (nested_checkpoint_test OuterRegionAlone): the ops run
  //   with grad but their nodes keep nothing, the closure keeps "1": peak 464, then 432.
  // backward: seed, loss node: 5.grad -> 468. Node 5 (GELU, saves "4") unpacks first: the re-run
  //   keeps what the region's nodes save: +2 500 (GELU 3 keeps it), +3 532 (linear 4), +4 564
  //   (GELU 5), +5 596 (`_unused`, the return value) -> 564 when unpack returns.
  //   node 5: 4.grad -> 596, -5.grad, -"4" -> 532; node 4: 3.grad 32, dW 64, db 16 -> 644,
  //   -4.grad, -"3" -> 580; node 3: 2.grad -> 612, -3.grad, -"2" -> 548; node 2: 1.grad, dW, db
  //   -> 660 (peak), then the closure goes with node 2's variables.
  //   Reentrant peaks at 724 here: its backward holds the re-run output "5" and 5.grad (64 B)
  //   until the region's backward returns.
  Result<Estimate> r = estimate(non_reentrant({{2, 5}}));
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(testing::check_oracles(r.value().program), "");
  EXPECT_EQ(recompute_labels(r.value().program),
            (std::vector<std::string>{"recompute 2", "recompute 3", "recompute 4", "recompute 5"}));
  EXPECT_EQ(r.value().peak_bytes, 660);
}

TEST(NonReentrantCheckpoint, NestedRegionsEachReRunFromTheirOwnClosure) {
  // Region {2..5} with {2..3} inside. forward: both closures keep "1": 464, as above.
  // backward: 5.grad -> 468. Node 5 (the outer region's own, saves "4") re-runs 2..5: the inner
  //   call packs into fresh hooks, so +2 500, +3 532, -2 500; +4 532 and "3" kept by linear 4,
  //   +5 564 -> 532 when unpack returns. node 5: 4.grad -> 564, -5.grad, -"4" -> 500; node 4:
  //   3.grad, dW, db -> 612, -4.grad, -"3" -> 548. Node 3 (the inner region's own) unpacks the
  //   inner closure: 2, 3 again from "1": +2 580 (kept), +3 612 -> 580. node 3: 2.grad -> 612,
  //   -3.grad, -"2" -> 548; node 2: 1.grad, dW, db -> 660 (peak). Reentrant: 788.
  Result<Estimate> r = estimate(non_reentrant({{2, 5}, {2, 3}}));
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(testing::check_oracles(r.value().program), "");
  EXPECT_EQ(recompute_labels(r.value().program),
            (std::vector<std::string>{"recompute 2", "recompute 3", "recompute 4", "recompute 5", "recompute 2", "recompute 3"}));
  EXPECT_EQ(r.value().peak_bytes, 660);
}

TEST(NonReentrantCheckpoint, MayStartAtTheModelInput) {
  // Reentrant checkpoint on ops 0..1 would give linear 0's parameters no gradients (its only
  // input, the model input, does not require grad); non-reentrant records the graph.
  EstimateOptions o = testing::tiny_mlp_sgd_options(3);
  o.plan.checkpoints = {{0, 1}};
  Result<Estimate> reentrant = estimate(o);
  ASSERT_FALSE(reentrant.ok());
  EXPECT_NE(reentrant.error().find("no input of the region requires grad"), std::string::npos) << reentrant.error();
  Result<Estimate> r = estimate(non_reentrant({{0, 1}}));
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(testing::check_oracles(r.value().program), "");
  EXPECT_EQ(recompute_labels(r.value().program).size(), 2u);
  // The same through --checkpoint ranges.
  o.checkpoint_ranges = {"0..1"};
  Result<Estimate> by_name = estimate(o);
  ASSERT_FALSE(by_name.ok());
  EXPECT_NE(by_name.error().find("(or use --checkpoint-impl non-reentrant)"), std::string::npos) << by_name.error();
  o.plan = {};
  o.plan.checkpoint_impl = CheckpointImpl::NonReentrant;
  by_name = estimate(o);
  ASSERT_TRUE(by_name.ok()) << by_name.error();
  EXPECT_EQ(by_name.value().peak_bytes, r.value().peak_bytes);
}

TEST(NonReentrantCheckpoint, PlanTextNamesTheImplementation) {
  EstimateOptions o = non_reentrant({{2, 5}, {2, 3}});
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  Graph g = build_graph(o, o.batch);
  EXPECT_EQ(plan_text(g, o.plan), "checkpoint-impl non-reentrant\ncheckpoint 2..5\n  checkpoint 2..3\n");
}

TEST(NonReentrantCheckpoint, OptionNeedsCheckpointsAndAKnownName) {
  RunArgs a;
  a.model = "mlp:layers=3,dim=4";
  a.mode = "train";
  set_run_arg(a, "checkpoint_impl", "non-reentrant");
  Result<EstimateOptions> o = to_estimate_options(a);
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.error(), "--checkpoint-impl applies with --checkpoint");
  set_run_arg(a, "checkpoint", "2..5");
  o = to_estimate_options(a);
  ASSERT_TRUE(o.ok()) << o.error();
  EXPECT_EQ(o.value().plan.checkpoint_impl, CheckpointImpl::NonReentrant);
  set_run_arg(a, "checkpoint_impl", "lazy");
  o = to_estimate_options(a);
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.error(), "--checkpoint-impl must be reentrant or non-reentrant, got 'lazy'");
}

TEST(NonReentrantCheckpoint, PlanJudgesItsCandidatesNonReentrant) {
  // plan --checkpoint-impl non-reentrant: the strategies place regions as ever, and every
  // candidate is re-simulated with non-reentrant calls, so the chosen plan re-estimated alone
  // with that implementation has the plan's peak (on the exact heap: --device cpu --budget).
  EstimateOptions run;
  run.model = "resnet18";
  run.batch = 8;
  run.mode = RunMode::Training;
  run.optimizer = OptimizerKind::Sgd;
  run.device = "cpu";
  run.plan.checkpoint_impl = CheckpointImpl::NonReentrant;
  Result<Estimate> all = estimate(run);
  ASSERT_TRUE(all.ok()) << all.error();
  PlanRequest req;
  req.run = run;
  req.budget_bytes = all.value().peak_bytes * 19 / 20;
  req.strategy = "checkpoint";
  Result<Plan> r = make_plan(req);
  ASSERT_TRUE(r.ok()) << r.error();
  const Plan& p = r.value();
  ASSERT_TRUE(p.feasible);
  ASSERT_FALSE(p.chosen.candidate.plan.checkpoints.empty());
  EstimateOptions o = run;
  o.plan = p.chosen.candidate.plan;
  o.plan.checkpoint_impl = CheckpointImpl::NonReentrant;
  Result<Estimate> e = estimate(o);
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_EQ(e.value().peak_bytes, p.chosen.eval.peak_bytes);
  EXPECT_LE(e.value().peak_bytes, p.budget_bytes);
  // The same regions run reentrant peak elsewhere: the implementation was not ignored.
  o.plan.checkpoint_impl = CheckpointImpl::Reentrant;
  Result<Estimate> reentrant = estimate(o);
  ASSERT_TRUE(reentrant.ok()) << reentrant.error();
  EXPECT_NE(reentrant.value().peak_bytes, e.value().peak_bytes);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
