// Nested checkpoint regions (a checkpointed function that calls checkpoint itself, reentrant
// semantics) and validate_plan, on graphs small enough to derive every byte by hand. The
// measured counterparts are validation/ckpt.py's "nested" schemes (validation_test).
#include <gtest/gtest.h>

#include <algorithm>

#include "estimate/estimate.h"
#include "graph_dsl.h"
#include "schedule/memory_plan.h"
#include "tiny_mlp_options.h"
#include "util/error.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

// mlp:layers=3,dim=4, batch 2, fp32, SGD, no cuBLAS workspace (as memory_plan_test's two-layer
// MLP, one layer deeper). Ops: 0 linear, 1 GELU, 2 linear, 3 GELU, 4 linear, 5 GELU, then the MSE
// loss. Persistent: input 32 + 3 x (W 64 + b 16) + target 32 = 304. Every activation is 2x4
// fp32 = 32 bytes.
EstimateOptions three_layer_mlp() { return testing::tiny_mlp_sgd_options(3); }

std::vector<std::string> recompute_labels(const Program& p) {
  std::vector<std::string> out;
  for (const Step& s : p.steps) {
    if (s.recompute) out.push_back(s.label);
  }
  return out;
}

TEST(NestedCheckpoint, OuterRegionAlone) {
  // Region {2..5}. forward: 304 +0 +1 -> 368 ("0" kept by GELU 1, "1" by the checkpoint node);
  //   2..5 under no_grad, each freed once the next has read it: +2 400, +3 432, -2 400, +4 432,
  //   -3 400, +5 432, -4 400; loss 32 -> 432, its tmp -> 464 (forward peak), -tmp -> 432.
  // backward: seed 4 -> 436; loss node: 5.grad -> 468. Re-run with grad, everything kept:
  //   "2" "3" "4" "5" -> 596. node 5: 4.grad -> 628, -"4" -> 596; node 4: 3.grad 32, dW 64,
  //   db 16 -> 708, -4.grad -> 676, -"3" -> 644; node 3: 2.grad -> 676, -3.grad, -"2" -> 612;
  //   node 2: 1.grad 32, dW 64, db 16 -> 724 (peak); then the region returns.
  EstimateOptions o = three_layer_mlp();
  o.plan.checkpoints = {{2, 5}};
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(testing::check_oracles(r.value().program), "");
  EXPECT_EQ(recompute_labels(r.value().program).size(), 4u);
  EXPECT_EQ(r.value().peak_bytes, 724);
}

TEST(NestedCheckpoint, InnerRegionIsACheckpointOfTheOuterReRun) {
  // Region {2..5} with {2..3} inside (same first op). forward: as above, 464 (the inner call
  // runs under the outer's no_grad and keeps nothing; its argument "1" is alive anyway).
  // backward: seed -> 436; loss node: 5.grad -> 468. Outer re-run with grad: the inner call is
  //   now a checkpoint keeping "1" and running 2, 3 under no_grad: +2 500, +3 532, -2 500; 4, 5
  //   with grad: +4 532, +5 564. node 5: 4.grad -> 596, -"4" -> 564; node 4: 3.grad, dW, db ->
  //   676, -4.grad -> 644, -"3" (linear 4 kept it; the inner node does not) -> 612.
  //   The nested backward reaches the inner node: re-run of 2, 3 with grad: +2 644, +3 676 (held
  //   as its output); node 3: 2.grad -> 708, -"2" -> 676; node 2: 1.grad, dW, db -> 788 (peak).
  //   Against the outer region alone (724): the inner call's re-run output "3" and its incoming
  //   3.grad are held until its backward returns (reentrant CheckpointFunction.backward).
  EstimateOptions o = three_layer_mlp();
  o.plan.checkpoints = {{2, 5}, {2, 3}};
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(testing::check_oracles(r.value().program), "");
  // 2, 3, 4, 5 re-run by the outer region, then 2, 3 again by the inner one.
  EXPECT_EQ(recompute_labels(r.value().program),
            (std::vector<std::string>{"recompute 2", "recompute 3", "recompute 4", "recompute 5", "recompute 2", "recompute 3"}));
  EXPECT_EQ(r.value().peak_bytes, 788);
}

TEST(NestedCheckpoint, CliRangesNest) {
  EstimateOptions o = three_layer_mlp();
  o.checkpoint_ranges = {"2..3", "2..5"};  // any order: sorted outer first
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r.value().peak_bytes, 788);
  o.checkpoint_ranges = {"2..4", "3..5"};
  r = estimate(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "--checkpoint: checkpoint regions 2..4 and 3..5 overlap without one containing the other");
}

Graph mlp_graph() {
  EstimateOptions o = three_layer_mlp();
  return build_graph(o, o.batch);
}

std::string validation_error(const Graph& g, const MemoryPlan& p) {
  try {
    validate_plan(g, p);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ValidatePlan, AcceptsWellNestedRegionsAndPrintsThemIndented) {
  Graph g = mlp_graph();
  MemoryPlan p;
  p.checkpoints = {{1, 5}, {2, 3}, {4, 5}};
  p.offload = {0};
  EXPECT_EQ(validation_error(g, p), "");
  EXPECT_EQ(plan_text(g, p), "checkpoint 1..5\n  checkpoint 2..3\n  checkpoint 4..5\noffload 0\n");
}

TEST(ValidatePlan, NamesEachProblem) {
  Graph g = mlp_graph();
  auto err = [&](MemoryPlan p) { return validation_error(g, p); };
  EXPECT_EQ(err({{{2, 4}, {3, 5}}, {}, {}}), "checkpoint regions 2..4 and 3..5 overlap without one containing the other");
  EXPECT_EQ(err({{{2, 3}, {2, 5}}, {}, {}}), "checkpoint regions are not in order: 2..5 comes after 2..3");
  EXPECT_EQ(err({{{2, 3}, {2, 3}}, {}, {}}), "checkpoint region 2..3 is listed twice");
  EXPECT_EQ(err({{{3, 2}}, {}, {}}), "checkpoint region 3..2: the first op runs after the last");
  EXPECT_EQ(err({{{2, 99}}, {}, {}}), "checkpoint region 2..99: no such op (the graph has " + std::to_string(g.ops.size()) + ")");
  EXPECT_NE(err({{{0, 1}}, {}, {}}).find("no input of the region requires grad"), std::string::npos);
  EXPECT_NE(err({{{4, static_cast<OpId>(g.ops.size()) - 1}}, {}, {}}).find("holds the loss op"), std::string::npos);
  EXPECT_EQ(err({{{2, 5}}, {3}, {}}), "offload of 3: it is inside a checkpoint region, so its forward keeps nothing to offload");
  EXPECT_EQ(err({{}, {1, 1}, {}}), "offload of 1 is listed twice");
  EXPECT_EQ(err({{}, {}, {0}}), "workspace choice for 0: not a convolution");
}

TEST(ValidatePlan, RejectsARegionOverwritingItsInputInPlace) {
  // resnet18's stem ReLU is in place (torchvision's inplace=True): a region starting at it would
  // overwrite bn1's output, the value its re-run needs.
  EstimateOptions o;
  o.model = "resnet18";
  o.batch = 1;
  o.mode = RunMode::Training;
  Graph g = build_graph(o, 1);
  OpId relu = kNone, last = kNone;
  for (const Op& op : g.ops) {
    if (op.name == "relu") relu = op.id;
    if (op.name == "layer1.0.relu#2") last = op.id;
  }
  ASSERT_NE(relu, kNone);
  ASSERT_NE(last, kNone);
  MemoryPlan p;
  p.checkpoints = {{relu, last}};
  EXPECT_EQ(validation_error(g, p), "checkpoint region relu..layer1.0.relu#2: relu overwrites bn1 in place, made before the region, so the region cannot be re-run from its inputs");
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
