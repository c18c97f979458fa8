// Checkmate's memory model on its own graph form (checkmate_graph.h, checkmate_ilp.h,
// checkmate_plan.h, docs/ilp.md §9): the file, the accounting by hand, both formulations against
// an exhaustive search on small random graphs (checkmate_exhaustive.h), and against each other on
// Checkmate-form training graphs (bench/checkmate_graphs.h).
#include "plan/checkmate_ilp.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "../bench/checkmate_graphs.h"
#include "checkmate_exhaustive.h"
#include "plan/checkmate_graph.h"
#include "plan/checkmate_improve.h"
#include "plan/checkmate_plan.h"
#include "plan/checkmate_start.h"

namespace headroom {
namespace {

constexpr int64_t MiB = 1 << 20;

CheckmateIlpOptions opts(CheckmateFormulation f) {
  CheckmateIlpOptions o;
  o.formulation = f;
  o.time_limit_s = 60;  // never reached on these sizes; a reached limit fails the tests below
  return o;
}

constexpr CheckmateFormulation kBoth[] = {CheckmateFormulation::Literal, CheckmateFormulation::Headroom};

// gen_linear_graph(2) of Checkmate: forward 0, 1, the loss 2, backward 3 (of 1) and 4 (of 0);
// every node 1 MiB; costs 1, 2, 1, 4, 2.
CheckmateGraph tiny_linear() {
  Result<CheckmateGraph> g = parse_checkmate_graph_json(
      R"({"T": 5, "edges": [[0, 1], [1, 2], [2, 3], [3, 4], [1, 3], [0, 4]],
          "cost": [1, 2, 1, 4, 2], "size_bytes": [1048576, 1048576, 1048576, 1048576, 1048576],
          "kind": ["fwd", "fwd", "loss", "bwd", "bwd"]})");
  EXPECT_TRUE(g.ok()) << g.error();
  return g.value();
}

TEST(CheckmateGraph, StoreAllByHand) {
  // Last readers: 0 -> 4, 1 -> 3, 2 -> 3, 3 -> 4. Store-all, in MiB:
  //   stage 0: compute 0 -> 1
  //   stage 1: held {0} 1, compute 1 -> 2 (0 is held into stage 2: not freed)
  //   stage 2: held {0,1} 2, compute 2 -> 3
  //   stage 3: held {0,1,2} 3, compute 3 -> 4, then 2 and 1 are freed (last read) -> 2
  //   stage 4: held {0,3} 2, compute 4 -> 3
  // Peak 4 MiB, cost 1 + 2 + 1 + 4 + 2 = 10.
  const CheckmateGraph g = tiny_linear();
  const CheckmateEvaluation ev = checkmate_evaluate(g, checkmate_store_all(g));
  EXPECT_EQ(ev.invalid, "");
  EXPECT_EQ(ev.peak_bytes, 4 * MiB);
  EXPECT_EQ(ev.cost, 10);
}

TEST(CheckmateIlp, TinyLinearByHand) {
  const CheckmateGraph g = tiny_linear();
  for (CheckmateFormulation f : kBoth) {
    // 4 MiB: store-all fits, cost 10.
    Result<CheckmatePlan> at4 = solve_checkmate(g, 4 * MiB, opts(f));
    ASSERT_TRUE(at4.ok()) << at4.error();
    EXPECT_EQ(at4.value().status, CheckmateStatus::Optimal);
    EXPECT_EQ(at4.value().cost, 10);
    // 3 MiB: stage 3 needs 1, 2 and 3 (3 MiB), so 0 cannot be held through it; it is recomputed
    // in stage 4 (held {3} 1, compute 0 -> 2, compute 4 -> 3): cost 10 + 1 = 11.
    Result<CheckmatePlan> at3 = solve_checkmate(g, 3 * MiB, opts(f));
    ASSERT_TRUE(at3.ok()) << at3.error();
    EXPECT_EQ(at3.value().status, CheckmateStatus::Optimal) << checkmate_formulation_name(f);
    EXPECT_EQ(at3.value().cost, 11);
    EXPECT_EQ(at3.value().peak_bytes, 3 * MiB);
    EXPECT_EQ(at3.value().compute.back(), (std::vector<int>{0, 4}));
    // 3 MiB - 1: node 3 and its two inputs do not fit.
    Result<CheckmatePlan> below = solve_checkmate(g, 3 * MiB - 1, opts(f));
    ASSERT_TRUE(below.ok()) << below.error();
    EXPECT_EQ(below.value().status, CheckmateStatus::Infeasible);
  }
}

// Random DAGs of 2-7 nodes (edges u < v with probability 0.4), sizes 0-6 bytes, costs 0-5, at
// budgets from just below the least possible peak (node t and its inputs) to the store-all peak:
// both formulations give the exhaustive search's feasibility and cost.
TEST(CheckmateIlp, BothFormulationsEqualTheExhaustiveSearch) {
  std::mt19937 rng(17);
  int cases = 0, feasible = 0, recomputing = 0, started = 0, greedy_above_optimum = 0, improved_to_optimum = 0;
  for (int trial = 0; trial < 40; ++trial) {
    CheckmateGraph g;
    g.T = 2 + trial % 6;
    for (int v = 1; v < g.T; ++v)
      for (int u = 0; u < v; ++u)
        if (std::uniform_int_distribution<int>(0, 9)(rng) < 4) g.edges.emplace_back(u, v);
    for (int i = 0; i < g.T; ++i) {
      g.cost.push_back(std::uniform_int_distribution<int64_t>(0, 5)(rng));
      g.size_bytes.push_back(std::uniform_int_distribution<int64_t>(0, 6)(rng));
      g.kind.push_back(CheckmateNodeKind::Forward);
    }
    validate_checkmate_graph(g);
    const int64_t all = checkmate_evaluate(g, checkmate_store_all(g)).peak_bytes;
    const int64_t least = bench::checkmate_least_peak(g);  // node t and its inputs: no schedule peaks lower
    for (int64_t budget : {least - 1, least, (least + all) / 2, all - 1, all}) {
      const testing::CheckmateExhaustive want = testing::checkmate_exhaustive(g, budget);
      ++cases;
      feasible += want.feasible;
      int64_t no_recompute = 0;
      for (int64_t c : g.cost) no_recompute += c;
      recomputing += want.feasible && want.cost > no_recompute;
      // The greedy start, when it has one, is a valid schedule within the budget, never below the
      // optimum.
      if (std::optional<CheckmateSchedule> start = checkmate_greedy_start(g, budget)) {
        const CheckmateEvaluation ev = checkmate_evaluate(g, *start);
        EXPECT_EQ(ev.invalid, "");
        EXPECT_LE(ev.peak_bytes, budget);
        ASSERT_TRUE(want.feasible);
        EXPECT_GE(ev.cost, want.cost);
        ++started;
        // Its local improvement: valid, within the budget, no worse, never below the optimum.
        const CheckmateEvaluation better = checkmate_evaluate(g, checkmate_improve(g, *start, budget));
        EXPECT_EQ(better.invalid, "");
        EXPECT_LE(better.peak_bytes, budget);
        EXPECT_LE(better.cost, ev.cost);
        EXPECT_GE(better.cost, want.cost);
        greedy_above_optimum += ev.cost > want.cost;
        improved_to_optimum += better.cost == want.cost && ev.cost > want.cost;
      }
      for (CheckmateFormulation f : kBoth) {
        Result<CheckmatePlan> got = solve_checkmate(g, budget, opts(f));
        ASSERT_TRUE(got.ok()) << got.error();
        const std::string what = "trial " + std::to_string(trial) + " budget " + std::to_string(budget) + " " +
                                 checkmate_formulation_name(f) + "\n" + checkmate_graph_json(g);
        if (!want.feasible) {
          EXPECT_EQ(got.value().status, CheckmateStatus::Infeasible) << what;
          continue;
        }
        EXPECT_EQ(got.value().status, CheckmateStatus::Optimal) << what;
        EXPECT_EQ(got.value().cost, want.cost) << what;
      }
    }
  }
  // The cases are not vacuous: feasible ones, and among them some that must recompute.
  EXPECT_EQ(cases, 200);
  EXPECT_GE(feasible, 120);
  EXPECT_GE(recomputing, 15);
  EXPECT_GE(started, 100);
  RecordProperty("feasible", feasible);
  RecordProperty("recomputing", recomputing);
  RecordProperty("started", started);
  RecordProperty("greedy_above_optimum", greedy_above_optimum);
  RecordProperty("improved_to_optimum", improved_to_optimum);
}

// Checkmate-form training graphs of 7-9 nodes (the exhaustive search's limit): linear, ResNet-
// and U-Net-like, at budgets between the least peak and the store-all peak.
TEST(CheckmateIlp, TrainingGraphsEqualTheExhaustiveSearch) {
  int recomputing = 0;
  for (auto shape : {bench::CheckmateShape::Linear, bench::CheckmateShape::ResNet, bench::CheckmateShape::UNet}) {
    for (int n : {3, 4}) {
      const CheckmateGraph g = bench::checkmate_training_graph(shape, n, 100 + static_cast<uint32_t>(n));
      const int64_t all = checkmate_evaluate(g, checkmate_store_all(g)).peak_bytes;
      for (int64_t budget : {all / 2, (3 * all) / 5, (3 * all) / 4, all - MiB}) {
        const testing::CheckmateExhaustive want = testing::checkmate_exhaustive(g, budget);
        int64_t no_recompute = 0;
        for (int64_t c : g.cost) no_recompute += c;
        recomputing += want.feasible && want.cost > no_recompute;
        if (std::optional<CheckmateSchedule> start = checkmate_greedy_start(g, budget)) {
          const CheckmateEvaluation better = checkmate_evaluate(g, checkmate_improve(g, *start, budget));
          EXPECT_EQ(better.invalid, "");
          EXPECT_LE(better.peak_bytes, budget);
          EXPECT_GE(better.cost, want.cost);
        }
        for (CheckmateFormulation f : kBoth) {
          Result<CheckmatePlan> got = solve_checkmate(g, budget, opts(f));
          ASSERT_TRUE(got.ok()) << got.error();
          EXPECT_EQ(got.value().status, want.feasible ? CheckmateStatus::Optimal : CheckmateStatus::Infeasible);
          if (want.feasible) {
            EXPECT_EQ(got.value().cost, want.cost);
          }
        }
      }
    }
  }
  EXPECT_GE(recomputing, 6);
}

// Training graphs of 11 nodes (the literal program takes minutes from 21 nodes on): the two
// formulations prove the same optimum.
TEST(CheckmateIlp, FormulationsAgreeOnTrainingGraphs) {
  for (auto shape : {bench::CheckmateShape::Linear, bench::CheckmateShape::ResNet, bench::CheckmateShape::UNet}) {
    for (int n : {5}) {
      const CheckmateGraph g = bench::checkmate_training_graph(shape, n, 7 + static_cast<uint32_t>(n));
      const int64_t all = checkmate_evaluate(g, checkmate_store_all(g)).peak_bytes;
      for (int64_t budget : {(3 * all) / 5, (4 * all) / 5}) {
        Result<CheckmatePlan> lit = solve_checkmate(g, budget, opts(CheckmateFormulation::Literal));
        Result<CheckmatePlan> ours = solve_checkmate(g, budget, opts(CheckmateFormulation::Headroom));
        ASSERT_TRUE(lit.ok() && ours.ok());
        ASSERT_EQ(lit.value().status, ours.value().status) << n << " " << budget;
        EXPECT_NE(lit.value().status, CheckmateStatus::Feasible);  // proven both ways
        EXPECT_EQ(lit.value().cost, ours.value().cost) << n << " " << budget;
      }
    }
  }
}

// The 21-node U-Net-like graph of the benchmark at 60%: the greedy checkpoint set recomputes far
// more than needed (long skips), and the improved start that CBC is handed is already the proven
// optimum (docs/ilp.md §9's table: 215 -> 168), so CBC only has to prove it.
TEST(CheckmateIlp, ImprovedStartIsTheOptimumOnTheUNet21) {
  const CheckmateGraph g = bench::checkmate_training_graph(bench::CheckmateShape::UNet, 10, 11);
  const int64_t budget = bench::checkmate_budget_between(g, 60);
  Result<CheckmatePlan> got = solve_checkmate(g, budget, opts(CheckmateFormulation::Headroom));
  ASSERT_TRUE(got.ok()) << got.error();
  ASSERT_EQ(got.value().status, CheckmateStatus::Optimal);
  EXPECT_GT(got.value().greedy_cost, got.value().cost);
  EXPECT_EQ(got.value().start_cost, got.value().cost);
}

TEST(CheckmateGraph, FileErrorsNameTheField) {
  auto error = [](const std::string& text) {
    Result<CheckmateGraph> g = parse_checkmate_graph_json(text);
    return g.ok() ? std::string("ok") : g.error();
  };
  const std::string tail = R"(, "cost": [1, 1], "size_bytes": [4, 4], "kind": ["fwd", "bwd"]})";
  EXPECT_EQ(error(R"({"T": 2, "edges": [[0, 1]])" + tail), "ok");
  EXPECT_EQ(error(R"({"T": 2, "edges": [[1, 0]])" + tail),
            "graph: edges[0] = [1, 0] does not go forward: nodes are in topological order, so u < v");
  EXPECT_EQ(error(R"({"T": 2, "edges": [[0, 2]])" + tail), "graph: edges[0] = [0, 2] names a node outside 0..1");
  EXPECT_EQ(error(R"({"T": 2, "edges": [[0, 1], [0, 1]])" + tail), "graph: edges[1] = [0, 1] is repeated");
  EXPECT_EQ(error(R"({"T": 2, "edges": [[0]])" + tail), "graph: edges[0] is an array, not a pair [u, v]");
  EXPECT_EQ(error(R"({"T": 3, "edges": [])" + tail), "graph: cost has 2 entries, T = 3 needs one per node");
  EXPECT_EQ(error(R"({"T": 2, "edges": [], "cost": [1, -1], "size_bytes": [4, 4], "kind": ["fwd", "bwd"]})"),
            "graph: cost[1] is -1, it cannot be negative");
  EXPECT_EQ(error(R"({"T": 2, "edges": [], "cost": [1, 1], "size_bytes": [4, 4.5], "kind": ["fwd", "bwd"]})"),
            "graph: size_bytes[1] is 4.5, not a whole number");
  EXPECT_EQ(error(R"({"T": 2, "edges": [], "cost": [1, 1], "size_bytes": [4, 4], "kind": ["fwd", "grad"]})"),
            "graph: kind[1] is \"grad\", not \"fwd\", \"loss\" or \"bwd\"");
  EXPECT_EQ(error(R"({"T": 0, "edges": [], "cost": [], "size_bytes": [], "kind": []})"),
            "graph: T is 0, a graph has 1..400 nodes");
  EXPECT_EQ(error(R"({"edges": []})"), "graph: missing field \"T\"");
}

// 400 nodes and 1,000 edges: 3 * 400^2 + 400 * 1000 = 880,000 variables, within the limit;
// 5,000 edges: 480,000 + 2,000,000 = 2,480,000, over it (one line, before any program is built).
TEST(CheckmateIlp, ProgramSizeIsBounded) {
  CheckmateGraph g;
  g.T = 400;
  for (int i = 0; i < g.T; ++i) {
    g.cost.push_back(1);
    g.size_bytes.push_back(1);
    g.kind.push_back(CheckmateNodeKind::Forward);
  }
  for (int v = 1; v < g.T && g.edges.size() < 5000; ++v)
    for (int u = std::max(0, v - 13); u < v && g.edges.size() < 5000; ++u) g.edges.emplace_back(u, v);
  validate_checkmate_graph(g);
  Result<CheckmatePlan> over = solve_checkmate(g, 1 << 20, opts(CheckmateFormulation::Literal));
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error(),
            "the graph's 400 nodes and 5000 edges make an integer program of 2480000 variables (3 T^2 + T E), over "
            "the limit of 2000000");
}

TEST(CheckmateGraph, JsonRoundTrip) {
  const CheckmateGraph g = bench::checkmate_training_graph(bench::CheckmateShape::UNet, 6, 3);
  Result<CheckmateGraph> back = parse_checkmate_graph_json(checkmate_graph_json(g));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back.value().edges, g.edges);
  EXPECT_EQ(back.value().cost, g.cost);
  EXPECT_EQ(back.value().size_bytes, g.size_bytes);
  EXPECT_EQ(back.value().kind, g.kind);
}

}  // namespace
}  // namespace headroom

#include "cli_runner.h"

namespace headroom {
namespace {

// examples/checkmate-linear.json is tiny_linear() above: 11 at 3 MiB (node 0 recomputed in the
// last stage), infeasible below; the options that do not apply are errors.
TEST(CheckmateCli, PlanGraphCheckmate) {
  const std::string file = std::string(HEADROOM_SOURCE_DIR) + "/examples/checkmate-linear.json";
  for (const std::string form : {"", " --formulation literal"}) {
    testing::CliRun ok = testing::run_cli("plan --graph " + file + " --memory-model checkmate --budget 3MiB --json" + form);
    EXPECT_EQ(ok.code, 0) << ok.err;
    EXPECT_NE(ok.out.find("\"status\": \"optimal\""), std::string::npos) << ok.out;
    EXPECT_NE(ok.out.find("\"cost\": 11,"), std::string::npos) << ok.out;
    EXPECT_NE(ok.out.find("\"peak_bytes\": 3145728,"), std::string::npos) << ok.out;
  }
  testing::CliRun text = testing::run_cli("plan --graph " + file + " --memory-model checkmate --budget 3MiB");
  EXPECT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("stage 4: compute 0 4; held 3\n"), std::string::npos) << text.out;
  testing::CliRun no = testing::run_cli("plan --graph " + file + " --memory-model checkmate --budget 2MiB");
  EXPECT_EQ(no.code, 0) << no.err;
  EXPECT_NE(no.out.find("status: infeasible"), std::string::npos) << no.out;
  auto usage = [&](const std::string& args, const std::string& err) {
    testing::CliRun r = testing::run_cli(args);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_EQ(r.out, "") << args;
    EXPECT_EQ(r.err, "headroom: " + err + "\n") << args;
  };
  usage("plan --graph " + file + " --memory-model checkmate --budget 3MiB --slots 10",
        "--slots does not apply to --memory-model checkmate (sizes are exact bytes)");
  usage("plan --graph " + file + " --memory-model checkmate --budget 3MiB --persistent",
        "--persistent does not apply to --memory-model checkmate");
  usage("plan --graph " + file + " --memory-model chekmate --budget 3MiB", "--memory-model chekmate is not headroom or checkmate");
  usage("plan --graph " + file + " --budget 3MiB --formulation literal", "--formulation applies to --memory-model checkmate");
  usage("plan --chain " + file + " --budget 3MiB --memory-model checkmate", "--memory-model and --formulation apply to plan --graph");
  usage("plan --graph " + file + " --memory-model checkmate --budget 3MiB --formulation fast",
        "--formulation fast is not literal or headroom");
  usage("plan --graph " + file + " --memory-model checkmate", "plan --graph needs --budget SIZE");
}

}  // namespace
}  // namespace headroom
