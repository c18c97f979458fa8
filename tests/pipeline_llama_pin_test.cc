// Regression pins of the Llama-2-7B pipeline table in docs/distributed.md ("Pipeline
// parallelism"): data/hf-configs/llama-2-7b.json, seq 2048, bf16, 8 GPUs, P = 4 with ZeRO-1 over
// the 2 data-parallel ranks, micro-batch 1, m = 8 (--micro-batch 1 --grad-accum 8).
//
// The peaks are SIMULATED (every stage's rank program replayed on the allocator model; no engine
// measurement exists here): a change in any of them means the simulation changed, and the docs'
// table must be regenerated with it. What arithmetic gives is checked as such: the model states
// of a stage are its parameters Psi_stage in bf16 (2 Psi), their bf16 gradients (2 Psi), and
// ZeRO-1's fp32 master copy and Adam moments partitioned over d = 2 ranks (12 Psi / 2), 10 Psi in
// all, plus Llama's rotary inv_freq buffer (64 fp32 = 256 bytes). Psi: 8 layers of 202,383,360
// parameters, plus the embedding (131,072,000) on stage 0, the final norm (4,096) and lm_head
// (131,072,000) on stage 3 (tests/pipeline_parallel_test.cc derives them).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "estimate/estimate.h"
#include "frontends/hf/hf_frontend.h"
#include "llama_stages_options.h"

namespace headroom {
namespace {

PerGpu llama_pipeline(PipelineScheduleKind kind, std::optional<int64_t> virtual_stages = std::nullopt) {
  EstimateOptions o = testing::llama2_7b_four_stages();
  o.parallel.zero_stage = 1;
  o.parallel.pipeline_schedule = kind;
  o.parallel.virtual_stages = virtual_stages;
  Result<Estimate> r = estimate(o);
  EXPECT_TRUE(r.ok()) << r.error();
  return r.ok() ? *r.value().per_gpu : PerGpu{};
}

constexpr int64_t kStageZeroParameters = 8 * 202'383'360LL + 131'072'000;         // 1,750,138,880
constexpr int64_t kLastStageParameters = 8 * 202'383'360LL + 4'096 + 131'072'000;  // 1,750,142,976
constexpr int64_t kRotaryBytes = 64 * 4;

TEST(PipelineLlamaPin, OneFOneBStagePeaks) {
  const PerGpu g = llama_pipeline(PipelineScheduleKind::OneFOneB);
  // Simulated; docs: 29.84 / 25.32 / 21.96 / 20.62 GiB. Stage 0 holds min(P, m) = 4 micro-batches
  // in flight, stages 1-3 hold 3, 2 and 1 (the last also the logits and the loss).
  EXPECT_EQ(g.stage_peak_bytes, (std::vector<int64_t>{32'036'503'808, 27'184'595'200, 23'576'314'112, 22'144'558'344}));
  EXPECT_EQ(g.stage, 0);
  EXPECT_EQ(g.in_flight_micro_batches, 4);
  EXPECT_EQ(g.peak_bytes, 32'036'503'808);
  EXPECT_EQ(g.model_states_bytes, 10 * kStageZeroParameters + kRotaryBytes);  // 17,501,389,056 = 16.30 GiB
  EXPECT_EQ(g.activations_bytes, 14'518'059'008);                            // simulated
}

TEST(PipelineLlamaPin, GPipeStagePeaks) {
  const PerGpu g = llama_pipeline(PipelineScheduleKind::GPipe);
  // Simulated; docs: 40.00 / 39.15 / 39.15 / 44.11 GiB: every stage keeps all 8 micro-batches,
  // the last stage their logits too (the peak at the loss's log_softmax backward).
  EXPECT_EQ(g.stage_peak_bytes, (std::vector<int64_t>{42'947'330'304, 42'032'955'648, 42'032'955'648, 47'358'556'480}));
  EXPECT_EQ(g.stage, 3);
  EXPECT_EQ(g.in_flight_micro_batches, 8);
  EXPECT_EQ(g.model_states_bytes, 10 * kLastStageParameters + kRotaryBytes);  // 17,501,430,016
  EXPECT_EQ(g.activations_bytes, 33'340'356'672);                            // simulated
  // Stages 1 and 2 run the same graph (8 identical layers between a receive and a send) with the
  // same micro-batches in flight: the same program, the same peak.
  EXPECT_EQ(g.stage_peak_bytes[1], g.stage_peak_bytes[2]);
}

TEST(PipelineLlamaPin, InterleavedStagePeaks) {
  const PerGpu g = llama_pipeline(PipelineScheduleKind::Interleaved, 2);
  // Simulated; docs: 34.92 / 30.43 / 27.06 / 25.71 GiB. Rank 0 runs (P - 1) 2 + (v - 1) P = 10
  // warm-up forwards: 11 chunk-micro-batches of 4 layers in flight.
  EXPECT_EQ(g.stage_peak_bytes, (std::vector<int64_t>{37'496'635'648, 32'677'232'896, 29'051'126'016, 27'601'544'456}));
  EXPECT_EQ(g.stage, 0);
  EXPECT_EQ(g.in_flight_micro_batches, 11);
  EXPECT_EQ(g.model_states_bytes, 10 * kStageZeroParameters + kRotaryBytes);
  EXPECT_EQ(g.activations_bytes, 19'978'190'848);  // simulated
}

}  // namespace
}  // namespace headroom
