// fit speed: `headroom fit resnet50 --gpu a100-40gb` (target < 100 ms) and the all-GPU table,
// `fit resnet50 --gpu all`, two ways in the same run: fit() once per GPU (the path before
// fit_all: a whole batch sweep per GPU) and fit_all (one sweep shared by the GPUs; target: 10x
// faster, same report).
#include <benchmark/benchmark.h>

#include "estimate/fit_all.h"
#include "sim/device_catalog.h"

namespace headroom {
namespace {

GpuOptions gpu_named(const std::string& name) {
  GpuOptions g;
  g.gpu = name;
  g.margin = 0.05;
  return g;
}

FitOptions resnet50_on(const std::string& gpu) {
  FitOptions f;
  f.estimate.model = "resnet50";
  f.estimate.gpu = gpu_named(gpu);
  return f;
}

void BM_FitResnet50A100(benchmark::State& state) {
  FitOptions f = resnet50_on("a100-40gb");
  for (auto _ : state) benchmark::DoNotOptimize(fit(f));
}
BENCHMARK(BM_FitResnet50A100)->Unit(benchmark::kMillisecond);

void BM_FitResnet50AllGpusOneByOne(benchmark::State& state) {
  for (auto _ : state) {
    for (const GpuSpec& g : DeviceCatalog::builtin().gpus()) benchmark::DoNotOptimize(fit(resnet50_on(g.name)));
  }
}
BENCHMARK(BM_FitResnet50AllGpusOneByOne)->Unit(benchmark::kMillisecond);

void BM_FitResnet50AllGpusShared(benchmark::State& state) {
  FitOptions f;
  f.estimate.model = "resnet50";
  std::vector<GpuOptions> gpus;
  for (const GpuSpec& g : DeviceCatalog::builtin().gpus()) gpus.push_back(gpu_named(g.name));
  for (auto _ : state) benchmark::DoNotOptimize(fit_all(f, gpus));
}
BENCHMARK(BM_FitResnet50AllGpusShared)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace headroom
