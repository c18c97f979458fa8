// Checkpointing inside pipeline stages (--pipeline-parallel P with --checkpoint blocks or
// attention): the model's checkpoint regions carried to each stage's graph
// (schedule/pipeline_plan.h) and replayed by the pipeline interpreter with every micro-batch in
// flight (schedule/interpreter_pipeline.cc); Megatron's --recompute-granularity flags in
// --emit megatron.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "cli_runner.h"
#include "layout_search_args.h"
#include "pipeline_stage_live.h"

#include "estimate/estimate.h"
#include "estimate/pipeline_estimate.h"
#include "schedule/pipeline_plan.h"
#include "schedule/pipeline_split.h"
#include "schedule/transformer_blocks.h"
#include "sim/simulate.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

Graph model(const std::string& name, int64_t batch, int64_t seq) {
  EstimateOptions o;
  o.model = name;
  o.seq = seq;
  o.precision = Precision::Bf16;
  return build_graph(o, batch);
}

MemoryPlan blocks_of(const Graph& g) {
  MemoryPlan plan;
  plan.checkpoints = transformer_blocks(g).segments;
  return plan;
}

TEST(PipelinePlan, EachStageKeepsTheRegionsOfItsOwnBlocks) {
  // gpt2 with 4 layers in 2 stages: stage 0 runs transformer.h.0 and .1, stage 1 .2 and .3; each
  // gets those two blocks' regions, with its own graph's op ids and the same ops.
  Graph g = model("gpt2:layers=4", 1, 64);
  const MemoryPlan plan = blocks_of(g);
  ASSERT_EQ(plan.checkpoints.size(), 4u);
  for (int stage = 0; stage < 2; ++stage) {
    SCOPED_TRACE(stage);
    const RankGraph rank = pipeline_rank_graph(g, 2, 1, stage);
    const MemoryPlan on_rank = plan_for_rank(g, rank.graph, plan);
    ASSERT_EQ(on_rank.checkpoints.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      const CheckpointSegment& model_region = plan.checkpoints[static_cast<size_t>(2 * stage) + i];
      const CheckpointSegment& r = on_rank.checkpoints[i];
      EXPECT_EQ(r.last - r.first, model_region.last - model_region.first);
      EXPECT_EQ(rank.graph.op(r.first).name, g.op(model_region.first).name);
      EXPECT_EQ(rank.graph.op(r.last).name, g.op(model_region.last).name);
    }
    EXPECT_NO_THROW(validate_plan(rank.graph, on_rank));
  }
  // An interleaved rank (P 2, v 2, 8 layers): rank 0 holds virtual stages 0 and 2, layers 0-1
  // and 4-5, one region each.
  Graph eight = model("gpt2:layers=8", 1, 64);
  const RankGraph rank0 = pipeline_rank_graph(eight, 2, 2, 0);
  const MemoryPlan chunks = plan_for_rank(eight, rank0.graph, blocks_of(eight));
  ASSERT_EQ(chunks.checkpoints.size(), 4u);
  EXPECT_EQ(rank0.graph.op(chunks.checkpoints[2].first).name.rfind("transformer.h.4.", 0), 0u) << rank0.graph.op(chunks.checkpoints[2].first).name;
  // A region the split cuts (from block 1 into block 2, across the boundary of 2 stages): refused.
  MemoryPlan across;
  across.checkpoints = {{plan.checkpoints[1].first, plan.checkpoints[2].last}};
  try {
    plan_for_rank(g, pipeline_rank_graph(g, 2, 1, 0).graph, across);
    ADD_FAILURE() << "a region across stages was carried";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("crosses a pipeline stage boundary"), std::string::npos) << e.what();
  }
}

using testing::LiveAtFirstBackward;
using testing::live_at_first_backward;

TEST(PipelineCheckpoint, InFlightMicroBatchesKeepOnlyTheirBlockInputs) {
  // GPT-2, 4 layers in 4 stages, batch 1, seq 128, bf16, 1F1B with m = 8: stage 1 has 3
  // micro-batches in flight at its first backward. Without checkpointing each keeps one GPT-2
  // layer's saved activations, 6,686,722 bytes (58 sbh + 5 a s^2 b + 16 sb + 2; pipeline_parallel_test),
  // of which the layer's input (2 sbh = 196,608) is the p2p receive buffer. With the layer
  // checkpointed (Megatron's --recompute-granularity full, one layer per checkpoint) the
  // checkpoint keeps only its input, that same receive buffer: 3 x 196,608 bytes, no saved
  // activation of the layer.
  Graph g = model("gpt2:layers=4", 1, 128);
  EstimateOptions o;
  o.precision = Precision::Bf16;
  ScheduleOptions so = schedule_options(o);
  so.plan = blocks_of(g);
  PipelineStageRun run = pipeline_stage_program(g, so, PipelineScheduleKind::OneFOneB, 4, 1, 8);
  ASSERT_EQ(run.plan.checkpoints.size(), 1u);
  EXPECT_EQ(run.in_flight_micro_batches, 3);
  LiveAtFirstBackward live = live_at_first_backward(run.program);
  EXPECT_EQ(live.received, 3 * 196'608);
  EXPECT_EQ(live.saved, 0);
}

EstimateOptions pipeline_options(const std::string& name, int64_t gpus, int64_t p, int64_t micro, int64_t accum) {
  EstimateOptions o;
  o.model = name;
  o.seq = 512;
  o.precision = Precision::Bf16;
  o.batch = micro * accum;
  o.micro_batch = micro;
  o.parallel.gpus = gpus;
  o.parallel.pipeline_parallel = p;
  o.parallel.zero_stage = 1;
  return o;
}

TEST(PipelineCheckpoint, EveryScheduleAndImplementationRunsAndLowersEveryStage) {
  // gpt2, 8 layers, seq 1024, P = 2, micro-batch 4, m = 4 (the layers' activations, not the
  // ZeRO-1 step, set the peaks); each schedule with and without every block checkpointed
  // (reentrant and non-reentrant): checkpointing lowers every stage's peak.
  for (PipelineScheduleKind kind : {PipelineScheduleKind::OneFOneB, PipelineScheduleKind::GPipe, PipelineScheduleKind::Interleaved}) {
    for (CheckpointImpl impl : {CheckpointImpl::Reentrant, CheckpointImpl::NonReentrant}) {
      SCOPED_TRACE(std::string(pipeline_schedule_name(kind)) + " " + checkpoint_impl_name(impl));
      EstimateOptions o = pipeline_options("gpt2:layers=8", 4, 2, 4, 4);
      o.seq = 1024;
      o.parallel.pipeline_schedule = kind;
      if (kind == PipelineScheduleKind::Interleaved) o.parallel.virtual_stages = 2;
      Result<Estimate> plain = estimate(o);
      ASSERT_TRUE(plain.ok()) << plain.error();
      o.checkpoint_ranges = {"blocks"};
      o.plan.checkpoint_impl = impl;
      Result<Estimate> ck = estimate(o);
      ASSERT_TRUE(ck.ok()) << ck.error();
      const PerGpu& a = *plain.value().per_gpu;
      const PerGpu& b = *ck.value().per_gpu;
      ASSERT_EQ(a.stage_peak_bytes.size(), b.stage_peak_bytes.size());
      for (size_t i = 0; i < a.stage_peak_bytes.size(); ++i) EXPECT_LT(b.stage_peak_bytes[i], a.stage_peak_bytes[i]) << "stage " << i;
      // The reported stage may change (stage 0's activations fall, the last stage keeps its
      // logits); the same stage holds the same model states.
      if (a.stage == b.stage) {
        EXPECT_EQ(a.model_states_bytes, b.model_states_bytes);
      }
    }
  }
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(PipelineCheckpointCli, MegatronRecomputeAndSequenceParallelArguments) {
  const std::string file = ::testing::TempDir() + "headroom_pipeline_recompute.txt";
  const std::string layout = "estimate gpt2:layers=4 --seq 64 --precision bf16 --gpus 8 --tensor-parallel 2 --sequence-parallel --pipeline-parallel 2 "
                             "--zero 1 --micro-batch 2 --grad-accum 4 ";
  testing::CliRun r = testing::run_cli(layout + "--checkpoint blocks --emit megatron " + file);
  ASSERT_EQ(r.code, 0) << r.err;
  std::string args = slurp(file);
  for (const char* line : {"--sequence-parallel\n", "--recompute-granularity full\n", "--recompute-method uniform\n", "--recompute-num-layers 1\n",
                           "--pipeline-model-parallel-size 2\n", "--global-batch-size 16\n"}) {
    EXPECT_NE(args.find(line), std::string::npos) << line << args;
  }
  r = testing::run_cli(layout + "--checkpoint attention --emit megatron " + file);
  ASSERT_EQ(r.code, 0) << r.err;
  args = slurp(file);
  EXPECT_NE(args.find("--recompute-granularity selective\n"), std::string::npos) << args;
  EXPECT_EQ(args.find("--recompute-method"), std::string::npos) << args;
  std::remove(file.c_str());
  // Other regions are not Megatron's; a region the stage split cuts is not simulated.
  testing::expect_usage_error(layout + "--checkpoint transformer.h.0.ln_1..transformer.h.0.attn.c_attn --emit megatron " + file,
                              "Megatron recomputes whole layers");
  testing::expect_usage_error(layout + "--checkpoint transformer.h.1.ln_1..transformer.h.2.ln_1", "crosses a pipeline stage boundary");
}

TEST(PipelineCheckpointSearch, APipelineThatFitsOnlyCheckpointedRanksCheckpointed) {
  // gpt2 with 4 layers, seq 1024, bf16, batch 2 per GPU on 2 GPUs under 2.3e9 bytes: PP 2 x
  // ZeRO-1 needs about 2.50e9 at micro-batch 1 without checkpoints (the measured stack's 740 MiB
  // training context included), so its probe tries every block of each stage checkpointed, which
  // fits (about 2.24e9); the larger micro-batch is then
  // tried checkpointed only, and does not fit. The
  // ranked layout is its estimate with --checkpoint blocks (one source of truth).
  RunArgs a;
  a.model = "gpt2:layers=4";
  a.batch = "2";
  a.seq = "1024";
  a.gpu = "A100-SXM4-40GB";
  a.gpu_memory = "2300000000B";
  a.margin = "0%";
  a.precision = "bf16";
  LayoutPlan p = testing::search_layouts_for(a, 2);
  const LayoutOption* pp = nullptr;
  for (const LayoutOption& l : p.ranked) {
    if (l.engine == "PP 2 x ZeRO-1") pp = &l;
  }
  ASSERT_NE(pp, nullptr);
  EXPECT_EQ(pp->recompute, Recompute::Full);
  EXPECT_EQ(pp->micro_batch, 1);
  EXPECT_EQ(pp->micro_batches, 4);
  EXPECT_LE(pp->peak_bytes, p.budget_bytes);
  EstimateOptions o = layout_options(p, *pp);
  EXPECT_EQ(o.checkpoint_ranges, std::vector<std::string>{"blocks"});
  Result<Estimate> e = estimate(o);
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_EQ(e.value().device->device_total_bytes, pp->peak_bytes);
  // Without the checkpoints the same layout is over the budget.
  o.checkpoint_ranges.clear();
  Result<Estimate> plain = estimate(o);
  ASSERT_TRUE(plain.ok()) << plain.error();
  EXPECT_GT(plain.value().device->device_total_bytes, p.budget_bytes);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
