// Estimate speed: a training-step estimate end to end (graph, program, simulation), and how the
// time grows with the number of ops (mlp of N layers).
#include <benchmark/benchmark.h>

#include "estimate/estimate.h"

namespace headroom {
namespace {

void run(benchmark::State& state, const std::string& model, int64_t batch) {
  EstimateOptions o;
  o.model = model;
  o.batch = batch;
  o.mode = RunMode::Training;
  o.optimizer = OptimizerKind::Adam;
  for (auto _ : state) {
    Result<Estimate> r = estimate(o);
    benchmark::DoNotOptimize(r);
  }
}

void BM_TrainResnet50(benchmark::State& s) { run(s, "resnet50", 32); }
BENCHMARK(BM_TrainResnet50)->Unit(benchmark::kMillisecond);

void BM_TrainMlpLayers(benchmark::State& s) { run(s, "mlp:layers=" + std::to_string(s.range(0)) + ",dim=256", 8); s.SetComplexityN(s.range(0)); }
BENCHMARK(BM_TrainMlpLayers)->RangeMultiplier(4)->Range(16, 4096)->Complexity()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

void BM_TrainLlama2_70B(benchmark::State& s) { run(s, "llama-2-70b", 1); }
BENCHMARK(BM_TrainLlama2_70B)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace headroom
