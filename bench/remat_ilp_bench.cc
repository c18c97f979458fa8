// The rematerialization integer program (remat_ilp.h) on ResNet-like graphs (bench/remat_graphs.h)
// at 500 slots and CBC's default 10 s limit, with the chain DP on the same stages (skip edges
// dropped) as the baseline of the same run. Arguments: stages, budget in percent of M_all.
// Counters: status (0 optimal, 1 time limit with a schedule, 2 infeasible, 3 no schedule), the
// makespan, CBC's bound and the gap, against the no-checkpoint makespan.
#include <benchmark/benchmark.h>

#include "plan/chain_dp.h"
#include "plan/chain_simulate.h"
#include "plan/remat_plan.h"
#include "plan/remat_simulate.h"
#include "remat_graphs.h"

namespace headroom {
namespace {

void BM_RematIlp(benchmark::State& state) {
  const RematGraph g = bench::resnet_like(static_cast<int>(state.range(0)), 7);
  const int64_t budget = remat_store_all_peak(g) * state.range(1) / 100;
  RematIlpOptions o;
  o.persistent = state.range(2) != 0;
  RematPlan plan;
  for (auto _ : state) {
    Result<RematPlan> r = solve_remat(g, budget, 500, o);
    plan = r.value();
    benchmark::DoNotOptimize(plan);
  }
  state.counters["status"] = static_cast<double>(plan.status);
  state.counters["makespan_ms"] = plan.makespan_ms;
  state.counters["bound_ms"] = plan.bound_ms;
  state.counters["gap_pct"] = plan.gap_pct;
  state.counters["nockpt_ms"] = plan.no_checkpoint_makespan_ms;
  state.counters["vars"] = plan.variables;
  state.counters["start_ms"] = plan.start_ms;
  state.counters["solve_s"] = plan.solve_seconds;
}
BENCHMARK(BM_RematIlp)
    ->Args({10, 50, 0})
    ->Args({10, 50, 1})
    ->Args({20, 50, 0})
    ->Args({65, 50, 0})
    ->Args({65, 70, 0})
    ->Args({65, 50, 1})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

void BM_RematBaselineChainDp(benchmark::State& state) {
  const RematGraph g = bench::resnet_like(static_cast<int>(state.range(0)), 7, false);
  const int64_t budget = store_all_peak(g.sizes) * state.range(1) / 100;
  double makespan = 0;
  for (auto _ : state) {
    Result<ChainPlan> r = solve_chain(g.sizes, budget, 500);
    makespan = r.value().makespan_ms;
    benchmark::DoNotOptimize(r);
  }
  state.counters["makespan_ms"] = makespan;
}
BENCHMARK(BM_RematBaselineChainDp)->Args({65, 50})->Args({65, 70})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace headroom
