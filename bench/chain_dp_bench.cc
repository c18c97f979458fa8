// Chain checkpointing solver speed: a random 400-stage chain at 500 slots (target < 0.5 s for
// solve_chain: discretization, the table, reconstruction and both re-simulations), at budgets from
// 10% to 90% of storing everything. The argument is the budget in percent of M_all.
// Then the table alone (solve_chain_dp) on one thread: at 400 stages x 500 slots, and over
// 100-1,000 stages at 500 slots and a 50% budget (the growth in stages).
#include <benchmark/benchmark.h>

#include <random>

#include "plan/chain_dp.h"
#include "plan/chain_simulate.h"

namespace headroom {
namespace {

// Transformer-like block sizes with noise: activations 8-64 MiB, saved state 1-4x the output,
// transients up to one activation; times 0.5-5 ms forward, 1-2x that backward.
Chain random_chain(int stages, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> act(8 << 20, 64 << 20);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  Chain c;
  for (int i = 0; i <= stages; ++i) c.x_bytes.push_back(act(rng));
  for (int i = 0; i < stages; ++i) {
    const double f = 0.5 + 4.5 * unit(rng);
    c.fwd_ms.push_back(f);
    c.bwd_ms.push_back(f * (1.0 + unit(rng)));
    const int64_t out = c.x_bytes[static_cast<size_t>(i) + 1];
    c.xbar_bytes.push_back(out + static_cast<int64_t>(3.0 * unit(rng) * static_cast<double>(out)));
    c.fwd_tmp_bytes.push_back(static_cast<int64_t>(unit(rng) * static_cast<double>(out)));
    c.bwd_tmp_bytes.push_back(static_cast<int64_t>(unit(rng) * static_cast<double>(out)));
  }
  c.loss_ms = 1.0;
  c.loss_tmp_bytes = 16 << 20;
  return c;
}

void BM_SolveChain400x500(benchmark::State& state) {
  const Chain c = random_chain(400, 42);
  const int64_t budget = store_all_peak(c) * state.range(0) / 100;
  bool feasible = false;
  double makespan = 0;
  for (auto _ : state) {
    Result<ChainPlan> r = solve_chain(c, budget, 500);
    feasible = r.ok() && r.value().feasible;
    makespan = feasible ? r.value().makespan_ms : 0;
    benchmark::DoNotOptimize(r);
  }
  state.counters["feasible"] = feasible ? 1 : 0;
  state.counters["overhead_pct"] =
      feasible ? 100.0 * (makespan / no_checkpoint_makespan_ms(c) - 1.0) : 0;
}
BENCHMARK(BM_SolveChain400x500)->Arg(10)->Arg(25)->Arg(50)->Arg(90)->Unit(benchmark::kMillisecond);

// The slot chain and memory solve_chain would give the table at `percent` of M_all.
struct SlotProblem {
  Chain chain;
  int memory = 500;
};
SlotProblem slot_problem(int stages, int64_t percent) {
  const Chain c = random_chain(stages, 42);
  const int64_t budget = store_all_peak(c) * percent / 100;
  return {discretize_chain(c, budget / 500), 500};
}

void BM_ChainTableOneThread(benchmark::State& state) {
  const SlotProblem p = slot_problem(static_cast<int>(state.range(0)), state.range(1));
  double makespan = 0;
  for (auto _ : state) {
    const ChainDpResult r = solve_chain_dp(p.chain, p.memory, 1);
    makespan = r.makespan_ms;
    benchmark::DoNotOptimize(r);
  }
  state.counters["makespan_ms"] = makespan;
}
BENCHMARK(BM_ChainTableOneThread)
    ->Args({400, 10})->Args({400, 25})->Args({400, 50})->Args({400, 90})
    ->Args({100, 50})->Args({200, 50})->Args({300, 50})->Args({500, 50})->Args({700, 50})->Args({1000, 50})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace headroom
