// Checkmate's MILP on Checkmate-form training graphs (bench/checkmate_graphs.h), the literal
// formulation (Checkmate's build_model, transcribed) against headroom's (checkmate_ilp.h), on the
// same CBC with the same parameters and one thread, side by side in one run. Arguments: shape
// (0 linear, 1 ResNet-like, 2 U-Net-like), forward nodes n (T = 2n + 1), budget (percent of the
// way from the least possible peak to the store-all peak), formulation (0 literal, 1 headroom).
// Counters: status (0 optimal, 1 time limit with a schedule, 2 infeasible, 3 none), the cost, the
// bound, the greedy start's cost and that of the start handed to CBC (0 for the literal
// formulation, which has none), the program's size. The time limit is 100 s, or
// HEADROOM_CHECKMATE_BENCH_LIMIT_S seconds when that is set (the long literal runs of docs/ilp.md
// §9); a row that reaches it is not a proven optimum, and docs/ilp.md quotes it as a lower bound
// on the time, never as a solve time.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>

#include "checkmate_graphs.h"
#include "plan/checkmate_plan.h"

namespace headroom {
namespace {

double bench_time_limit_s() {
  const char* env = std::getenv("HEADROOM_CHECKMATE_BENCH_LIMIT_S");
  if (env == nullptr || *env == '\0') return 100;
  const double s = std::stod(env);
  return s > 0 ? s : 100;
}

void BM_CheckmateIlp(benchmark::State& state) {
  const auto shape = static_cast<bench::CheckmateShape>(state.range(0));
  const CheckmateGraph g = bench::checkmate_training_graph(shape, static_cast<int>(state.range(1)), 11);
  const int64_t budget = bench::checkmate_budget_between(g, state.range(2));
  CheckmateIlpOptions o;
  o.formulation = state.range(3) == 0 ? CheckmateFormulation::Literal : CheckmateFormulation::Headroom;
  o.time_limit_s = bench_time_limit_s();
  CheckmatePlan plan;
  for (auto _ : state) {
    Result<CheckmatePlan> r = solve_checkmate(g, budget, o);
    plan = r.value();
    benchmark::DoNotOptimize(plan);
  }
  state.counters["T"] = g.T;
  state.counters["status"] = static_cast<double>(plan.status);
  state.counters["cost"] = static_cast<double>(plan.cost);
  state.counters["bound"] = plan.bound;
  state.counters["no_recompute"] = static_cast<double>(plan.no_recompute_cost);
  state.counters["greedy"] = static_cast<double>(plan.greedy_cost);
  state.counters["start"] = static_cast<double>(plan.start_cost);
  state.counters["vars"] = plan.variables;
  state.counters["rows"] = plan.constraints;
  state.counters["solve_s"] = plan.solve_seconds;
}

void CheckmateCases(benchmark::internal::Benchmark* b) {
  // T = 11, 21, 41, 65 (n = 5, 10, 20, 32); budgets 30% and 60% of the way to store-all.
  for (int shape : {0, 1, 2})
    for (int n : {5, 10, 20, 32})
      for (int pct : {30, 60})
        for (int formulation : {0, 1}) b->Args({shape, n, pct, formulation});
}
BENCHMARK(BM_CheckmateIlp)->Apply(CheckmateCases)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace headroom
