// The chain checkpointing solver: the model's loader, the simulator alone on hand-written
// schedules, the dynamic program on the worked example of the chain model, and the dynamic
// program against an exhaustive search over persistent schedules (chain_exhaustive.h) and against
// a transcription of Rotor's published recursion. Every schedule the solver returns is re-run in
// the simulator.
#include "plan/chain_dp.h"

#include <chrono>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "chain_exhaustive.h"
#include "plan/chain_model.h"
#include "plan/chain_simulate.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::exhaustive_persistent;

constexpr int64_t MiB = 1 << 20;

// The worked example (4 stages + loss), sizes in MiB.
Chain example_chain(int64_t unit = MiB) {
  Chain c;
  c.fwd_ms = {1, 1, 2, 4};
  c.bwd_ms = {2, 2, 4, 8};
  c.x_bytes = {80 * unit, 60 * unit, 120 * unit, 40 * unit, 40 * unit};
  c.xbar_bytes = {100 * unit, 140 * unit, 120 * unit, 80 * unit};
  c.fwd_tmp_bytes = {20 * unit, 10 * unit, 10 * unit, 20 * unit};
  c.bwd_tmp_bytes = {10 * unit, 0, 10 * unit, 10 * unit};
  c.loss_ms = 1;
  c.loss_tmp_bytes = 10 * unit;
  return c;
}

const std::vector<std::string> kExampleSchedule = {"Fck0", "Fn1",   "Fall2", "Fall3", "Loss", "B3",
                                                   "B2",   "Fall0", "Fall1", "B1",    "B0"};

std::vector<std::string> tokens(const std::vector<ChainOp>& ops) {
  std::vector<std::string> out;
  for (ChainOp op : ops) out.push_back(op_token(op));
  return out;
}

// ---------------------------------------------------------------------------------------------
// The chain file

TEST(ChainModel, ExampleFileIsTheWorkedExample) {
  Result<Chain> c =
      load_chain_file(std::string(HEADROOM_SOURCE_DIR) + "/examples/chain-example.json");
  ASSERT_TRUE(c.ok()) << c.error();
  const Chain e = example_chain();
  EXPECT_EQ(c.value().fwd_ms, e.fwd_ms);
  EXPECT_EQ(c.value().bwd_ms, e.bwd_ms);
  EXPECT_EQ(c.value().x_bytes, e.x_bytes);
  EXPECT_EQ(c.value().xbar_bytes, e.xbar_bytes);
  EXPECT_EQ(c.value().fwd_tmp_bytes, e.fwd_tmp_bytes);
  EXPECT_EQ(c.value().bwd_tmp_bytes, e.bwd_tmp_bytes);
  EXPECT_EQ(c.value().loss_ms, 1);
  EXPECT_EQ(c.value().loss_tmp_bytes, 10 * MiB);
}

TEST(ChainModel, JsonRoundTripsAndAcceptsAChainKey) {
  const Chain e = example_chain();
  Result<Chain> back = parse_chain_json(chain_json(e));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back.value().x_bytes, e.x_bytes);
  Result<Chain> wrapped = parse_chain_json("{\"name\": \"x\", \"chain\": " + chain_json(e) + "}");
  ASSERT_TRUE(wrapped.ok()) << wrapped.error();
  EXPECT_EQ(wrapped.value().xbar_bytes, e.xbar_bytes);
}

std::string error_of(const std::string& text) {
  Result<Chain> r = parse_chain_json(text);
  return r.ok() ? "(parsed)" : r.error();
}

TEST(ChainModel, OneLineNamingEachProblem) {
  const std::string good_tail =
      R"("x_bytes": [8, 6, 4], "xbar_bytes": [10, 4], "fwd_tmp_bytes": [0, 1], "bwd_tmp_bytes": [1, 0],)"
      R"( "loss_ms": 1, "loss_tmp_bytes": 2})";
  EXPECT_EQ(error_of(R"({"fwd_ms": [1, 2], "bwd_ms": [2, 3], )" + good_tail), "(parsed)");
  EXPECT_EQ(error_of(R"({"bwd_ms": [2, 3], )" + good_tail), "chain: missing field 'fwd_ms'");
  EXPECT_EQ(error_of(R"({"fwd_ms": [1, 2], "bwd_ms": [2], )" + good_tail),
            "chain: bwd_ms has 1 entries, a chain of 2 stages needs 2 (one per stage)");
  EXPECT_EQ(error_of(R"({"fwd_ms": [1, -2], "bwd_ms": [2, 3], )" + good_tail),
            "chain: fwd_ms[1] is -2, a time cannot be negative");
  EXPECT_EQ(error_of(R"({"fwd_ms": [1, "a"], "bwd_ms": [2, 3], )" + good_tail),
            "chain: fwd_ms[1] is \"a\", not a number");
  EXPECT_EQ(error_of(R"({"fwd_ms": 1, "bwd_ms": [2, 3], )" + good_tail),
            "chain: 'fwd_ms' must be an array, got number");
  EXPECT_EQ(
      error_of(
          R"({"fwd_ms": [], "bwd_ms": [], "x_bytes": [1], "xbar_bytes": [], "fwd_tmp_bytes": [],)"
          R"( "bwd_tmp_bytes": [], "loss_ms": 0, "loss_tmp_bytes": 0})"),
      "chain: fwd_ms is empty, a chain needs at least one stage");
  EXPECT_EQ(
      error_of(
          R"({"fwd_ms": [1, 2], "bwd_ms": [2, 3], "x_bytes": [8, 6], "xbar_bytes": [10, 4],)"
          R"( "fwd_tmp_bytes": [0, 1], "bwd_tmp_bytes": [1, 0], "loss_ms": 1, "loss_tmp_bytes": 2})"),
      "chain: x_bytes has 2 entries, a chain of 2 stages needs 3 (the input of every stage and of "
      "the loss)");
  EXPECT_EQ(
      error_of(
          R"({"fwd_ms": [1, 2], "bwd_ms": [2, 3], "x_bytes": [8, -6, 4], "xbar_bytes": [10, 4],)"
          R"( "fwd_tmp_bytes": [0, 1], "bwd_tmp_bytes": [1, 0], "loss_ms": 1, "loss_tmp_bytes": 2})"),
      "chain: x_bytes[1] is -6, a size cannot be negative");
  EXPECT_EQ(
      error_of(
          R"({"fwd_ms": [1, 2], "bwd_ms": [2, 3], "x_bytes": [8, 6.5, 4], "xbar_bytes": [10, 4],)"
          R"( "fwd_tmp_bytes": [0, 1], "bwd_tmp_bytes": [1, 0], "loss_ms": 1, "loss_tmp_bytes": 2})"),
      "chain: x_bytes[1] is 6.5, not a whole number of bytes");
  EXPECT_EQ(
      error_of(
          R"({"fwd_ms": [1, 2], "bwd_ms": [2, 3], "x_bytes": [8, 6, 4], "xbar_bytes": [5, 4],)"
          R"( "fwd_tmp_bytes": [0, 1], "bwd_tmp_bytes": [1, 0], "loss_ms": 1, "loss_tmp_bytes": 2})"),
      "chain: xbar_bytes[0] = 5 is smaller than x_bytes[1] = 6 (x̄ includes the stage's output)");
  EXPECT_EQ(
      error_of(
          R"({"fwd_ms": [1, 2], "bwd_ms": [2, 3], )"
          R"("x_bytes": [8, 6, 4], "xbar_bytes": [10, 4], "fwd_tmp_bytes": [0, 1], "bwd_tmp_bytes": [1, 0],)"
          R"( "loss_ms": -1, "loss_tmp_bytes": 2})"),
      "chain: loss_ms is -1, a time cannot be negative");
  EXPECT_EQ(
      error_of(
          R"({"fwd_ms": [1, 2], "bwd_ms": [2, 3], "x_bytes": [8, 6, 4611686018427387904],)"
          R"( "xbar_bytes": [10, 4611686018427387904], "fwd_tmp_bytes": [0, 1], "bwd_tmp_bytes": [1, 0],)"
          R"( "loss_ms": 1, "loss_tmp_bytes": 2})")
          .rfind("size overflows 64 bits while computing the total size of the chain's buffers", 0),
      0u);
  EXPECT_EQ(error_of("[1, 2]"), "chain: expected a JSON object, got array");
  EXPECT_EQ(error_of("{\"fwd_ms\": [1,"), "chain: not valid JSON (byte 15)");
  EXPECT_EQ(load_chain_file("/nonexistent/chain.json").error(),
            "cannot read chain file '/nonexistent/chain.json': No such file or directory");
}

TEST(ChainModel, Tokens) {
  for (const std::string& t : kExampleSchedule) EXPECT_EQ(op_token(parse_op_token(t)), t);
  EXPECT_EQ(parse_op_token("Fall12"), (ChainOp{ChainOpKind::Fall, 12}));
  for (const char* bad : {"F1", "Fck", "Fck-1", "Fck01", "B", "loss", "Bx", "Fn1 "}) {
    EXPECT_THROW(parse_op_token(bad), InputError) << bad;
  }
}

// ---------------------------------------------------------------------------------------------
// The simulator alone

TEST(ChainSimulate, WorkedExampleScheduleOpByOp) {
  // In use during each op, in MiB (the table of the worked example):
  //   Fck0 80+60+20=160  Fn1 140+120+10=270  Fall2 200+120+10=330  Fall3 320+80+20=420
  //   Loss 400+40+10=450  B3 440+40+10=490  B2 360+120+10=490  Fall0 200+100+20=320
  //   Fall1 300+140+10=450  B1 440+60+0=500  B0 240+80+10=330
  const Chain c = example_chain(1);
  const std::vector<int64_t> in_use = {160, 270, 330, 420, 450, 490, 490, 320, 450, 500, 330};
  const std::vector<int64_t> live_after = {140, 200, 320, 400, 440, 360, 200, 300, 440, 240, 80};
  // The chain runs on the one schedule simulator as the graph whose stage i reads only a_i.
  const RematGraph g = graph_of_chain(c);
  const std::vector<std::vector<int>> consumers = remat_consumers(g);
  RematState s = RematState::initial(g);
  EXPECT_EQ(s.live, 80);
  for (size_t k = 0; k < kExampleSchedule.size(); ++k) {
    int64_t used = 0;
    double t = 0;
    const RematOp op = lower_chain_op(parse_op_token(kExampleSchedule[k]));
    ASSERT_EQ(apply_remat_op(g, consumers, op, s, &used, &t), "") << kExampleSchedule[k];
    EXPECT_EQ(used, in_use[k]) << kExampleSchedule[k];
    EXPECT_EQ(s.live, live_after[k]) << kExampleSchedule[k];
  }
  EXPECT_EQ(check_remat_finished(g, s), "");
  Result<ChainSimResult> r = simulate_chain(example_chain(), kExampleSchedule);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r.value().peak, 500 * MiB);
  EXPECT_EQ(r.value().peak_op, 9);  // B1
  EXPECT_EQ(r.value().makespan_ms, 27);
  EXPECT_EQ(r.value().forwards, 6);
}

TEST(ChainSimulate, StoreEverythingPeakIs610MiB) {
  // Fall0 80+100+20=200, Fall1 180+140+10=330, Fall2 320+120+10=450, Fall3 440+80+20=540,
  // Loss 520+40+10=570, B3 560+40+10=610 (the peak), B2 480+120+10=610, B1 420+60=480, B0 ...
  EXPECT_EQ(store_all_peak(example_chain()), 610 * MiB);
  Result<ChainSimResult> r = simulate_remat(graph_of_chain(example_chain()), remat_store_all_schedule(4));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().makespan_ms, 25);
  EXPECT_EQ(no_checkpoint_makespan_ms(example_chain()), 25);
}

std::string sim_error(const std::vector<std::string>& schedule) {
  Result<ChainSimResult> r = simulate_chain(example_chain(), schedule);
  return r.ok() ? "(valid)" : r.error();
}

TEST(ChainSimulate, RejectsInvalidSchedules) {
  const std::vector<std::string> fwd = {"Fall0", "Fall1", "Fall2", "Fall3", "Loss"};
  auto with = [&](std::vector<std::string> tail) {
    std::vector<std::string> s = fwd;
    s.insert(s.end(), tail.begin(), tail.end());
    return s;
  };
  EXPECT_EQ(sim_error(with({"B3", "B2", "B1", "B0"})), "(valid)");
  // Inputs must be live.
  EXPECT_EQ(sim_error({"Fn1"}), "schedule op 0 (Fn1): its input a_1 is not live");
  EXPECT_EQ(sim_error({"Fck0", "Fn1", "Fall1"}),
            "schedule op 2 (Fall1): its input a_1 is not live");
  // Fn2 consumes x̄_2 when no plain x_2 exists (then B1 could not run).
  EXPECT_EQ(sim_error({"Fall0", "Fall1", "Fn2", "Fall2"}),
            "schedule op 3 (Fall2): its input a_2 is not live");
  EXPECT_EQ(sim_error({"Fck0", "Fck1", "Fck2", "Fall3", "Loss", "B3", "B2"}),
            "schedule op 6 (B2): x̄_3 (the state saved by stage 2) is not live");
  EXPECT_EQ(sim_error(with({"B3", "B2", "B1", "B0", "Fall0"})),
            "schedule op 9 (Fall0): its input a_0 is not live");
  // One live copy of an activation.
  EXPECT_EQ(sim_error({"Fck0", "Fall0"}), "schedule op 1 (Fall0): its output a_1 is already live");
  EXPECT_EQ(sim_error(with({"Fck2"})), "schedule op 5 (Fck2): its output a_3 is already live");
  // Loss once, then B_{L-1} ... B_0 in order.
  EXPECT_EQ(sim_error({"Fall0", "B0"}), "schedule op 1 (B0): the loss has not run yet");
  EXPECT_EQ(sim_error(with({"B2"})),
            "schedule op 5 (B2): backwards run in order and B3 comes next");
  EXPECT_EQ(sim_error(with({"Loss"})),
            "schedule op 5 (Loss): the loss runs once, before every backward");
  EXPECT_EQ(sim_error(with({"B3", "B2", "B1", "B0", "B0"})),
            "schedule op 9 (B0): every backward has already run");
  // Stages and tokens.
  EXPECT_EQ(sim_error({"Fall4"}),
            "schedule op 0 (Fall4): stage 4 is out of range (the graph has 4 stages)");
  EXPECT_EQ(sim_error(with({"bogus"})),
            "schedule: unknown operation 'bogus' (expected Fck<i>, Fn<i>, Fall<i>, Loss or B<i>)");
  // Complete.
  EXPECT_EQ(sim_error({}), "schedule: the schedule ends before the loss");
  EXPECT_EQ(sim_error(with({"B3", "B2", "B1"})), "schedule: the schedule ends before B0");
  // A leaf at j = 1: Fck0 keeps x_0, Fall1 runs from the plain x_1, B1 frees it.
  EXPECT_EQ(sim_error({"Fck0", "Fall1", "Fall2", "Fall3", "Loss", "B3", "B2", "B1", "Fall0", "B0"}),
            "(valid)");
}

TEST(ChainSimulate, LeftoverBuffersAreRejected) {
  // After B1, Fck1 recomputes x_2 from x̄_1; nothing ever frees it.
  EXPECT_EQ(sim_error({"Fall0", "Fall1", "Fall2", "Fall3", "Loss", "B3", "B2", "B1", "Fck1", "B0"}),
            "schedule: the schedule ends with x_2 still live");
}

// ---------------------------------------------------------------------------------------------
// The worked example

TEST(ChainDp, WorkedExampleAt500MiB) {
  Result<ChainPlan> r = solve_chain(example_chain(), 500 * MiB, 500);
  ASSERT_TRUE(r.ok()) << r.error();
  const ChainPlan& p = r.value();
  ASSERT_TRUE(p.feasible);
  EXPECT_EQ(p.makespan_ms, 27);
  EXPECT_EQ(p.no_checkpoint_makespan_ms, 25);
  EXPECT_EQ(p.unit_bytes, MiB);
  EXPECT_EQ(p.store_all_bytes, 610 * MiB);
  // Rotor's schedule (leaf at j = 2, chain checkpoints in (2, L), (0, 1) redone with history).
  EXPECT_EQ(p.schedule, kExampleSchedule);
  Result<ChainSimResult> sim = simulate_chain(example_chain(), p.schedule);
  ASSERT_TRUE(sim.ok()) << sim.error();
  EXPECT_EQ(sim.value().peak, p.peak_bytes);
  EXPECT_LE(p.peak_bytes, 500 * MiB);
  EXPECT_EQ(p.peak_bytes, 500 * MiB);  // B1: 440 + 60 + 0
}

double makespan_at(int64_t budget, int slots) {
  Result<ChainPlan> r = solve_chain(example_chain(), budget, slots);
  EXPECT_TRUE(r.ok()) << r.error();
  if (!r.ok() || !r.value().feasible) return -1;
  EXPECT_LE(r.value().peak_bytes, budget);
  return r.value().makespan_ms;
}

TEST(ChainDp, WorkedExampleAtOtherBudgets) {
  EXPECT_EQ(makespan_at(400 * MiB, 500), -1);  // infeasible
  EXPECT_EQ(makespan_at(450 * MiB, 500), -1);  // infeasible
  EXPECT_EQ(makespan_at(550 * MiB, 500), 27);
  // 610 MiB = M_all: u = floor(610 MiB / 500) = 1,279,262 bytes (1.22 MiB), every size rounds up
  // (80 MiB -> 66 slots, ...) and storing everything no longer fits in 500 slots.
  EXPECT_EQ(610 * MiB / 500, 1279262);
  EXPECT_EQ(makespan_at(610 * MiB, 500), 26);
  EXPECT_EQ(makespan_at(500 * MiB, 2000), 27);
  // Storing everything in 610 MiB fits once the unit divides the sizes: 610 slots of 1 MiB.
  EXPECT_EQ(makespan_at(610 * MiB, 610), 25);
}

TEST(ChainDp, InputErrors) {
  EXPECT_EQ(solve_chain(example_chain(), -1, 500).error(),
            "budget is -1 bytes, it cannot be negative");
  EXPECT_EQ(solve_chain(example_chain(), 500 * MiB, 0).error(), "slots is 0, at least 1 is needed");
  EXPECT_EQ(solve_chain(example_chain(), 499, 500).error(),
            "budget of 499 bytes is smaller than 500 slots: a slot would hold 0 bytes");
  Chain bad = example_chain();
  bad.bwd_ms.pop_back();
  EXPECT_EQ(solve_chain(bad, 500 * MiB, 500).error(),
            "chain: bwd_ms has 3 entries, a chain of 4 stages needs 4 (one per stage)");
  EXPECT_EQ(solve_chain(example_chain(), int64_t{1} << 40, 100'000'000).error(),
            "a chain of 4 stages at 100000000 slots needs a 5.59 GiB solver table (limit 4.00 "
            "GiB); use fewer slots");
}

TEST(ChainDp, JsonContract) {
  Result<ChainPlan> r = solve_chain(example_chain(), 500 * MiB, 500);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(chain_plan_json(r.value()),
            "{\n  \"feasible\": true,\n  \"budget_bytes\": 524288000,\n  \"slots\": 500,\n"
            "  \"makespan_ms\": 27.0,\n  \"no_checkpoint_makespan_ms\": 25.0,\n  \"peak_bytes\": "
            "524288000,\n"
            "  \"schedule\": [\n    \"Fck0\",\n    \"Fn1\",\n    \"Fall2\",\n    \"Fall3\",\n    "
            "\"Loss\",\n"
            "    \"B3\",\n    \"B2\",\n    \"Fall0\",\n    \"Fall1\",\n    \"B1\",\n    \"B0\"\n  "
            "]\n}\n");
  Result<ChainPlan> no = solve_chain(example_chain(), 400 * MiB, 500);
  ASSERT_TRUE(no.ok());
  EXPECT_EQ(
      chain_plan_json(no.value()),
      "{\n  \"feasible\": false,\n  \"budget_bytes\": 419430400,\n  \"slots\": 500,\n"
      "  \"makespan_ms\": null,\n  \"no_checkpoint_makespan_ms\": 25.0,\n  \"peak_bytes\": null,\n"
      "  \"schedule\": []\n}\n");
}

TEST(ChainDp, TextRendering) {
  Result<ChainPlan> r = solve_chain(example_chain(), 500 * MiB, 500);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(chain_plan_text(r.value()),
            "budget 500 MiB (524,288,000 bytes), 500 slots of 1,048,576 bytes\n"
            "store everything needs 610 MiB (639,631,360 bytes); no-checkpoint makespan 25 ms\n"
            "makespan 27 ms (+2 ms recomputed, +8%)\n"
            "peak 500 MiB (524,288,000 bytes) of 500 MiB\n"
            "schedule (11 ops):\n"
            "  Fck0 Fn1 Fall2 Fall3 Loss B3 B2 Fall0 Fall1 B1 B0\n");
  Result<ChainPlan> no = solve_chain(example_chain(), 400 * MiB, 500);
  ASSERT_TRUE(no.ok());
  EXPECT_NE(chain_plan_text(no.value()).find("infeasible"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Random chains: the DP against the exhaustive search, the simulator, and monotonicity

// Sizes are multiples of `unit` (so the slot discretization at budget = slots * unit is exact),
// times are small integers (so float sums are exact), zeros included. `wild` chains have large
// transients and saved states far above the activations, which stresses the memory tests of the
// chain option (Fall_s runs beside δ_{t+1}).
Chain random_chain(std::mt19937& rng, int L, int64_t unit, bool wild = false) {
  auto size = [&](int hi) { return std::uniform_int_distribution<int64_t>(0, hi)(rng) * unit; };
  auto time = [&]() { return static_cast<double>(std::uniform_int_distribution<int>(0, 6)(rng)); };
  Chain c;
  for (int i = 0; i <= L; ++i)
    c.x_bytes.push_back(std::uniform_int_distribution<int64_t>(1, wild ? 12 : 8)(rng) * unit);
  for (int i = 0; i < L; ++i) {
    c.fwd_ms.push_back(time());
    c.bwd_ms.push_back(time());
    c.xbar_bytes.push_back(c.x_bytes[static_cast<size_t>(i) + 1] + size(wild ? 24 : 8));
    c.fwd_tmp_bytes.push_back(size(wild ? 30 : 4));
    c.bwd_tmp_bytes.push_back(size(wild ? 12 : 4));
  }
  c.loss_ms = time();
  c.loss_tmp_bytes = size(3);
  return c;
}

// The DP on a chain whose sizes are already multiples of unit, at `slots` slots of unit bytes.
ChainDpResult dp_at(const Chain& c, int64_t unit, int slots) {
  return solve_chain_dp(discretize_chain(c, unit), slots);
}

TEST(ChainDp, MatchesExhaustiveSearchOnRandomSmallChains) {
  std::mt19937 rng(20240607);
  int compared = 0, feasible = 0, with_recompute = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int L = 1 + trial % 5;
    const int64_t unit = trial % 2 == 0 ? 1 : 3 * MiB;
    const Chain c = random_chain(rng, L, unit, /*wild=*/trial % 3 == 0);
    const int64_t all_slots = store_all_peak(c) / unit;
    // From too little memory to more than storing everything needs.
    for (int64_t slots : {all_slots / 3, all_slots / 2, 2 * all_slots / 3, 3 * all_slots / 4,
                          5 * all_slots / 6, all_slots - 1, all_slots, all_slots + 2}) {
      if (slots < 1) continue;
      const int64_t budget = slots * unit;
      const ChainDpResult dp = dp_at(c, unit, static_cast<int>(slots));
      const testing::ExhaustiveResult ex = exhaustive_persistent(c, budget);
      ++compared;
      ASSERT_EQ(dp.feasible, ex.feasible)
          << "trial " << trial << " L " << L << " slots " << slots << "\n"
          << chain_json(c);
      if (!dp.feasible) continue;
      ++feasible;
      ASSERT_EQ(dp.makespan_ms, ex.makespan_ms)
          << "trial " << trial << " slots " << slots << "\n"
          << chain_json(c) << "\nexhaustive:" << ::testing::PrintToString(tokens(ex.schedule))
          << "\ndp:" << ::testing::PrintToString(tokens(dp.schedule));
      if (dp.makespan_ms > no_checkpoint_makespan_ms(c)) ++with_recompute;
      // The DP's schedule, re-run: valid, within the budget, with the DP's makespan.
      Result<ChainSimResult> sim = simulate_chain(c, dp.schedule);
      ASSERT_TRUE(sim.ok()) << sim.error();
      EXPECT_LE(sim.value().peak, budget);
      EXPECT_EQ(sim.value().makespan_ms, dp.makespan_ms);
      if (slots >= all_slots) {
        EXPECT_EQ(dp.makespan_ms, no_checkpoint_makespan_ms(c));
      }
    }
  }
  // The cases are not all trivial.
  EXPECT_GT(compared, 2500);
  EXPECT_GT(feasible, 1500);
  EXPECT_GT(with_recompute, 300);
}

TEST(ChainDp, EverySolveIsReSimulatedWithinBudget) {
  // Byte sizes that do not divide evenly: rounding is real, the byte peak still fits.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 60; ++trial) {
    const int L = 1 + trial % 12;
    Chain c = random_chain(rng, L, 1);
    for (int64_t& v : c.x_bytes) v = v * 1'000'003 + 17;
    for (size_t i = 0; i < c.xbar_bytes.size(); ++i)
      c.xbar_bytes[i] = c.x_bytes[i + 1] + c.xbar_bytes[i] * 999'983;
    for (int64_t& v : c.fwd_tmp_bytes) v *= 1'234'567;
    for (double& f : c.fwd_ms) f = f * 0.37 + 0.01;
    const int64_t all = store_all_peak(c);
    for (double frac : {0.3, 0.45, 0.6, 0.8, 1.0, 1.1}) {
      for (int slots : {10, 100, 500}) {
        const auto budget = static_cast<int64_t>(static_cast<double>(all) * frac);
        Result<ChainPlan> r = solve_chain(c, budget, slots);
        ASSERT_TRUE(r.ok()) << r.error();
        if (!r.value().feasible) continue;
        Result<ChainSimResult> sim = simulate_chain(c, r.value().schedule);
        ASSERT_TRUE(sim.ok()) << sim.error();
        EXPECT_LE(sim.value().peak, budget);
        EXPECT_EQ(sim.value().peak, r.value().peak_bytes);
        EXPECT_EQ(sim.value().makespan_ms, r.value().makespan_ms);
        EXPECT_GE(r.value().makespan_ms, r.value().no_checkpoint_makespan_ms);
        const ChainDpResult dp = solve_chain_dp(discretize_chain(c, budget / slots), slots);
        EXPECT_NEAR(dp.makespan_ms, r.value().makespan_ms, 1e-5 * r.value().makespan_ms);
      }
    }
  }
}

TEST(ChainDp, ThreadCountDoesNotChangeTheResult) {
  // Threads take blocks of columns; each row is computed by one thread in one order.
  std::mt19937 rng(5);
  Chain c = random_chain(rng, 90, 1, /*wild=*/true);
  for (double& f : c.fwd_ms) f = f * 0.731 + 0.013;  // sums that round in float
  const int64_t all = store_all_peak(c);
  for (int64_t slots : {all / 5, all / 2, all}) {
    const ChainDpResult one = solve_chain_dp(c, static_cast<int>(slots), 1);
    for (int threads : {2, 3, 4}) {
      const ChainDpResult many = solve_chain_dp(c, static_cast<int>(slots), threads);
      ASSERT_EQ(one.feasible, many.feasible);
      EXPECT_EQ(one.makespan_ms, many.makespan_ms) << threads << " threads, " << slots << " slots";
      EXPECT_EQ(one.schedule, many.schedule);
    }
    if (one.feasible) {
      Result<ChainSimResult> sim = simulate_chain(c, one.schedule);
      ASSERT_TRUE(sim.ok()) << sim.error();
      EXPECT_LE(sim.value().peak, slots);
      EXPECT_NEAR(sim.value().makespan_ms, one.makespan_ms, 1e-5 * one.makespan_ms);
    }
  }
}

// plan --graph's first incumbent races the time limit: a fill past its deadline gives up on every
// thread count, whether the deadline passed before the first row or while lanes wait on each
// other's blocks, and a deadline that is not reached changes nothing.
TEST(ChainDp, DeadlineStopsTheFillOnEveryThreadCount) {
  std::mt19937 rng(11);
  const Chain c = random_chain(rng, 200, 1, /*wild=*/true);
  const int slots = static_cast<int>(store_all_peak(c) / 2);
  const auto now = std::chrono::steady_clock::now();
  for (int threads : {1, 2, 4}) {
    const ChainDpResult past = solve_chain_dp(c, slots, threads, now);
    EXPECT_TRUE(past.timed_out) << threads;
    EXPECT_FALSE(past.feasible);
    EXPECT_TRUE(past.schedule.empty());
    // 200 stages x ~half the store-all slots take far longer than 2 ms here: the stop comes
    // mid-fill, with blocks finished, in progress and not started.
    const ChainDpResult mid = solve_chain_dp(
        c, slots, threads, std::chrono::steady_clock::now() + std::chrono::milliseconds(2));
    EXPECT_TRUE(mid.timed_out) << threads;
    EXPECT_FALSE(mid.feasible);
  }
  const Chain small = random_chain(rng, 30, 1, /*wild=*/true);
  const int small_slots = static_cast<int>(store_all_peak(small) / 2);
  const ChainDpResult free_run = solve_chain_dp(small, small_slots, 2);
  const ChainDpResult raced =
      solve_chain_dp(small, small_slots, 2, std::chrono::steady_clock::now() + std::chrono::hours(1));
  EXPECT_FALSE(raced.timed_out);
  EXPECT_EQ(raced.feasible, free_run.feasible);
  EXPECT_EQ(raced.makespan_ms, free_run.makespan_ms);
  EXPECT_EQ(raced.schedule, free_run.schedule);
}

TEST(ChainDp, MoreBudgetIsNeverWorse) {
  std::mt19937 rng(99);
  for (int trial = 0; trial < 40; ++trial) {
    const int L = 2 + trial % 14;
    const Chain c = random_chain(rng, L, MiB);
    const int64_t all = store_all_peak(c);
    // Fixed slots, growing budget: the unit grows, every size needs no more slots.
    double previous = INFINITY;
    for (int64_t budget = all / 4; budget <= all + all / 10;
         budget += std::max<int64_t>(1, all / 97)) {
      Result<ChainPlan> r = solve_chain(c, budget, 200);
      ASSERT_TRUE(r.ok());
      const double now = r.value().feasible ? r.value().makespan_ms : INFINITY;
      EXPECT_LE(now, previous) << "trial " << trial << " budget " << budget;
      previous = now;
    }
    // Fixed unit, growing slot count.
    previous = INFINITY;
    for (int slots = 1; slots <= static_cast<int>(all / MiB) + 2; ++slots) {
      const ChainDpResult dp = dp_at(c, MiB, slots);
      const double now = dp.feasible ? dp.makespan_ms : INFINITY;
      EXPECT_LE(now, previous) << "trial " << trial << " slots " << slots;
      previous = now;
    }
    EXPECT_EQ(previous, no_checkpoint_makespan_ms(c));
  }
}

// ---------------------------------------------------------------------------------------------
// Rotor's recursion as published (rotor/algorithms/persistent.py, compute_table and
// persistent_rec), transcribed to compare: wherever Rotor's schedule really fits the budget,
// headroom's optimum is no worse.

struct RotorResult {
  bool feasible = false;
  double makespan = 0;
  std::vector<ChainOp> schedule;
};

RotorResult rotor_reference(const Chain& slot_chain, int mmax) {
  const int L = slot_chain.length();
  std::vector<double> fw(slot_chain.fwd_ms), bw(slot_chain.bwd_ms);
  fw.push_back(0);
  bw.push_back(slot_chain.loss_ms);
  std::vector<int64_t> cw(slot_chain.x_bytes), cbw{slot_chain.x(0)}, ftmp(slot_chain.fwd_tmp_bytes),
      btmp(slot_chain.bwd_tmp_bytes);
  for (int64_t v : slot_chain.xbar_bytes) cbw.push_back(v);
  btmp.push_back(slot_chain.loss_tmp_bytes);
  cw.push_back(0);
  cbw.push_back(0);
  ftmp.push_back(0);
  const auto n = static_cast<size_t>(L) + 1;
  const auto M = static_cast<size_t>(mmax) + 1;
  std::vector<double> opt(M * n * n, INFINITY);
  std::vector<int> what(M * n * n, -1);
  auto at = [&](int64_t m, size_t i, size_t l) {
    return m * static_cast<int64_t>(n * n) + static_cast<int64_t>(i * n + l);
  };
  for (int64_t m = 0; m <= mmax; ++m) {
    for (size_t i = 0; i < n; ++i) {
      const int64_t limit =
          std::max(cw[i + 1] + cbw[i + 1] + ftmp[i], cw[i] + cw[i + 1] + cbw[i + 1] + btmp[i]);
      if (m >= limit) opt[static_cast<size_t>(at(m, i, i))] = fw[i] + bw[i];
    }
  }
  for (int64_t m = 0; m <= mmax; ++m) {
    for (size_t d = 1; d < n; ++d) {
      for (size_t i = 0; i + d < n; ++i) {
        const size_t l = i + d;
        int64_t mmin = cw[l + 1] + cw[i + 1] + ftmp[i];
        for (size_t j = i + 1; j < l; ++j)
          mmin = std::max(mmin, cw[l + 1] + cw[j] + cw[j + 1] + ftmp[j]);
        if (m < mmin) continue;
        double best_leaf = INFINITY;
        int best_j = -1;
        for (size_t j = i + 1; j <= l; ++j) {
          if (m < cw[j]) continue;
          double sum_fw = 0;
          for (size_t k = i; k < j; ++k) sum_fw += fw[k];
          const double v = sum_fw + opt[static_cast<size_t>(at(m - cw[j], j, l))] +
                           opt[static_cast<size_t>(at(m, i, j - 1))];
          if (v < best_leaf) {
            best_leaf = v;
            best_j = static_cast<int>(j);
          }
        }
        double chain = INFINITY;
        if (m >= cbw[i + 1])
          chain = opt[static_cast<size_t>(at(m, i, i))] +
                  opt[static_cast<size_t>(at(m - cbw[i + 1], i + 1, l))];
        const auto cell = static_cast<size_t>(at(m, i, l));
        if (best_j >= 0 && best_leaf <= chain) {
          opt[cell] = best_leaf;
          what[cell] = best_j;
        } else {
          opt[cell] = chain;
          what[cell] = -1;
        }
      }
    }
  }
  RotorResult r;
  const int64_t top = mmax - cw[0];
  if (top <= 0 || opt[static_cast<size_t>(at(top, 0, n - 1))] == INFINITY) return r;
  r.feasible = true;
  r.makespan = opt[static_cast<size_t>(at(top, 0, n - 1))];
  std::function<void(size_t, size_t, int64_t)> rec = [&](size_t lmin, size_t lmax, int64_t m) {
    if (lmin == lmax) {
      if (lmin == n - 1) {
        r.schedule.push_back({ChainOpKind::Loss, 0});
      } else {
        r.schedule.push_back({ChainOpKind::Fall, static_cast<int>(lmin)});
        r.schedule.push_back({ChainOpKind::B, static_cast<int>(lmin)});
      }
      return;
    }
    const int j = what[static_cast<size_t>(at(m, lmin, lmax))];
    if (j < 0) {
      r.schedule.push_back({ChainOpKind::Fall, static_cast<int>(lmin)});
      rec(lmin + 1, lmax, m - cbw[lmin + 1]);
      r.schedule.push_back({ChainOpKind::B, static_cast<int>(lmin)});
    } else {
      r.schedule.push_back({ChainOpKind::Fck, static_cast<int>(lmin)});
      for (int k = static_cast<int>(lmin) + 1; k < j; ++k)
        r.schedule.push_back({ChainOpKind::Fn, k});
      rec(static_cast<size_t>(j), lmax, m - cw[static_cast<size_t>(j)]);
      rec(lmin, static_cast<size_t>(j) - 1, m);
    }
  };
  rec(0, n - 1, top);
  return r;
}

TEST(ChainDp, WorkedExampleIsRotorsSchedule) {
  const Chain slots = discretize_chain(example_chain(), MiB);
  const RotorResult rotor = rotor_reference(slots, 500);
  ASSERT_TRUE(rotor.feasible);
  EXPECT_EQ(rotor.makespan, 27);
  EXPECT_EQ(tokens(rotor.schedule), kExampleSchedule);
  const Chain at610 = discretize_chain(example_chain(), 610 * MiB / 500);
  EXPECT_EQ(rotor_reference(at610, 500).makespan, 26);
  EXPECT_FALSE(rotor_reference(discretize_chain(example_chain(), 450 * MiB / 500), 500).feasible);
}

TEST(ChainDp, RotorsChainOptionForgetsTheGradientOfTheSegmentEnd) {
  // Rotor tests Fall_s of the chain option inside segment [s, t] with δ_{s+1} (its table entry
  // opt[m][s][s]) although δ_{t+1} is what is live. Here, after B4, segment [1, 3] runs with
  // δ_4 (4 slots) live, and Fall1 needs x_0 + x_1 + δ_4 + x̄_2 + ftmp_1 = 5 + 10 + 4 + 6 + 39
  // = 64 slots: Rotor accepts it at 61 (it counts δ_2, 1 slot: 61).
  Chain c;
  c.fwd_ms = {4, 5, 0, 3, 4};
  c.bwd_ms = {3, 5, 2, 1, 5};
  c.x_bytes = {5, 10, 1, 6, 4, 7};
  c.xbar_bytes = {13, 6, 20, 8, 26};
  c.fwd_tmp_bytes = {0, 39, 13, 0, 0};
  c.bwd_tmp_bytes = {5, 4, 1, 3, 5};
  c.loss_ms = 3;
  c.loss_tmp_bytes = 2;
  const RotorResult rotor = rotor_reference(c, 61);
  ASSERT_TRUE(rotor.feasible);
  EXPECT_EQ(rotor.makespan, 47);
  EXPECT_EQ(tokens(rotor.schedule),
            (std::vector<std::string>{"Fck0", "Fck1", "Fn2", "Fn3", "Fall4", "Loss", "B4", "Fall1",
                                      "Fck2", "Fall3", "B3", "Fall2", "B2", "B1", "Fall0", "B0"}));
  Result<ChainSimResult> rsim = simulate_chain(c, rotor.schedule);
  ASSERT_TRUE(rsim.ok());
  EXPECT_EQ(rsim.value().peak, 64);
  EXPECT_EQ(rsim.value().peak_op, 7);  // Fall1
  // headroom keeps to 61 slots, at the exhaustive optimum.
  const ChainDpResult ours = solve_chain_dp(c, 61);
  ASSERT_TRUE(ours.feasible);
  EXPECT_EQ(ours.makespan_ms, 51);
  Result<ChainSimResult> sim = simulate_chain(c, ours.schedule);
  ASSERT_TRUE(sim.ok());
  EXPECT_LE(sim.value().peak, 61);
  EXPECT_EQ(exhaustive_persistent(c, 61).makespan_ms, 51);
}

TEST(ChainDp, NeverWorseThanRotorWhereRotorsScheduleFits) {
  std::mt19937 rng(31337);
  int rotor_fits = 0, rotor_overflows = 0, better = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int L = 1 + trial % 8;
    const Chain c = random_chain(rng, L, 1, /*wild=*/trial % 2 == 0);
    const int64_t all = store_all_peak(c);
    for (int64_t slots = std::max<int64_t>(1, all / 4); slots <= all + 1;
         slots += std::max<int64_t>(1, all / 9)) {
      const ChainDpResult ours = dp_at(c, 1, static_cast<int>(slots));
      const RotorResult rotor = rotor_reference(c, static_cast<int>(slots));
      if (ours.feasible) {
        Result<ChainSimResult> sim = simulate_chain(c, ours.schedule);
        ASSERT_TRUE(sim.ok()) << sim.error();
        ASSERT_LE(sim.value().peak, slots);
      }
      if (!rotor.feasible) continue;
      Result<ChainSimResult> rsim = simulate_chain(c, rotor.schedule);
      ASSERT_TRUE(rsim.ok()) << rsim.error();
      ASSERT_EQ(rsim.value().makespan_ms, rotor.makespan);
      if (rsim.value().peak > slots) {
        ++rotor_overflows;  // Rotor's Fall_s test ignores δ_{t+1}; see docs/chain-solver.md
        continue;
      }
      ++rotor_fits;
      ASSERT_TRUE(ours.feasible) << "trial " << trial << " slots " << slots << "\n"
                                 << chain_json(c);
      ASSERT_LE(ours.makespan_ms, rotor.makespan) << "trial " << trial << " slots " << slots << "\n"
                                                  << chain_json(c);
      if (ours.makespan_ms < rotor.makespan) ++better;
    }
  }
  EXPECT_GT(rotor_fits, 1000);
  // Printed for docs/chain-solver.md.
  std::printf(
      "[ rotor ] schedules that fit: %d, that overflow the budget: %d, headroom strictly better: "
      "%d\n",
      rotor_fits, rotor_overflows, better);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
