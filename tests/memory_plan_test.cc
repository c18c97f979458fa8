// Memory plans applied by the interpreter: checkpoint segments, offloading and workspace-free
// convolutions, on graphs small enough to derive every byte by hand.
#include <gtest/gtest.h>

#include <algorithm>

#include "estimate/estimate.h"
#include "graph_dsl.h"
#include "report/estimate_report.h"
#include "tiny_mlp_options.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

// mlp:layers=2,dim=4, batch 2, fp32, SGD, no cuBLAS workspace. Ops: 0 linear, 1 GELU,
// 2 linear, 3 GELU, then the MSE loss. Persistent: input 32 + W0 64 + b0 16 + W1 64 + b1 16 +
// target 32 = 224. Every activation is 2x4 fp32 = 32 bytes.
EstimateOptions two_layer_mlp() { return testing::tiny_mlp_sgd_options(2); }

int count_steps(const Program& p, bool recompute) {
  return static_cast<int>(std::count_if(p.steps.begin(), p.steps.end(), [&](const Step& s) { return s.recompute == recompute; }));
}

TEST(MemoryPlan, NoPlanPeaksAt500) {
  // Keep everything: forward 224 + 0,1,2,3 (4 x 32) + loss 32 + loss tmp 32 = 416; backward:
  // seed 4 -> 388 after the tmp; 3.grad, 2.grad -> 452; drop 3.grad and 2 -> 388; node 2:
  // 1.grad 32, dW 64, db 16 -> 500 (peak).
  Result<Estimate> r = estimate(two_layer_mlp());
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r.value().peak_bytes, 500);
  EXPECT_EQ(count_steps(r.value().program, true), 0);
}

TEST(MemoryPlan, CheckpointedSegmentRunsWithoutGradThenRecomputes) {
  // Segment {2, 3} (linear 2, GELU 3) under no_grad; the checkpoint node keeps its input "1".
  // (A segment at op 0 would read only the model input: reentrant checkpoint's outputs would not
  // require grad and its parameters would get no gradients, so estimate rejects it.)
  // forward: 224 +0 -> 256, +1 -> 288, +2 -> 320, +3 -> 352, -2 (nothing saves it) -> 320,
  //          loss 32 -> 352, loss tmp 32 -> 384 (forward peak), -tmp -> 352.
  // backward: seed 4 -> 356; loss node: 3.grad 32 -> 388;
  //   CheckpointFunctionBackward keeps 3.grad (its args) until it returns; recompute: "2" 32 ->
  //   420, "3" 32 -> 452 (held as `outputs`);
  //   node 3 (GELU): 2.grad 32 -> 484; its saved "2" -> 452 (3.grad stays: held by args);
  //   node 2: 1.grad 32 -> 516 (the detached input's grad, stolen by AccumulateGrad), dW1 64 ->
  //   580? No: "2" went after node 3, so 452 + 32 + 64 + 16 = 564 (peak);
  //   -2.grad -> 532; segment returns: "3" (recomputed) -> 500, 3.grad -> 468, saved
  //   "1" -> 436; 1.grad reaches GELU 1: 0.grad 32 -> 468, -1.grad -> 436, its saved "0" ->
  //   404; node 0: dW0 64 -> 468, db0 16 -> 484.
  EstimateOptions o = two_layer_mlp();
  o.plan.checkpoints = {{2, 3}};
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r.value().peak_bytes, 564);
  EXPECT_EQ(count_steps(r.value().program, true), 2);
  EXPECT_EQ(testing::check_oracles(r.value().program), "");
}

TEST(MemoryPlan, CheckpointOnTheCpuKeepsTheRngState) {
  // On the CPU each checkpoint call stashes torch.get_rng_state() (5056 bytes) in its ctx until
  // the graph is freed, and fork_rng takes another 5056 around the re-run. The CPU profile adds
  // nothing else to this MLP's forward and backward, so the run above shifts by 5056 from the
  // segment's start: 3.grad -> 5444; fork_rng +5056 -> 10500; recompute "2" -> 10532, "3" ->
  // 10564 (peak, now in the re-run); fork_rng exits -> 5508; node 2 -> 5620 (the old peak + 5056).
  EstimateOptions o = two_layer_mlp();
  o.plan.checkpoints = {{2, 3}};
  o.device = "cpu";
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r.value().peak_bytes, 10564);
  EXPECT_EQ(testing::check_oracles(r.value().program), "");
}

TEST(MemoryPlan, CheckpointRangeReadingOnlyTheModelInputIsRejected) {
  EstimateOptions o = two_layer_mlp();
  o.checkpoint_ranges = {"0..1"};
  Result<Estimate> r = estimate(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("no input of the segment requires grad"), std::string::npos) << r.error();
  o.checkpoint_ranges = {"1..2"};  // GELU 1 reads "0", which requires grad
  EXPECT_TRUE(estimate(o).ok());
}

TEST(MemoryPlan, OffloadFreesSavedActivationsUntilTheBackwardPrefetchesThem) {
  // Offload the activations GELU 1 keeps ("0") and linear 2 keeps ("1").
  // forward: +0 -> 256; +1 -> 288, GELU 1 returns and only its node holds "0": to host, freed
  //   -> 256; +2 -> 288, "1" likewise -> 256; +3 -> 288; loss 32 -> 320, tmp -> 352 (forward
  //   peak, was 384), -tmp -> 320.
  // backward: seed -> 324; loss node: 3.grad -> 356; node 3 prefetches "1" for node 2 -> 388,
  //   2.grad -> 420, -3.grad -> 388, -"2" -> 356; node 2 prefetches "0" for node 1 -> 388,
  //   1.grad 32 -> 420, dW1 64 -> 484, db1 16 -> 500 (peak, as without the plan: gradients).
  // Steps: 0 setup, 1..4 ops 0..3, 5 loss, 6 seed, 7 loss node, 8 node 3, 9 node 2, 10 node 1.
  EstimateOptions o = two_layer_mlp();
  o.plan.offload = {1, 2};
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  const Estimate& e = r.value();
  EXPECT_EQ(e.peak_bytes, 500);
  ASSERT_FALSE(e.iterations.empty());
  int64_t forward_peak = 0;
  for (const PhasePeak& ph : e.iterations[0].phases) {
    if (ph.phase == Phase::Forward) forward_peak = ph.bytes;
  }
  EXPECT_EQ(forward_peak, 352);
  const std::vector<Transfer>& t = e.program.transfers;
  ASSERT_EQ(t.size(), 4u);
  // "0" out (ready when GELU 1 starts = end of step 1, freed at the end of step 2), "1" out,
  // then "1" in at node 3 for node 2, "0" in at node 2 for node 1.
  EXPECT_TRUE(t[0].to_host);
  EXPECT_EQ(t[0].bytes, 32);
  EXPECT_EQ(t[0].ready_step, 1);
  EXPECT_EQ(t[0].deadline_step, 2);
  EXPECT_EQ(t[1].ready_step, 2);
  EXPECT_EQ(t[1].deadline_step, 3);
  EXPECT_FALSE(t[2].to_host);
  EXPECT_EQ(t[2].ready_step, 8);
  EXPECT_EQ(t[2].deadline_step, 9);
  EXPECT_EQ(t[3].ready_step, 9);
  EXPECT_EQ(t[3].deadline_step, 10);
  EXPECT_EQ(testing::check_oracles(e.program), "");
}

TEST(MemoryPlan, CheckpointAndOffloadTogetherStayConsistent) {
  // Both rewrites at once on a deeper MLP: the program must stay valid (every buffer freed at
  // most once, after its allocation) and end where it started (weights + inputs + targets).
  EstimateOptions o = two_layer_mlp();
  o.model = "mlp:layers=6,dim=8";
  o.plan.checkpoints = {{1, 3}, {6, 7}};  // {0, 3} would read only the model input (validate_plan)
  o.plan.offload = {4, 5, 9};
  o.iterations = 2;
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(testing::check_oracles(r.value().program), "");
  // mlp:layers=6,dim=8: 6 x (8x8 + 8) x 4 = 1728 weights; input and target 2x8x4 = 64 each.
  SimResult sim = simulate(r.value().program);
  EXPECT_EQ(sim.end_bytes, 1728 + 64 + 64);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
