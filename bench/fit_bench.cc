// fit speed: `headroom fit resnet50 --gpu a100-40gb` (target < 100 ms) and the all-GPU table
// (target < 1 s), each against one training estimate of resnet50 at batch 32 in the same run.
#include <benchmark/benchmark.h>

#include "estimate/fit.h"
#include "sim/device_catalog.h"

namespace headroom {
namespace {

FitOptions resnet50_on(const std::string& gpu) {
  FitOptions f;
  f.estimate.model = "resnet50";
  GpuOptions g;
  g.gpu = gpu;
  g.margin = 0.05;
  f.estimate.gpu = g;
  return f;
}

void BM_FitResnet50A100(benchmark::State& state) {
  FitOptions f = resnet50_on("a100-40gb");
  for (auto _ : state) benchmark::DoNotOptimize(fit(f));
}
BENCHMARK(BM_FitResnet50A100)->Unit(benchmark::kMillisecond);

void BM_FitResnet50AllGpus(benchmark::State& state) {
  for (auto _ : state) {
    for (const GpuSpec& g : DeviceCatalog::builtin().gpus()) benchmark::DoNotOptimize(fit(resnet50_on(g.name)));
  }
}
BENCHMARK(BM_FitResnet50AllGpus)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace headroom
