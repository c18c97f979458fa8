// The graph rematerialization integer program (remat_ilp.h, docs/ilp.md): the model's loader and
// simulator, the chain model's worked example, the program against an exhaustive search on small
// random graphs (remat_exhaustive.h), against the chain DP on random chains, and infeasible
// budgets. Every schedule the program returns is re-run in the simulator.
#include "plan/remat_ilp.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "plan/chain_dp.h"
#include "plan/chain_simulate.h"
#include "plan/remat_graph.h"
#include "plan/remat_plan.h"
#include "plan/remat_simulate.h"
#include "plan/remat_start.h"
#include "remat_exhaustive.h"

namespace headroom {
namespace {

constexpr int64_t MiB = 1 << 20;

// The worked example of the chain model (4 stages + loss), sizes in `unit`.
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

std::vector<std::string> tokens(const std::vector<RematOp>& ops) {
  std::vector<std::string> out;
  for (RematOp op : ops) out.push_back(remat_op_token(op));
  return out;
}

RematIlpOptions opts(bool persistent) {
  RematIlpOptions o;
  o.persistent = persistent;
  o.time_limit_s = 30;  // never reached on these sizes; a reached limit fails the tests below
  return o;
}

// ---------------------------------------------------------------------------------------------
// The worked example (chain-model.md §7): 27 ms at 500 MiB, 500 slots.

TEST(RematIlp, WorkedExampleIs27ms) {
  for (bool persistent : {true, false}) {
    Result<RematPlan> r =
        solve_remat(graph_of_chain(example_chain()), 500 * MiB, 500, opts(persistent));
    ASSERT_TRUE(r.ok()) << r.error();
    const RematPlan& p = r.value();
    ASSERT_EQ(p.status, RematIlpStatus::Optimal);
    // Forwards 1+1+2+4, recomputed Fall0 + Fall1 = 2, backwards 16, loss 1: 27.
    EXPECT_EQ(p.makespan_ms, 27);
    EXPECT_EQ(p.bound_ms, 27);
    EXPECT_EQ(p.gap_pct, 0);
    EXPECT_EQ(p.no_checkpoint_makespan_ms, 25);
    EXPECT_EQ(p.store_all_bytes, 610 * MiB);
    EXPECT_LE(p.peak_bytes, 500 * MiB);
    Result<RematSimResult> sim = simulate_remat(graph_of_chain(example_chain()), p.schedule);
    ASSERT_TRUE(sim.ok()) << sim.error();
    EXPECT_EQ(sim.value().makespan_ms, 27);
  }
}

TEST(RematIlp, WorkedExampleAtOtherBudgets) {
  auto at = [](int64_t budget, int slots) {
    Result<RematPlan> r = solve_remat(graph_of_chain(example_chain()), budget, slots, opts(true));
    EXPECT_TRUE(r.ok());
    return r.value();
  };
  // 400 and 450 MiB: no schedule (chain-model.md §7), reported as infeasible with no schedule.
  for (int64_t m : {400, 450}) {
    const RematPlan p = at(m * MiB, 500);
    EXPECT_EQ(p.status, RematIlpStatus::Infeasible) << m;
    EXPECT_TRUE(p.schedule.empty());
  }
  EXPECT_EQ(at(550 * MiB, 500).makespan_ms, 27);
  EXPECT_EQ(at(610 * MiB, 500).makespan_ms, 26);  // rounding at u = 1.22 MiB
  EXPECT_EQ(at(610 * MiB, 610).makespan_ms, 25);  // store everything fits 610 slots of 1 MiB
}

// ---------------------------------------------------------------------------------------------
// The simulator on a graph: a skip edge, hand-computed.

RematGraph skip_graph() {
  // a_0 -F0-> a_1 -F1-> a_2 -F2(a_2, a_1)-> a_3 -> loss. Sizes in slots.
  RematGraph g;
  g.sizes.fwd_ms = {1, 2, 3};
  g.sizes.bwd_ms = {2, 4, 6};
  g.sizes.x_bytes = {10, 20, 30, 40};
  g.sizes.xbar_bytes = {25, 35, 45};
  g.sizes.fwd_tmp_bytes = {1, 2, 3};
  g.sizes.bwd_tmp_bytes = {4, 5, 6};
  g.sizes.loss_ms = 1;
  g.sizes.loss_tmp_bytes = 7;
  g.preds = {{0}, {1}, {1, 2}};
  return g;
}

TEST(RematSimulate, SkipEdgeStoreEverything) {
  const RematGraph g = skip_graph();
  ASSERT_NO_THROW(validate_remat_graph(g));
  // Fall0: 10 + 25 + 1 = 36 (live 35); Fall1: 35 + 35 + 2 = 72 (live 70); Fall2: 70 + 45 + 3 =
  // 118 (live 115); Loss: 115 + 40 + 7 = 162 (live 155, δ_3); B2 reads x̄_3, δ_3, a_1, a_2 and
  // creates δ_2 and δ_1 (first to touch both): 155 + 30 + 20 + 6 = 211, then frees δ_3, x̄_3:
  // live 155 - 40 - 45 + 50 = 120; B1 (δ_1 exists, accumulates): 120 + 0 + 5 = 125... B1 creates
  // δ_1? No: δ_1 was created by B2, so B1 only adds to it: in use 120 + 5 = 125, frees δ_2 and
  // x̄_2: live 120 - 30 - 35 = 55 (x_0, x̄_1, δ_1); B0 creates δ_0: 55 + 10 + 4 = 69, frees
  // δ_1, x̄_1 and the plain x_0: live 10 (δ_0).
  Result<RematSimResult> r = simulate_remat(g, remat_store_all_schedule(3));
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r.value().peak, 211);
  EXPECT_EQ(r.value().peak_op, 4);
  EXPECT_EQ(r.value().makespan_ms, 1 + 2 + 3 + 1 + 6 + 4 + 2);
  const std::vector<std::string> ops = {"Fall0", "Fall1", "Fall2", "Loss", "B2", "B1", "B0"};
  const std::vector<int64_t> in_use = {36, 72, 118, 162, 211, 125, 69};
  const std::vector<int64_t> live = {35, 70, 115, 155, 120, 55, 10};
  RematState s = RematState::initial(g);
  for (size_t k = 0; k < ops.size(); ++k) {
    int64_t u = 0;
    double t = 0;
    ASSERT_EQ(apply_remat_op(g, remat_consumers(g), parse_remat_op_token(ops[k]), s, &u, &t), "");
    EXPECT_EQ(u, in_use[k]) << ops[k];
    EXPECT_EQ(s.live, live[k]) << ops[k];
  }
}

TEST(RematSimulate, RejectsInvalidSchedules) {
  const RematGraph g = skip_graph();
  auto err = [&](std::vector<std::string> ops) {
    Result<RematSimResult> r = simulate_remat(g, ops);
    return r.ok() ? std::string("(valid)") : r.error();
  };
  // Fn1 frees a_1, which F2 reads.
  EXPECT_EQ(err({"Fck0", "Fn1", "Fall2"}), "schedule op 2 (Fall2): its input a_1 is not live");
  EXPECT_EQ(err({"Fck0", "Free0", "Fck1"}), "schedule: the schedule ends before the loss");
  EXPECT_EQ(err({"Free1"}), "schedule op 0 (Free1): a_1 is not live");
  EXPECT_EQ(err({"Fall0", "Fall1", "Fall2", "Loss", "B1"}),
            "schedule op 4 (B1): backwards run in order and B2 comes next");
  EXPECT_EQ(err({"Fall0", "Fall1", "Fall2", "Loss", "Free1", "B2"}),
            "schedule op 5 (B2): its input a_1 is not live");
  // x_0 is freed by B0 (its last reader), so nothing can run after it.
  EXPECT_EQ(err({"Fall0", "Fall1", "Fall2", "Loss", "B2", "B1", "B0", "Fall0"}),
            "schedule op 7 (Fall0): its input a_0 is not live");
  // Recomputing a_2 after B1 (from x̄_1, which B0 still needs) leaves it over.
  EXPECT_EQ(err({"Fall0", "Fall1", "Fall2", "Loss", "B2", "B1", "Fck1", "B0"}),
            "schedule: the schedule ends with x_2 still live");
  EXPECT_EQ(err({"Fall0", "Fall1", "Fall2", "Loss", "B2", "B1", "Fck1", "Free2", "B0"}), "(valid)");
  EXPECT_EQ(err({"Free7"}), "schedule op 0 (Free7): activation 7 is out of range (the graph has 4 activations)");
}

TEST(RematGraph, FileErrorsNameTheField) {
  const std::string chain_part =
      R"("fwd_ms": [1, 2, 3], "bwd_ms": [2, 4, 6], "x_bytes": [10, 20, 30, 40],)"
      R"( "xbar_bytes": [25, 35, 45], "fwd_tmp_bytes": [1, 2, 3], "bwd_tmp_bytes": [4, 5, 6],)"
      R"( "loss_ms": 1, "loss_tmp_bytes": 7)";
  auto err = [&](const std::string& preds) {
    Result<RematGraph> r = parse_remat_graph_json("{" + chain_part + preds + "}");
    return r.ok() ? std::string("(parsed)") : r.error();
  };
  EXPECT_EQ(err(R"(, "preds": [[0], [1], [1, 2]])"), "(parsed)");
  EXPECT_EQ(err(""), "(parsed)");  // a chain
  EXPECT_EQ(err(R"(, "preds": [[0], [1]])"),
            "graph: preds has 2 entries, a graph of 3 stages needs 3 (one per stage)");
  EXPECT_EQ(err(R"(, "preds": [[0], [2], [1, 2]])"),
            "graph: preds[1] holds 2, stage 1 can read activations 0..1 only (a_0 is the input, "
            "a_{j+1} the output of stage j)");
  EXPECT_EQ(err(R"(, "preds": [[0], [1], [2, 1]])"),
            "graph: preds[2] must be strictly increasing (no repeated activation)");
  EXPECT_EQ(err(R"(, "preds": [[0], [], [1, 2]])"),
            "graph: preds[1] is empty, every stage reads at least one activation");
  EXPECT_EQ(err(R"(, "preds": [[0], [0], [2]])"),
            "graph: preds: no stage reads activation 1 (the output of stage 0), every activation "
            "but the last must reach the loss");
  EXPECT_EQ(err(R"(, "preds": [[0], [1], "x"])"),
            "graph: preds[2] must be an array of activation indices, got \"x\"");
  EXPECT_EQ(err(R"(, "preds": [[0], [1], [1.5]])"),
            "graph: preds[2] holds 1.5, not an activation index");
  EXPECT_EQ(err(R"(, "preds": 3)"), "graph: 'preds' must be an array, got number");
  Result<RematGraph> missing = parse_remat_graph_json(R"({"fwd_ms": [1]})");
  EXPECT_EQ(missing.error(), "graph: missing field 'bwd_ms'");
  EXPECT_EQ(load_remat_graph_file("/nonexistent.json").error(),
            "cannot read graph file '/nonexistent.json': No such file or directory");
  Result<RematGraph> ex =
      load_remat_graph_file(std::string(HEADROOM_SOURCE_DIR) + "/examples/graph-example.json");
  EXPECT_TRUE(ex.ok()) << ex.error();
}

// ---------------------------------------------------------------------------------------------
// Random small graphs: the program against the exhaustive search

// Sizes in slots (small integers), times small integers (sums exact in double). Stage i reads
// a_i with probability 3/4 and each earlier activation with probability 1/3; an activation no
// stage reads is given to a random later stage.
RematGraph random_graph(std::mt19937& rng, int L) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  RematGraph g;
  Chain& c = g.sizes;
  for (int i = 0; i <= L; ++i) c.x_bytes.push_back(pick(1, 8));
  for (int i = 0; i < L; ++i) {
    c.fwd_ms.push_back(pick(0, 5));
    c.bwd_ms.push_back(pick(0, 5));
    c.xbar_bytes.push_back(c.x_bytes[static_cast<size_t>(i) + 1] + pick(0, 8));
    c.fwd_tmp_bytes.push_back(pick(0, 4));
    c.bwd_tmp_bytes.push_back(pick(0, 4));
  }
  c.loss_ms = pick(0, 3);
  c.loss_tmp_bytes = pick(0, 3);
  g.preds.assign(static_cast<size_t>(L), {});
  std::vector<uint8_t> read(static_cast<size_t>(L) + 1, 0);
  for (int i = 0; i < L; ++i) {
    for (int k = 0; k <= i; ++k) {
      const bool edge = k == i ? pick(0, 3) > 0 : pick(0, 2) == 0;
      if (edge) g.preds[static_cast<size_t>(i)].push_back(k);
    }
    if (g.preds[static_cast<size_t>(i)].empty()) g.preds[static_cast<size_t>(i)].push_back(i);
  }
  for (int k = L - 1; k >= 0; --k) {
    for (int i = 0; i < L; ++i)
      for (int a : g.preds[static_cast<size_t>(i)]) read[static_cast<size_t>(a)] = 1;
    if (read[static_cast<size_t>(k)]) continue;
    auto& p = g.preds[static_cast<size_t>(pick(k, L - 1))];
    p.push_back(k);
    std::sort(p.begin(), p.end());
  }
  validate_remat_graph(g);
  return g;
}

TEST(RematIlp, MatchesExhaustiveSearchOnRandomSmallGraphs) {
  std::mt19937 rng(4242);
  int compared = 0, feasible = 0, recompute = 0, general_better = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const int L = 2 + trial % 3;
    const RematGraph g = random_graph(rng, L);
    const int64_t all = remat_store_all_peak(g);
    for (int64_t m : {all / 2, 2 * all / 3, 4 * all / 5, all - 1, all}) {
      for (bool persistent : {false, true}) {
        const RematIlpResult ilp = solve_remat_ilp(g, m, opts(persistent));
        const testing::RematExhaustive ex = testing::exhaustive_remat(g, m, persistent);
        ++compared;
        ASSERT_NE(ilp.status, RematIlpStatus::Feasible) << "time limit reached";
        ASSERT_NE(ilp.status, RematIlpStatus::NoSolution) << "time limit reached";
        ASSERT_EQ(ilp.status == RematIlpStatus::Optimal, ex.feasible)
            << "trial " << trial << " memory " << m << " persistent " << persistent << "\n"
            << remat_graph_json(g) << "\nexhaustive: " << ::testing::PrintToString(tokens(ex.schedule));
        if (!ex.feasible) continue;
        ++feasible;
        ASSERT_EQ(ilp.objective_ms, ex.makespan_ms)
            << "trial " << trial << " memory " << m << " persistent " << persistent << "\n"
            << remat_graph_json(g) << "\nexhaustive: " << ::testing::PrintToString(tokens(ex.schedule))
            << "\nilp: " << ::testing::PrintToString(tokens(ilp.schedule));
        if (ex.makespan_ms > no_checkpoint_makespan_ms(g.sizes)) ++recompute;
        Result<RematSimResult> sim = simulate_remat(g, ilp.schedule);
        ASSERT_TRUE(sim.ok()) << sim.error();
        EXPECT_LE(sim.value().peak, m);
        EXPECT_EQ(sim.value().makespan_ms, ilp.objective_ms);
        if (!persistent) {
          // Every op order (no stage rule): never worse than the program's space; count where
          // the general space is strictly better (docs/ilp.md).
          const testing::RematExhaustive any = testing::exhaustive_remat(g, m, false, false);
          ASSERT_TRUE(any.feasible);
          EXPECT_LE(any.makespan_ms, ex.makespan_ms);
          if (any.makespan_ms < ex.makespan_ms) ++general_better;
        }
      }
    }
  }
  EXPECT_GT(feasible, compared / 3);
  EXPECT_GT(recompute, 20);
  std::printf("[ remat ] graphs x budgets x modes: %d, feasible %d, with recomputation %d; every op "
              "order strictly better than the stage space: %d\n",
              compared, feasible, recompute, general_better);
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

// ---------------------------------------------------------------------------------------------
// Chains: the persistent program equals the chain DP; the unrestricted one is never worse.

Chain random_chain(std::mt19937& rng, int L, bool wild) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Chain c;
  for (int i = 0; i <= L; ++i) c.x_bytes.push_back(pick(1, wild ? 12 : 8));
  for (int i = 0; i < L; ++i) {
    c.fwd_ms.push_back(pick(0, 6));
    c.bwd_ms.push_back(pick(0, 6));
    c.xbar_bytes.push_back(c.x_bytes[static_cast<size_t>(i) + 1] + pick(0, wild ? 24 : 8));
    c.fwd_tmp_bytes.push_back(pick(0, wild ? 30 : 4));
    c.bwd_tmp_bytes.push_back(pick(0, wild ? 12 : 4));
  }
  c.loss_ms = pick(0, 6);
  c.loss_tmp_bytes = pick(0, 3);
  return c;
}

TEST(RematIlp, PersistentEqualsTheChainDpOnRandomChains) {
  std::mt19937 rng(777);
  int compared = 0, feasible = 0, recompute = 0, unrestricted_better = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const int L = 2 + trial % 5;
    const Chain c = random_chain(rng, L, trial % 3 == 0);
    const RematGraph g = graph_of_chain(c);
    const int64_t all = store_all_peak(c);
    for (int64_t m : {all / 2, 2 * all / 3, 3 * all / 4, 5 * all / 6, all}) {
      // Sizes are slots already (unit 1): the DP and the program see the same integers.
      const ChainDpResult dp = solve_chain_dp(c, static_cast<int>(m));
      const RematIlpResult ilp = solve_remat_ilp(g, m, opts(true));
      ++compared;
      ASSERT_TRUE(ilp.status == RematIlpStatus::Optimal || ilp.status == RematIlpStatus::Infeasible);
      ASSERT_EQ(dp.feasible, ilp.status == RematIlpStatus::Optimal)
          << "trial " << trial << " memory " << m << "\n" << chain_json(c);
      const RematIlpResult free_ilp = solve_remat_ilp(g, m, opts(false));
      if (!dp.feasible) {
        if (free_ilp.status == RematIlpStatus::Optimal) ++unrestricted_better;
        continue;
      }
      ++feasible;
      ASSERT_EQ(ilp.objective_ms, dp.makespan_ms)
          << "trial " << trial << " memory " << m << "\n" << chain_json(c)
          << "\nilp: " << ::testing::PrintToString(tokens(ilp.schedule));
      if (dp.makespan_ms > no_checkpoint_makespan_ms(c)) ++recompute;
      // The persistent program's schedule is a chain schedule: the chain simulator accepts it.
      std::vector<std::string> t = tokens(ilp.schedule);
      Result<ChainSimResult> chain_sim = simulate_chain(c, t);
      ASSERT_TRUE(chain_sim.ok()) << chain_sim.error() << "\n" << ::testing::PrintToString(t) << "\n" << chain_json(c) << "\nmemory " << m;
      EXPECT_LE(chain_sim.value().peak, m);
      EXPECT_EQ(chain_sim.value().makespan_ms, dp.makespan_ms);
      ASSERT_EQ(free_ilp.status, RematIlpStatus::Optimal);
      EXPECT_LE(free_ilp.objective_ms, dp.makespan_ms);
      if (free_ilp.objective_ms < dp.makespan_ms) ++unrestricted_better;
    }
  }
  EXPECT_GT(feasible, compared / 3);
  EXPECT_GT(recompute, 20);
  std::printf("[ remat ] chains x budgets: %d, DP feasible %d (with recomputation %d); the "
              "unrestricted program strictly better than the DP: %d\n",
              compared, feasible, recompute, unrestricted_better);
}

// The unrestricted schedules include the persistent ones: on random graphs with skip edges, at
// the same budget and slots, the unrestricted plan (solve_remat's two phases) is never slower
// than the persistent plan, and feasible whenever the persistent one is. The bundled-chain start
// (remat_start.h), when it exists, is a valid schedule within the budget, never faster than the
// unrestricted optimum, and inside the program's space (accepted as the first incumbent).
TEST(RematIlp, UnrestrictedNeverSlowerThanPersistentOnRandomGraphs) {
  std::mt19937 rng(9090);
  int compared = 0, feasible = 0, strictly = 0, starts = 0;
  for (int trial = 0; trial < 16; ++trial) {
    const int L = 3 + trial % 5;
    const RematGraph g = random_graph(rng, L);
    const int64_t all = remat_store_all_peak(g);
    for (int64_t m : {all / 2, 2 * all / 3, 4 * all / 5}) {
      if (m < 1) continue;
      const int slots = static_cast<int>(m);  // unit 1: the graph's sizes are the slots
      ++compared;
      Result<RematPlan> pers = solve_remat(g, m, slots, opts(true));
      Result<RematPlan> free = solve_remat(g, m, slots, opts(false));
      ASSERT_TRUE(pers.ok() && free.ok());
      const std::string where = "trial " + std::to_string(trial) + " memory " + std::to_string(m) +
                                "\n" + remat_graph_json(g);
      // Small enough to be proven, also when phase 2 proves that nothing beats phase 1's cutoff.
      ASSERT_TRUE(free.value().status == RematIlpStatus::Optimal ||
                  free.value().status == RematIlpStatus::Infeasible)
          << where;
      if (pers.value().has_schedule()) {
        ++feasible;
        ASSERT_TRUE(free.value().has_schedule()) << where;
        EXPECT_LE(free.value().makespan_ms, pers.value().makespan_ms) << where;
        if (free.value().makespan_ms < pers.value().makespan_ms) ++strictly;
      }
      const std::vector<RematOp> start = remat_bundled_chain_schedule(g, m);
      if (start.empty()) continue;
      ++starts;
      Result<RematSimResult> sim = simulate_remat(g, start);
      ASSERT_TRUE(sim.ok()) << sim.error() << "\n" << where;
      EXPECT_LE(sim.value().peak, m) << where;
      ASSERT_TRUE(free.value().has_schedule()) << where;
      EXPECT_GE(sim.value().makespan_ms, free.value().makespan_ms) << where;
      const RematIlpResult ilp = solve_remat_ilp(g, m, opts(false), start);
      EXPECT_EQ(ilp.start_ms, sim.value().makespan_ms) << where << ::testing::PrintToString(tokens(start));
    }
  }
  EXPECT_GT(feasible, compared / 3);
  EXPECT_GT(starts, 0);
  std::printf("[ remat ] graphs x budgets: %d, persistent feasible %d, unrestricted strictly "
              "faster %d, bundled-chain starts %d\n",
              compared, feasible, strictly, starts);
}

// A proven optimum is the same bytes on every run (docs/ilp.md §4, "Determinism"): the example
// graph (a skip edge, so the two-phase solve) at budgets where phase 2 proves the optimum or
// proves that nothing beats phase 1.
TEST(RematIlp, ProvenOptimumIsDeterministic) {
  Result<RematGraph> g =
      load_remat_graph_file(std::string(HEADROOM_SOURCE_DIR) + "/examples/graph-example.json");
  ASSERT_TRUE(g.ok()) << g.error();
  for (int64_t mib : {650, 700, 1024}) {
    Result<RematPlan> a = solve_remat(g.value(), mib * MiB, 500, opts(false));
    Result<RematPlan> b = solve_remat(g.value(), mib * MiB, 500, opts(false));
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a.value().status, RematIlpStatus::Optimal) << mib;
    EXPECT_EQ(remat_plan_json(a.value()), remat_plan_json(b.value())) << mib;
  }
}

}  // namespace
}  // namespace headroom

#include "cli_runner.h"

namespace headroom {
namespace {

TEST(RematCli, PlanGraph) {
  const std::string file = std::string(HEADROOM_SOURCE_DIR) + "/examples/graph-example.json";
  // The example is the worked example plus a skip edge a_1 -> stage 2. B2 then needs, at 600 MiB
  // (u = 1.2 MiB, sizes round up), x_0 80 + δ_3 40 + x̄_3 120 + a_1 60 + a_2 120 + new δ_2 120 +
  // new δ_1 60 + btmp 10 = 610 MiB before rounding: infeasible. At 650 MiB it fits.
  testing::CliRun no = testing::run_cli("plan --graph " + file + " --budget 600MiB --json");
  EXPECT_EQ(no.code, 0) << no.err;
  EXPECT_NE(no.out.find("\"status\": \"infeasible\""), std::string::npos) << no.out;
  testing::CliRun yes = testing::run_cli("plan --graph " + file + " --budget 650MiB");
  EXPECT_EQ(yes.code, 0) << yes.err;
  EXPECT_NE(yes.out.find("status: optimal"), std::string::npos) << yes.out;
  testing::CliRun bad = testing::run_cli("plan --graph /nonexistent.json --budget 1GiB");
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(bad.err, "headroom: cannot read graph file '/nonexistent.json': No such file or directory\n");
  testing::CliRun limit = testing::run_cli("plan --graph " + file + " --budget 1GiB --time-limit 0");
  EXPECT_EQ(limit.code, 2);
  EXPECT_EQ(limit.err, "headroom: --time-limit 0 is not a positive number of seconds\n");
}

// The time limit covers the first incumbent too: at the stage limit (200) the chain DP's table
// takes about a second here, far past half of a 20 ms limit, so the DP gives up at its deadline
// and CBC starts from the fallback sweep instead of the plan waiting for the table.
TEST(RematPlan, TimeLimitCoversTheFirstIncumbent) {
  Chain c;
  const int L = 200;
  for (int i = 0; i < L; ++i) {
    c.fwd_ms.push_back(1 + i % 3);
    c.bwd_ms.push_back(2 + i % 5);
    c.xbar_bytes.push_back((3 + i % 4) * MiB);
    c.fwd_tmp_bytes.push_back(0);
    c.bwd_tmp_bytes.push_back(MiB);
  }
  for (int i = 0; i <= L; ++i) c.x_bytes.push_back((1 + i % 2) * MiB);
  c.loss_ms = 1;
  RematIlpOptions o = opts(true);
  o.time_limit_s = 0.02;
  const auto t0 = std::chrono::steady_clock::now();
  Result<RematPlan> r = solve_remat(graph_of_chain(c), 300 * MiB, 500, o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.ok()) << r.error();
  // Not a timing test (the machine is shared): only that nothing waited for a whole table.
  EXPECT_LT(seconds, 10);
  // The incumbent CBC got is the fallback sweep's, not the DP's optimal persistent schedule
  // (strictly better here: 300 MiB against about 1.2 GiB to store everything).
  const ChainDpResult dp = solve_chain_dp(discretize_chain(c, 300 * MiB / 500), 500);
  ASSERT_TRUE(dp.feasible);
  EXPECT_GT(r.value().start_ms, dp.makespan_ms + 1e-3) << "the DP's schedule was handed to CBC";
}

}  // namespace
}  // namespace headroom
