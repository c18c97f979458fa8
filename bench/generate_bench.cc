// Generation estimates: Llama-3.1-70B (data/hf-configs) generating 4096 tokens after a
// 512-token prompt, bf16, sdpa. The decode forwards between the first and the last are not
// simulated (estimate.cc: they run the same program on a shorter cache), so the cost is that of
// three forwards, independent of the number of new tokens. Target: under 100 ms.
#include <benchmark/benchmark.h>

#include "estimate/estimate.h"
#include "frontends/model_source.h"

namespace headroom {
namespace {

void BM_GenerateLlama31_70B(benchmark::State& state) {
  EstimateOptions o;
  o.model = std::string(HEADROOM_SOURCE_DIR) + "/data/hf-configs/llama-3.1-70b.json";
  o.mode = RunMode::Inference;
  o.generation = GenerationOptions{512, state.range(0)};
  select_frontend(o, {});
  for (auto _ : state) {
    Result<Estimate> r = estimate(o);
    if (!r.ok()) state.SkipWithError(r.error().c_str());
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_GenerateLlama31_70B)->Arg(16)->Arg(4096)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace headroom
