// fit speed: `headroom fit resnet50 --gpu a100-40gb` (target < 100 ms) and the all-GPU table,
// `fit MODEL --gpu all`, two ways in the same run: fit() once per GPU (the path before fit_all:
// a whole batch sweep per GPU) and fit_all (one sweep shared by the GPUs; target: 10x faster,
// same report). Three workloads: resnet50 training, gpt2 training (a transformer) and Llama-2-7B
// inference from its Hugging Face config (data/hf-configs). The resnet50 names are the ones an
// older build of this file has, so a baseline binary can run them in the same script.
#include <benchmark/benchmark.h>

#include "estimate/fit_all.h"
#include "frontends/model_source.h"
#include "sim/device_catalog.h"

namespace headroom {
namespace {

GpuOptions gpu_named(const std::string& name) {
  GpuOptions g;
  g.gpu = name;
  g.margin = 0.05;
  return g;
}

FitOptions resnet50() {
  FitOptions f;
  f.estimate.model = "resnet50";
  return f;
}

FitOptions gpt2() {
  FitOptions f;
  f.estimate.model = "gpt2";
  return f;
}

FitOptions llama2_7b_infer() {
  FitOptions f;
  f.estimate.model = std::string(HEADROOM_SOURCE_DIR) + "/data/hf-configs/llama-2-7b.json";
  select_frontend(f.estimate, {});
  f.estimate.mode = RunMode::Inference;
  return f;
}

std::vector<GpuOptions> catalog() {
  std::vector<GpuOptions> gpus;
  for (const GpuSpec& g : DeviceCatalog::builtin().gpus()) gpus.push_back(gpu_named(g.name));
  return gpus;
}

// Counters: `estimates`, the whole estimates (graph, program, exact peak, replay) the loop runs,
// one per evaluation of each GPU's search; fit_all's programs built, exact peaks and replays.
void one_by_one(benchmark::State& state, const FitOptions& base) {
  std::vector<GpuOptions> gpus = catalog();
  int estimates = 0;
  for (auto _ : state) {
    estimates = 0;
    for (const GpuOptions& g : gpus) {
      FitOptions f = base;
      f.estimate.gpu = g;
      Result<FitResult> r = fit(f);
      if (r.ok()) estimates += r.value().evaluations;
      benchmark::DoNotOptimize(r);
    }
  }
  state.counters["estimates"] = estimates;
}

void shared(benchmark::State& state, const FitOptions& base) {
  std::vector<GpuOptions> gpus = catalog();
  FitAllWork work;
  for (auto _ : state) benchmark::DoNotOptimize(fit_all(base, gpus, {}, &work));
  state.counters["programs"] = work.programs;
  state.counters["resized"] = work.resized;
  state.counters["shared"] = work.shared;
  state.counters["exact_peaks"] = work.exact_peaks;
  state.counters["replays"] = work.replays;
}

void BM_FitResnet50A100(benchmark::State& state) {
  FitOptions f = resnet50();
  f.estimate.gpu = gpu_named("a100-40gb");
  for (auto _ : state) benchmark::DoNotOptimize(fit(f));
}
BENCHMARK(BM_FitResnet50A100)->Unit(benchmark::kMillisecond);

void BM_FitResnet50AllGpusOneByOne(benchmark::State& state) { one_by_one(state, resnet50()); }
BENCHMARK(BM_FitResnet50AllGpusOneByOne)->Unit(benchmark::kMillisecond);

void BM_FitResnet50AllGpusShared(benchmark::State& state) { shared(state, resnet50()); }
BENCHMARK(BM_FitResnet50AllGpusShared)->Unit(benchmark::kMillisecond);

void BM_FitGpt2AllGpusOneByOne(benchmark::State& state) { one_by_one(state, gpt2()); }
BENCHMARK(BM_FitGpt2AllGpusOneByOne)->Unit(benchmark::kMillisecond);

void BM_FitGpt2AllGpusShared(benchmark::State& state) { shared(state, gpt2()); }
BENCHMARK(BM_FitGpt2AllGpusShared)->Unit(benchmark::kMillisecond);

void BM_FitLlama2_7bInferAllGpusOneByOne(benchmark::State& state) { one_by_one(state, llama2_7b_infer()); }
BENCHMARK(BM_FitLlama2_7bInferAllGpusOneByOne)->Unit(benchmark::kMillisecond);

void BM_FitLlama2_7bInferAllGpusShared(benchmark::State& state) { shared(state, llama2_7b_infer()); }
BENCHMARK(BM_FitLlama2_7bInferAllGpusShared)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace headroom
