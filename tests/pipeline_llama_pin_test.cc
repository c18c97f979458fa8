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
//
// The CUDA profile's mean keeps only sizes (PyTorch 2.x, DeviceProfile::mean_keeps_input,
// measured on the H100): each LlamaRMSNorm's float32 pow(2) [1, 2048, 4096] (33,554,432 bytes)
// is no longer kept for the backward. With it kept the activations were 16 x 32 MiB = 512 MiB
// more per micro-batch in flight on a stage of 8 layers (2 norms each), 32 MiB more for the
// final norm on the last stage: 1F1B +2 GiB on stage 0 (4 in flight), GPipe +4 GiB + 8 x 32 MiB
// on stage 3, interleaved +11 x 4 layers x 2 x 32 MiB on rank 0.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "estimate/estimate.h"
#include "frontends/hf/hf_frontend.h"
#include "llama_stages_options.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

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
  // Simulated; docs: 27.84 / 23.82 / 20.96 / 20.09 GiB. Stage 0 holds min(P, m) = 4 micro-batches
  // in flight, stages 1-3 hold 3, 2 and 1 (the last also the logits and the loss).
  EXPECT_EQ(g.stage_peak_bytes, (std::vector<int64_t>{29'889'020'160, 25'573'982'464, 22'502'572'288, 21'574'133'000}));
  EXPECT_EQ(g.stage, 0);
  EXPECT_EQ(g.in_flight_micro_batches, 4);
  EXPECT_EQ(g.peak_bytes, 29'889'020'160);
  EXPECT_EQ(g.model_states_bytes, 10 * kStageZeroParameters + kRotaryBytes);  // 17,501,389,056 = 16.30 GiB
  EXPECT_EQ(g.activations_bytes, 12'370'575'360);                            // simulated
}

TEST(PipelineLlamaPin, GPipeStagePeaks) {
  const PerGpu g = llama_pipeline(PipelineScheduleKind::GPipe);
  // Simulated; docs: 36.37 / 35.31 / 35.31 / 39.86 GiB: every stage keeps all 8 micro-batches,
  // the last stage their logits too (the peak at the loss's log_softmax backward).
  EXPECT_EQ(g.stage_peak_bytes, (std::vector<int64_t>{39'052'919'040, 37'916'246'272, 37'916'246'272, 42'795'153'728}));
  EXPECT_EQ(g.stage, 3);
  EXPECT_EQ(g.in_flight_micro_batches, 8);
  EXPECT_EQ(g.model_states_bytes, 10 * kLastStageParameters + kRotaryBytes);  // 17,501,430,016
  EXPECT_EQ(g.activations_bytes, 28'776'953'920);                            // simulated
  // Stages 1 and 2 run the same graph (8 identical layers between a receive and a send) with the
  // same micro-batches in flight: the same program, the same peak.
  EXPECT_EQ(g.stage_peak_bytes[1], g.stage_peak_bytes[2]);
}

TEST(PipelineLlamaPin, InterleavedStagePeaks) {
  const PerGpu g = llama_pipeline(PipelineScheduleKind::Interleaved, 2);
  // Simulated; docs: 32.17 / 28.18 / 25.31 / 24.42 GiB. Rank 0 runs (P - 1) 2 + (v - 1) P = 10
  // warm-up forwards: 11 chunk-micro-batches of 4 layers in flight.
  EXPECT_EQ(g.stage_peak_bytes, (std::vector<int64_t>{34'543'845'632, 30'261'313'792, 27'172'077'824, 26'225'812'744}));
  EXPECT_EQ(g.stage, 0);
  EXPECT_EQ(g.in_flight_micro_batches, 11);
  EXPECT_EQ(g.model_states_bytes, 10 * kStageZeroParameters + kRotaryBytes);
  EXPECT_EQ(g.activations_bytes, 17'025'400'832);  // simulated
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
