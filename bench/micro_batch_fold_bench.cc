// Gradient accumulation folded (schedule/micro_batch_fold.h): the program of a training step of
// k micro-batches built by build_program (four interpreted, the rest written out) against the
// interpreter run over all k, in the same run. gpt2 with 12 blocks, one sequence of 256 per
// micro-batch, Adam, k = 8, 32 and 64.
#include <benchmark/benchmark.h>

#include "estimate/estimate.h"
#include "schedule/build_program.h"
#include "schedule/interpreter.h"

namespace headroom {
namespace {

struct FoldWorkload {
  Graph graph;
  ScheduleOptions schedule;
};

FoldWorkload fold_workload(int micro_batches) {
  EstimateOptions o;
  o.model = "gpt2";
  o.batch = micro_batches;
  o.seq = 256;
  o.mode = RunMode::Training;
  o.optimizer = OptimizerKind::Adam;
  FoldWorkload w{build_graph(o, 1), schedule_options(o)};
  w.schedule.micro_batches = micro_batches;
  return w;
}

void BM_AccumulationFolded(benchmark::State& state) {
  const FoldWorkload w = fold_workload(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    Program p = build_program(w.graph, w.schedule);
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_AccumulationFolded)->Arg(8)->Arg(32)->Arg(64)->Unit(benchmark::kMillisecond);

void BM_AccumulationInterpreted(benchmark::State& state) {
  const FoldWorkload w = fold_workload(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    Program p = schedule_detail::Interpreter(w.graph, w.schedule).run();
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_AccumulationInterpreted)->Arg(8)->Arg(32)->Arg(64)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace headroom
