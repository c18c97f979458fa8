// Planner speed: `headroom plan MODEL --gpu A100-SXM4-40GB --activation-budget 30%` end to end
// (every strategy, each candidate re-simulated on the caching allocator, the numerics options),
// against the baseline of one `estimate --gpu` of the same run measured in the same process.
// Target (issue #6): resnet50 under 1 s.
#include <benchmark/benchmark.h>

#include "estimate/estimate.h"
#include "plan/planner.h"

namespace headroom {
namespace {

EstimateOptions run_of(const std::string& model, int64_t batch, std::optional<int64_t> seq) {
  EstimateOptions o;
  o.model = model;
  o.batch = batch;
  o.seq = seq;
  o.gpu = GpuOptions{};
  o.gpu->gpu = "A100-SXM4-40GB";
  return o;
}

void plan_once(benchmark::State& state, const EstimateOptions& o) {
  int evaluations = 0;
  for (auto _ : state) {
    PlanRequest req;
    req.run = o;
    req.activation_fraction = 0.3;
    Result<Plan> p = make_plan(req);
    if (!p.ok()) state.SkipWithError(p.error().c_str());
    else evaluations = p.value().evaluations;
    benchmark::DoNotOptimize(p);
  }
  state.counters["simulations"] = evaluations;
}

void estimate_once(benchmark::State& state, const EstimateOptions& o) {
  for (auto _ : state) {
    Result<Estimate> e = estimate(o);
    benchmark::DoNotOptimize(e);
  }
}

void BM_EstimateGpuResnet50(benchmark::State& s) { estimate_once(s, run_of("resnet50", 128, std::nullopt)); }
BENCHMARK(BM_EstimateGpuResnet50)->Unit(benchmark::kMillisecond);
void BM_PlanResnet50(benchmark::State& s) { plan_once(s, run_of("resnet50", 128, std::nullopt)); }
BENCHMARK(BM_PlanResnet50)->Unit(benchmark::kMillisecond);
void BM_PlanBertLarge(benchmark::State& s) { plan_once(s, run_of("bert-large", 16, 512)); }
BENCHMARK(BM_PlanBertLarge)->Unit(benchmark::kMillisecond);
void BM_PlanGpt2(benchmark::State& s) { plan_once(s, run_of("gpt2", 8, 1024)); }
BENCHMARK(BM_PlanGpt2)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace headroom
