// Layout search speed: `headroom plan data/hf-configs/llama-3.1-70b.json --gpus N --gpu H100-SXM`
// end to end (the six data-parallel engines, tensor-parallel 2, 4, 8 with DDP and ZeRO-1, and
// the pipelines P x T x ZeRO-1, each rank's program built and re-simulated at every micro-batch
// tried; a pipeline's stages 0, 1 and P - 1) for N = 8, 16, 32, 64,
// one sequence of 128 tokens per GPU, on one thread (/1), two (/2) and the default (/0: one per
// hardware thread).
// Target (issue #20): under 2 s each (wall time).
#include <benchmark/benchmark.h>

#include <string>

#include "estimate/estimate.h"
#include "frontends/model_source.h"
#include "plan/layout_search.h"

namespace headroom {
namespace {

void BM_LayoutSearch70B(benchmark::State& state) {
  EstimateOptions o;
  o.model = std::string(HEADROOM_SOURCE_DIR) + "/data/hf-configs/llama-3.1-70b.json";
  o.mode = RunMode::Training;
  o.optimizer = OptimizerKind::Adam;
  o.gpu = GpuOptions{};
  o.gpu->gpu = "H100-SXM";
  o.gpu->margin = 0;
  select_frontend(o, {});
  int evaluations = 0;
  int64_t ranked = 0;
  for (auto _ : state) {
    LayoutRequest req;
    req.run = o;
    req.gpus = state.range(0);
    req.threads = static_cast<int>(state.range(1));  // 1: sequential, 0: one thread per hardware thread
    Result<LayoutPlan> p = search_layouts(req);
    if (!p.ok()) {
      state.SkipWithError(p.error().c_str());
      break;
    }
    evaluations = p.value().evaluations;
    ranked = static_cast<int64_t>(p.value().ranked.size());
    benchmark::DoNotOptimize(p);
  }
  state.counters["simulations"] = evaluations;
  state.counters["ranked"] = static_cast<double>(ranked);
}
BENCHMARK(BM_LayoutSearch70B)
    ->ArgsProduct({{8, 16, 32, 64}, {1, 2, 0}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

}  // namespace
}  // namespace headroom
