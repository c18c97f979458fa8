// Pipeline parallelism (--pipeline-parallel P): the stage graphs (schedule/pipeline_split.h), the
// schedules' orders (schedule/pipeline_schedule.h) and the simulated stage programs
// (schedule/interpreter_pipeline.cc, estimate/pipeline_estimate.h), pinned by byte arithmetic.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "cli_runner.h"
#include "pipeline_stage_live.h"

#include "estimate/estimate.h"
#include "estimate/pipeline_estimate.h"
#include "frontends/hf/hf_frontend.h"
#include "schedule/pipeline_schedule.h"
#include "schedule/pipeline_split.h"
#include "schedule/transformer_blocks.h"
#include "sim/simulate.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

std::string order_text(const std::vector<PipelineAction>& order) {
  std::string s;
  for (const PipelineAction& a : order) s += (s.empty() ? "" : " ") + std::string(a.forward ? "F" : "B") + std::to_string(a.micro);
  return s;
}

TEST(PipelineSchedule, OneFOneBWarmsUpPMinusIMinusOneForwards) {
  // Megatron's forward_backward_pipelining_without_interleaving, P = 4, m = 8: stage 0 runs
  // 3 warm-up forwards, stage 3 none.
  EXPECT_EQ(order_text(pipeline_order(PipelineScheduleKind::OneFOneB, 4, 0, 8)), "F1 F2 F3 F4 B1 F5 B2 F6 B3 F7 B4 F8 B5 B6 B7 B8");
  EXPECT_EQ(order_text(pipeline_order(PipelineScheduleKind::OneFOneB, 4, 3, 8)), "F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7 F8 B8");
  for (int stage = 0; stage < 4; ++stage) {
    EXPECT_EQ(max_in_flight(pipeline_order(PipelineScheduleKind::OneFOneB, 4, stage, 8)), 4 - stage);  // min(P - i, m)
    EXPECT_EQ(max_in_flight(pipeline_order(PipelineScheduleKind::GPipe, 4, stage, 8)), 8);            // all m
  }
  // Fewer micro-batches than stages: every forward is a warm-up forward on stage 0.
  EXPECT_EQ(order_text(pipeline_order(PipelineScheduleKind::OneFOneB, 4, 0, 2)), "F1 F2 B1 B2");
  EXPECT_EQ(order_text(pipeline_order(PipelineScheduleKind::GPipe, 2, 1, 3)), "F1 F2 F3 B1 B2 B3");
}

Graph model(const std::string& name, int64_t batch, int64_t seq) {
  EstimateOptions o;
  o.model = name;
  if (seq > 0) o.seq = seq;
  o.precision = Precision::Bf16;
  return build_graph(o, batch);
}

// The two tiny decoders the stage tests run: Llama (4 layers, h 256) and GPT-2 (4 layers).
const char* const kTinyDecoders[] = {"llama:layers=4,hidden=256,heads=4,ffn=512,vocab=1000", "gpt2:layers=4"};

// A bf16 training run's schedule options, the stage tests' base.
ScheduleOptions bf16_schedule() {
  EstimateOptions o;
  o.precision = Precision::Bf16;
  return schedule_options(o);
}

TEST(PipelineSplit, LlamaTwoSevenBStagesHoldTheirShareOfTheParameters) {
  // Llama-2-7B (32 layers, h 4096, MLP 11008, vocab 32000) in 4 stages of 8 layers. One layer:
  // q, k, v, o 4 * 4096^2 = 67,108,864 + gate, up, down 3 * 4096 * 11008 = 135,266,304 + two
  // RMSNorm weights 8,192 = 202,383,360; 8 layers 1,619,066,880. Stage 0 adds embed_tokens
  // 32000 * 4096 = 131,072,000; the last stage the final norm 4,096 and lm_head 131,072,000.
  EstimateOptions o;
  o.model = std::string(HEADROOM_SOURCE_DIR) + "/data/hf-configs/llama-2-7b.json";
  o.seq = 128;
  o.precision = Precision::Bf16;
  o.graph_loader = hf_graph_loader(o.model).load;
  Graph g = build_graph(o, 1);
  const int64_t blocks = 1'619'066'880;
  EXPECT_EQ(pipeline_stage_graph(g, 4, 0).graph.parameter_count(), blocks + 131'072'000);
  EXPECT_EQ(pipeline_stage_graph(g, 4, 1).graph.parameter_count(), blocks);
  EXPECT_EQ(pipeline_stage_graph(g, 4, 2).graph.parameter_count(), blocks);
  EXPECT_EQ(pipeline_stage_graph(g, 4, 3).graph.parameter_count(), blocks + 4'096 + 131'072'000);
  // Together: the published 6,738,415,616.
  EXPECT_EQ(g.parameter_count(), 6'738'415'616);
}

TEST(PipelineSplit, LaterStagesReceiveTheHiddenStateAndGpt2sLastStageOwnsItsHead) {
  // GPT-2 (h 768, vocab 50257), 4 layers in 2 stages, batch 2, seq 64, bf16.
  Graph g = model("gpt2:layers=4", 2, 64);
  StageGraph first = pipeline_stage_graph(g, 2, 0), last = pipeline_stage_graph(g, 2, 1);
  EXPECT_EQ(first.received, kNone);
  EXPECT_TRUE(first.sends);
  // What stage 0 sends is [b, s, h] in bf16: 2 * 64 * 768 * 2 = 196,608 bytes.
  EXPECT_EQ(first.graph.tensor(first.graph.loss).bytes(), 196'608);
  ASSERT_NE(last.received, kNone);
  EXPECT_EQ(last.graph.tensor(last.received).bytes(), 196'608);
  EXPECT_FALSE(last.sends);
  EXPECT_EQ(last.graph.tensor(last.graph.loss).numel(), 1);
  // GPT-2 ties lm_head to wte; the last stage holds its own copy (Megatron's output layer on the
  // last stage): the stages together hold the model's parameters plus 50257 * 768 = 38,597,376.
  EXPECT_EQ(first.graph.parameter_count() + last.graph.parameter_count(), g.parameter_count() + 38'597'376);
}

TEST(PipelineSplit, UnevenOrTooManyStagesAreRefusedAsMegatronDoes) {
  Graph g = model("gpt2:layers=4", 1, 64);
  EXPECT_THROW(pipeline_stage_graph(g, 3, 0), InputError);  // 4 % 3 != 0
  EXPECT_THROW(pipeline_stage_graph(g, 8, 0), InputError);  // more stages than layers
  EXPECT_THROW(pipeline_stage_graph(model("mlp:layers=4,dim=64", 1, 0), 2, 0), InputError);  // no PREFIX.<i> blocks
}

using testing::LiveAtFirstBackward;
using testing::live_at_first_backward;

TEST(PipelineStageProgram, OneFOneBStageOneHoldsThreeMicroBatchesOfItsLayer) {
  // GPT-2, 4 layers in 4 stages (one layer each), batch 1, seq 128, bf16, 1F1B with m = 8:
  // stage 1 has min(P - 1, m) = 3 micro-batches in flight at its first backward. Each holds what
  // one GPT-2 layer keeps for its backward (tests/megatron_activations_test.cc:
  // 58 sbh + 5 a s^2 b + 16 sb + 2 bytes with s = 128, b = 1, h = 768, a = 12:
  // 5,701,632 + 983,040 + 2,048 + 2 = 6,686,722), of which the layer's input, 2 sbh = 196,608,
  // is the p2p receive buffer (ln_1 saves it) and the layer's output is sent and deallocated.
  Graph g = model("gpt2:layers=4", 1, 128);
  EstimateOptions o;
  o.precision = Precision::Bf16;
  ScheduleOptions so = schedule_options(o);
  PipelineStageRun run = pipeline_stage_program(g, so, PipelineScheduleKind::OneFOneB, 4, 1, 8);
  EXPECT_EQ(run.in_flight_micro_batches, 3);
  LiveAtFirstBackward live = live_at_first_backward(run.program);
  EXPECT_EQ(live.received_buffers, 3);
  EXPECT_EQ(live.received, 3 * 196'608);
  EXPECT_EQ(live.saved + live.received, 3 * 6'686'722);
}

// The layout search's stage graphs come from a RankGraphCache: cut once per (model graph, P, v,
// rank), and a pipeline evaluation through it builds the same stages as one that cuts afresh.
TEST(PipelineStageProgram, ACachedRankGraphIsTheOneCutAfresh) {
  Graph g = model("gpt2:layers=4", 1, 64);
  RankGraphCache cache;
  const std::shared_ptr<const RankGraph> once = cache.get(g, 2, 2, 1);
  EXPECT_EQ(cache.get(g, 2, 2, 1), once);  // the same object, not cut again
  EXPECT_NE(cache.get(g, 2, 2, 0), once);
  const RankGraph fresh = pipeline_rank_graph(g, 2, 2, 1);
  ASSERT_EQ(once->graph.ops.size(), fresh.graph.ops.size());
  for (size_t i = 0; i < fresh.graph.ops.size(); ++i) EXPECT_EQ(once->graph.ops[i].name, fresh.graph.ops[i].name);
  EXPECT_EQ(once->graph.tensors.size(), fresh.graph.tensors.size());
  ASSERT_EQ(once->chunks.size(), 2u);
  const ScheduleOptions so = bf16_schedule();
  ParallelOptions p;
  p.pipeline_parallel = 2;
  p.pipeline_schedule = PipelineScheduleKind::Interleaved;
  p.virtual_stages = 2;
  const PipelineStages cached = simulate_pipeline_stages(g, so, p, 4, true, true, &cache);
  const PipelineStages afresh = simulate_pipeline_stages(g, so, p, 4, true, true);
  EXPECT_EQ(cached.stage_peak_bytes, afresh.stage_peak_bytes);
  EXPECT_EQ(cached.stage, afresh.stage);
  EXPECT_EQ(cached.program.events.size(), afresh.program.events.size());
  EXPECT_EQ(cached.graph.get(), &cache.get(g, 2, 2, cached.stage)->graph);  // the reported stage's graph is the cached one
}

// The layout search picks a pipeline's reported stage by live_peak_bytes, simulate()'s peak
// alone: the two agree on every stage program, plain and checkpointed, and on whole programs.
TEST(PipelineStageProgram, TheLivePeakAloneIsTheSimulatedPeak) {
  for (const char* name : kTinyDecoders) {
    SCOPED_TRACE(name);
    Graph g = model(name, 2, 64);
    for (bool checkpointed : {false, true}) {
      ScheduleOptions so = bf16_schedule();
      if (checkpointed) so.plan.checkpoints = transformer_blocks(g).segments;
      const Program whole = build_program(g, so);
      EXPECT_EQ(live_peak_bytes(whole), simulate(whole).peak.bytes);
      for (int stage = 0; stage < 4; ++stage) {
        const Program p = pipeline_stage_program(g, so, PipelineScheduleKind::OneFOneB, 4, stage, 6).program;
        EXPECT_GT(live_peak_bytes(p), 0);
        EXPECT_EQ(live_peak_bytes(p), simulate(p).peak.bytes) << "stage " << stage << (checkpointed ? ", checkpointed" : "");
      }
    }
  }
}

// The layout search's families share their model graphs, and with them one block cut per graph
// (PipelineCuts): made once, and a cache that takes its cuts from there builds the same stages.
TEST(PipelineStageProgram, ASharedCutIsMadeOnceAndCutsTheSameStages) {
  Graph g = model("gpt2:layers=4", 1, 64);
  PipelineCuts cuts;
  const PipelineCut& once = cuts.get(g);
  EXPECT_EQ(&cuts.get(g), &once);
  const PipelineCut own = pipeline_cut(g);
  EXPECT_EQ(once.grad, own.grad);
  ASSERT_EQ(once.blocks.size(), own.blocks.size());
  for (size_t i = 0; i < own.blocks.size(); ++i) EXPECT_EQ(once.blocks[i], own.blocks[i]);
  RankGraphCache a(&cuts), b(&cuts);
  EXPECT_EQ(&a.cut(g), &once);
  EXPECT_EQ(&b.cut(g), &once);
  const ScheduleOptions so = bf16_schedule();
  ParallelOptions p;
  p.pipeline_parallel = 2;
  const PipelineStages shared = simulate_pipeline_stages(g, so, p, 4, true, true, &a);
  const PipelineStages afresh = simulate_pipeline_stages(g, so, p, 4, true, true);
  EXPECT_EQ(shared.stage_peak_bytes, afresh.stage_peak_bytes);
  EXPECT_EQ(shared.program.events.size(), afresh.program.events.size());
}

TEST(PipelineStageProgram, StageZeroSavesExactlyInFlightTimesOneMicroBatch) {
  // Llama (tiny: 4 layers, h 256) and GPT-2, P = 4, m = 8: stage 0 keeps 4 micro-batches'
  // saved activations under 1F1B and all 8 under GPipe, each exactly what one forward of the
  // stage saves (its m = 1 program); the last stage keeps 1 under 1F1B.
  for (const char* name : kTinyDecoders) {
    SCOPED_TRACE(name);
    Graph g = model(name, 2, 64);
    const ScheduleOptions so = bf16_schedule();
    for (int stage : {0, 3}) {
      const int64_t one = live_at_first_backward(pipeline_stage_program(g, so, PipelineScheduleKind::OneFOneB, 4, stage, 1).program).saved;
      EXPECT_GT(one, 0);
      EXPECT_EQ(live_at_first_backward(pipeline_stage_program(g, so, PipelineScheduleKind::OneFOneB, 4, stage, 8).program).saved,
                (stage == 0 ? 4 : 1) * one);
      EXPECT_EQ(live_at_first_backward(pipeline_stage_program(g, so, PipelineScheduleKind::GPipe, 4, stage, 8).program).saved, 8 * one);
    }
  }
}

EstimateOptions pipeline_options(const std::string& name, int64_t gpus, int64_t p, int64_t micro, int64_t accum) {
  EstimateOptions o;
  o.model = name;
  o.seq = 64;
  o.precision = Precision::Bf16;
  o.batch = micro * accum;
  o.micro_batch = micro;
  o.parallel.gpus = gpus;
  o.parallel.pipeline_parallel = p;
  return o;
}

TEST(PipelineEstimate, ReportsTheStageWithTheHighestPeakAndEveryStagesPeak) {
  // Seq 512, micro-batch 4: the activations, not the optimizer step, set the peaks.
  EstimateOptions o = pipeline_options("gpt2:layers=4", 8, 4, 4, 8);
  o.seq = 512;
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  const PerGpu& g = *r.value().per_gpu;
  EXPECT_EQ(g.pipeline_parallel, 4);
  EXPECT_EQ(g.data_parallel, 2);
  EXPECT_EQ(g.pipeline_schedule, "1f1b");
  ASSERT_EQ(g.stage_peak_bytes.size(), 4u);
  EXPECT_EQ(g.peak_bytes, *std::max_element(g.stage_peak_bytes.begin(), g.stage_peak_bytes.end()));
  EXPECT_EQ(g.peak_bytes, g.stage_peak_bytes[static_cast<size_t>(g.stage)]);
  EXPECT_EQ(g.in_flight_micro_batches, 4 - g.stage);
  // The middle stages hold the same layer with fewer micro-batches in flight (3, then 2): their
  // peaks fall; the last stage, with one, holds the logits of 50257 entries per token.
  EXPECT_GT(g.stage_peak_bytes[1], g.stage_peak_bytes[2]);
  EXPECT_EQ(g.stage, 3);
}

TEST(PipelineEstimate, LayoutErrorsNameTheConstraint) {
  auto error = [](EstimateOptions o) {
    Result<Estimate> r = estimate(o);
    return r.ok() ? std::string("ok") : r.error();
  };
  EXPECT_NE(error(pipeline_options("gpt2:layers=4", 8, 8, 1, 8)).find("more than the 4 layers"), std::string::npos);
  EXPECT_NE(error(pipeline_options("gpt2:layers=4", 6, 4, 1, 8)).find("not a multiple of --tensor-parallel 1 x --pipeline-parallel 4"), std::string::npos);
  EXPECT_NE(error(pipeline_options("gpt2:layers=6", 4, 4, 1, 8)).find("does not divide the 6 layers"), std::string::npos);
  EstimateOptions no_micro = pipeline_options("gpt2:layers=4", 4, 4, 1, 8);
  no_micro.micro_batch.reset();
  EXPECT_NE(error(no_micro).find("needs --micro-batch"), std::string::npos);
  EstimateOptions zero2 = pipeline_options("gpt2:layers=4", 4, 4, 1, 8);
  zero2.parallel.zero_stage = 2;
  EXPECT_NE(error(zero2).find("refuses ZeRO-2 and ZeRO-3 with pipeline parallelism"), std::string::npos);
  EstimateOptions zero1 = pipeline_options("gpt2:layers=4", 4, 4, 1, 8);
  zero1.parallel.zero_stage = 1;
  EXPECT_EQ(error(zero1), "ok");
}

TEST(PipelineEstimate, InterleavedChunksFollowMegatronsWarmup) {
  // gpt2 with 8 layers, P = 2, v = 2 (4 chunks of 2 layers), m = 4 micro-batches: rank 0 runs
  // (P - 0 - 1) * 2 + (v - 1) * P = 4 warm-up forwards, so 5 (chunk, micro-batch) forwards are
  // in flight at its first backward; rank 1 runs 2 warm-up forwards, 3 in flight.
  EstimateOptions o = pipeline_options("gpt2:layers=8", 4, 2, 1, 4);
  o.parallel.pipeline_schedule = PipelineScheduleKind::Interleaved;
  o.parallel.virtual_stages = 2;
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  const PerGpu& g = *r.value().per_gpu;
  EXPECT_EQ(g.pipeline_schedule, "interleaved");
  EXPECT_EQ(g.in_flight_micro_batches, g.stage == 0 ? 5 : 3);
  EXPECT_EQ(max_in_flight(pipeline_order(PipelineScheduleKind::Interleaved, 2, 0, 4, 2)), 5);
  EXPECT_EQ(max_in_flight(pipeline_order(PipelineScheduleKind::Interleaved, 2, 1, 4, 2)), 3);
  // Rank 0 holds virtual stages 0 and 2: layers 0-1 with the embedding and layers 4-5.
  Graph model_graph = model("gpt2:layers=8", 1, 64);
  RankGraph rank0 = pipeline_rank_graph(model_graph, 2, 2, 0);
  ASSERT_EQ(rank0.chunks.size(), 2u);
  EXPECT_EQ(rank0.chunks[0].received, kNone);
  EXPECT_NE(rank0.chunks[1].received, kNone);
  EXPECT_TRUE(rank0.chunks[0].sends && rank0.chunks[1].sends);
  // Errors: m not a multiple of P, layers per stage not divisible by v.
  EstimateOptions odd = o;
  odd.batch = 3;
  odd.micro_batch = 1;
  Result<Estimate> bad = estimate(odd);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("not a multiple of --pipeline-parallel 2"), std::string::npos) << bad.error();
  EstimateOptions chunks = o;
  chunks.parallel.virtual_stages = 3;
  bad = estimate(chunks);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("do not split into 3 model chunks"), std::string::npos) << bad.error();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(PipelineCli, JsonPerGpuAndMegatronArguments) {
  const std::string file = ::testing::TempDir() + "headroom_pipeline_megatron.txt";
  testing::CliRun r = testing::run_cli("estimate gpt2:layers=4 --seq 64 --precision bf16 --gpus 8 --tensor-parallel 2 --pipeline-parallel 2 "
                                       "--zero 1 --micro-batch 2 --grad-accum 4 --json --emit megatron " + file);
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  const nlohmann::json& g = j["per_gpu"];
  EXPECT_EQ(g["pipeline_parallel"], 2);
  EXPECT_EQ(g["pipeline_schedule"], "1f1b");
  EXPECT_EQ(g["layout"]["data_parallel"], 2);  // 8 / (T 2 x P 2)
  EXPECT_EQ(g["stage_peak_bytes"].size(), 2u);
  EXPECT_EQ(g["in_flight_micro_batches"], g["stage"] == 0 ? 2 : 1);
  // Megatron's batch arithmetic: global batch = micro-batch 2 x 4 micro-batches x data-parallel 2.
  const std::string args = slurp(file);
  std::remove(file.c_str());
  for (const char* line : {"--tensor-model-parallel-size 2\n", "--pipeline-model-parallel-size 2\n", "--micro-batch-size 2\n",
                           "--global-batch-size 16\n", "--use-distributed-optimizer\n", "--bf16\n"}) {
    EXPECT_NE(args.find(line), std::string::npos) << line << args;
  }
  const std::string chunked = ::testing::TempDir() + "headroom_pipeline_interleaved.txt";
  r = testing::run_cli("estimate gpt2:layers=8 --seq 64 --precision bf16 --gpus 2 --pipeline-parallel 2 --pipeline-schedule interleaved "
                       "--virtual-stages 2 --micro-batch 1 --grad-accum 4 --emit megatron " + chunked);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string interleaved = slurp(chunked);
  std::remove(chunked.c_str());
  EXPECT_NE(interleaved.find("--num-layers-per-virtual-pipeline-stage 2\n"), std::string::npos) << interleaved;  // 8 / (2 x 2)
  EXPECT_NE(interleaved.find("--global-batch-size 4\n"), std::string::npos) << interleaved;  // 1 x 4 x 1
}

TEST(PipelineCli, BadLayoutsAreOneLineExitTwo) {
  const std::string m = "estimate gpt2:layers=4 --seq 64 --precision bf16 ";
  testing::expect_usage_error(m + "--gpus 16 --pipeline-parallel 8 --micro-batch 1 --grad-accum 8", "more than the 4 layers");
  testing::expect_usage_error(m + "--gpus 6 --pipeline-parallel 4 --micro-batch 1 --grad-accum 8", "is not a multiple of --tensor-parallel 1 x --pipeline-parallel 4");
  testing::expect_usage_error(m + "--gpus 4 --pipeline-parallel 4", "needs --micro-batch");
  testing::expect_usage_error(m + "--gpus 4 --pipeline-parallel 4 --zero 3 --micro-batch 1 --grad-accum 8", "refuses ZeRO-2 and ZeRO-3");
  testing::expect_usage_error(m + "--gpus 4 --pipeline-parallel 4 --fsdp full --micro-batch 1 --grad-accum 8", "--fsdp with --pipeline-parallel");
  testing::expect_usage_error(m + "--gpus 4 --pipeline-schedule gpipe", "applies to --pipeline-parallel P with P > 1");
  testing::expect_usage_error(m + "--gpus 4 --pipeline-parallel 2 --virtual-stages 2 --micro-batch 1 --grad-accum 4", "--virtual-stages applies to --pipeline-schedule interleaved");
  testing::expect_usage_error(m + "--gpus 4 --pipeline-parallel 2 --pipeline-schedule interleaved --micro-batch 1 --grad-accum 4", "needs --virtual-stages");
  testing::expect_usage_error(m + "--gpus 4 --pipeline-parallel 2 --pipeline-schedule zigzag", "--pipeline-schedule must be 1f1b, gpipe or interleaved");
  testing::expect_usage_error("estimate mlp:layers=4,dim=64 --gpus 2 --pipeline-parallel 2 --micro-batch 1 --grad-accum 2", "no repeated blocks");
  // Checkpointing inside stages is simulated (tests/pipeline_checkpoint_test.cc); offloading is not.
  testing::expect_usage_error(m + "--gpus 4 --pipeline-parallel 2 --micro-batch 1 --grad-accum 4 --offload transformer.h.0.mlp.c_fc",
                              "--offload with --pipeline-parallel is not modelled yet");
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
