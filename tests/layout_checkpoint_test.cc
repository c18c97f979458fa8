// Activation checkpointing per transformer block, in estimate (--checkpoint blocks) and inside the
// layout search (plan --gpus), and the offload families the search falls back to.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>

#include "cli_runner.h"
#include "estimate/estimate.h"
#include "frontends/zoo/registry.h"
#include "layout_search_args.h"
#include "options/run_args.h"
#include "plan/evaluate.h"
#include "plan/layout_fit.h"
#include "plan/layout_search.h"
#include "plan/offload_traffic.h"
#include "schedule/held_state.h"
#include "schedule/pipeline_schedule.h"
#include "schedule/transformer_blocks.h"
#include "sim/simulate.h"
#include "sim/device_catalog.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::CliRun;
using testing::run_cli;

Graph build(const std::string& model, int64_t seq = 64) {
  BuildConfig c;
  c.batch = 1;
  c.seq = seq;
  return build_model(model, c);
}

TEST(TransformerBlocks, OneSegmentPerDecoderLayer) {
  Graph gpt2 = build("gpt2:layers=3");
  TransformerBlocks b = transformer_blocks(gpt2);
  EXPECT_EQ(b.container, "transformer.h");
  ASSERT_EQ(b.segments.size(), 3u);
  for (size_t i = 0; i < b.segments.size(); ++i) {
    const std::string prefix = "transformer.h." + std::to_string(i) + ".";
    EXPECT_EQ(gpt2.op(b.segments[i].first).name.rfind(prefix, 0), 0u) << gpt2.op(b.segments[i].first).name;
    EXPECT_EQ(gpt2.op(b.segments[i].last).name.rfind(prefix, 0), 0u) << gpt2.op(b.segments[i].last).name;
    if (i + 1 < b.segments.size()) {
      EXPECT_LT(b.segments[i].last, b.segments[i + 1].first);
    }
  }
  EXPECT_EQ(gpt2.block_class, "GPT2Block");
  Graph llama = build("llama:layers=2,hidden=256,heads=4,ffn=512,vocab=1000");
  TransformerBlocks l = transformer_blocks(llama);
  EXPECT_EQ(l.container, "model.layers");
  EXPECT_EQ(l.segments.size(), 2u);
  EXPECT_EQ(llama.block_class, "LlamaDecoderLayer");
}

TEST(TransformerBlocks, CheckpointBlocksIsEverySegment) {
  // estimate --checkpoint blocks is the memory plan of one segment per block: the same program
  // as those segments given by hand, with a lower peak than no checkpointing.
  EstimateOptions o;
  o.model = "gpt2:layers=4";
  o.batch = 4;
  o.seq = 256;
  Result<Estimate> plain = estimate(o);
  o.checkpoint_ranges = {"blocks"};
  Result<Estimate> blocks = estimate(o);
  o.checkpoint_ranges.clear();
  o.plan.checkpoints = transformer_blocks(build("gpt2:layers=4", 256)).segments;
  Result<Estimate> by_hand = estimate(o);
  ASSERT_TRUE(plain.ok() && blocks.ok() && by_hand.ok()) << plain.error() << blocks.error() << by_hand.error();
  EXPECT_EQ(blocks.value().peak_bytes, by_hand.value().peak_bytes);
  EXPECT_LT(blocks.value().peak_bytes, plain.value().peak_bytes);
  CliRun none = run_cli("estimate mlp:layers=1,dim=8 --checkpoint blocks");
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("no repeated blocks"), std::string::npos) << none.err;
}

TEST(OffloadTraffic, BytesPerStepByFamily) {
  // 1,000 parameters over 4 ranks: 250 per partition.
  //   ZeRO-2 + optimizer offload: fp32 gradients down, fp32 partition up: 8 * 250 = 2,000.
  //   ZeRO-3 + both, bf16, 3 micro-batches: (2 + 2 + 2) * 250 * 3 = 4,500.
  //   ZeRO-3 + optimizer only, bf16, 3 micro-batches: 2 * 250 * 3 + 2 * 250 = 2,000.
  //   FSDP CPUOffload: fp32 shard up twice, fp32 gradient down: 12 * 250 = 3,000.
  EXPECT_EQ(offload_bytes_per_step(DataParallelEngine::Zero2, true, false, 1000, 4, 3, 2), 2000);
  EXPECT_EQ(offload_bytes_per_step(DataParallelEngine::Zero3, true, true, 1000, 4, 3, 2), 4500);
  EXPECT_EQ(offload_bytes_per_step(DataParallelEngine::Zero3, true, false, 1000, 4, 3, 2), 2000);
  EXPECT_EQ(offload_bytes_per_step(DataParallelEngine::FsdpFull, false, true, 1000, 4, 1, 2), 3000);
  EXPECT_EQ(offload_bytes_per_step(DataParallelEngine::Zero2, false, false, 1000, 4, 1, 2), 0);
}

LayoutPlan search(const std::string& model, const std::string& gpu_memory, int64_t gpus, int64_t batch, const std::string& seq) {
  RunArgs a;
  a.model = model;
  a.batch = std::to_string(batch);
  a.seq = seq;
  a.gpu = "A100-SXM4-40GB";
  a.gpu_memory = gpu_memory;
  a.margin = "0%";
  a.precision = "bf16";
  return testing::search_layouts_for(a, gpus);
}

// Every ranked layout, checkpointed or offloaded, is what estimate says for that layout.
void expect_each_is_its_estimate(const LayoutPlan& p) {
  for (const LayoutOption& l : p.ranked) {
    Result<Estimate> e = estimate(layout_options(p, l));
    ASSERT_TRUE(e.ok()) << e.error();
    EXPECT_EQ(e.value().device->device_total_bytes, l.peak_bytes) << l.engine;
    EXPECT_LE(l.peak_bytes, p.budget_bytes) << l.engine;
    EXPECT_DOUBLE_EQ(l.step_ms, l.compute_ms + l.exposed_comm_ms + l.tensor_comm.ms + l.offload_ms + l.pipeline.bubble_ms + l.pipeline.p2p_ms) << l.engine;
    EXPECT_EQ(l.checkpointed, !l.plan.checkpoints.empty()) << l.engine;
  }
}

TEST(LayoutFit, CheckpointingWhenNothingElseFitsAndForALargerMicroBatch) {
  // One engine (ZeRO-2, 2 GPUs, gpt2:layers=4 at seq 512, 4 sequences per GPU). The peaks of the
  // plain and checkpointed programs are measured with an unlimited budget; the budgets below are
  // placed between them, so each case's choice follows from the search's rule, not from numbers
  // written here.
  RunArgs a;
  a.model = "gpt2:layers=4";
  a.batch = "4";
  a.seq = "512";
  a.gpu = "A100-SXM4-40GB";
  a.margin = "0%";
  a.precision = "bf16";
  a.gpus = "2";
  a.zero = "2";
  a.reduce_bucket_size = "1000";
  Result<EstimateOptions> o = to_estimate_options(a, RunCommand::Plan);
  ASSERT_TRUE(o.ok()) << o.error();
  const GpuSpec& spec = *gpu_spec(*o.value().gpu);
  PlanContext wide(o.value(), int64_t{1} << 50, CostModel(spec));
  auto peak = [&](int64_t m, bool ckpt) {
    MemoryPlan plan;
    if (ckpt) plan.checkpoints = transformer_blocks(wide.graph(m)).segments;
    return wide.evaluate(Candidate{plan, m}).peak_bytes;
  };
  const int64_t plain1 = peak(1, false), ckpt1 = peak(1, true), plain2 = peak(2, false), plain4 = peak(4, false);
  ASSERT_LT(ckpt1, plain1);
  ASSERT_LT(peak(4, true), plain4);
  // Under a budget the caching allocator frees its cache instead of failing, so what fits is
  // decided in a context with that budget: `fits(budget, m, ckpt)` evaluates there.
  auto fits = [&](PlanContext& ctx, int64_t m, bool ckpt) {
    MemoryPlan plan;
    if (ckpt) plan.checkpoints = transformer_blocks(ctx.graph(m)).segments;
    return ctx.evaluate(Candidate{plan, m}).feasible;
  };
  auto compute = [](const Evaluation& e, int64_t) { return e.time.total_ms; };
  // At the checkpointed peak of micro-batch 1 something fits; when it is checkpointed, the plain
  // program of that micro-batch does not fit, and no larger micro-batch fits plain.
  {
    PlanContext ctx(o.value(), ckpt1, CostModel(spec));
    EngineFit f = fit_engine(ctx, {4, 2, 1}, true, compute);
    ASSERT_TRUE(f.found);
    EXPECT_LE(f.evaluation.peak_bytes, ckpt1);
    if (f.checkpointed) {
      EXPECT_EQ(f.plan.checkpoints.size(), 4u);
      for (int64_t m : {int64_t{4}, int64_t{2}, int64_t{1}}) {
        if (m >= f.micro_batch) {
          EXPECT_FALSE(fits(ctx, m, false)) << m;
        }
      }
    } else {
      EXPECT_TRUE(fits(ctx, f.micro_batch, false));
    }
  }
  // Everything fits plain at the largest micro-batch: no checkpointing is tried.
  {
    PlanContext ctx(o.value(), plain4, CostModel(spec));
    EngineFit f = fit_engine(ctx, {4, 2, 1}, true, compute);
    EXPECT_FALSE(f.checkpointed);
    EXPECT_EQ(f.micro_batch, 4);
    EXPECT_EQ(f.evaluations, 1);
  }
  // When micro-batch 4 fits only checkpointed and 2 plain, the step time decides: a step function
  // that rewards the larger micro-batch keeps the checkpointed 4, one that rewards the smaller 2.
  // The budget is the first, going down from plain 4's unlimited peak, that separates them.
  bool separated = false;
  for (int64_t budget = plain4; budget > plain2 / 2 && !separated; budget -= (plain4 - plain2 / 2) / 16) {
    PlanContext ctx(o.value(), budget, CostModel(spec));
    if (fits(ctx, 4, false) || !fits(ctx, 4, true) || !fits(ctx, 2, false)) continue;
    separated = true;
    PlanContext a(o.value(), budget, CostModel(spec)), b(o.value(), budget, CostModel(spec));
    EngineFit larger = fit_engine(a, {4, 2, 1}, true, [](const Evaluation&, int64_t m) { return 100.0 / static_cast<double>(m); });
    EXPECT_TRUE(larger.checkpointed);
    EXPECT_EQ(larger.micro_batch, 4);
    EngineFit smaller = fit_engine(b, {4, 2, 1}, true, [](const Evaluation&, int64_t m) { return static_cast<double>(m); });
    EXPECT_FALSE(smaller.checkpointed);
    EXPECT_EQ(smaller.micro_batch, 2);
  }
  EXPECT_TRUE(separated) << "no budget separates micro-batches 4 and 2: pick another sequence length";
}

// When nothing fits, the rejection quotes the smallest peak with the micro-batch and recompute
// it was simulated at: not always the smallest micro-batch (one micro-batch needs no
// accumulation state) nor the heaviest recompute (checkpointing can raise the peak where the
// model states dominate).
// gpt2:layers=4, 4 sequences of 256 per GPU in bf16 on 2 A100-40GB, no margin, and the model state
// every candidate of that layout holds (schedule/held_state.h).
struct SmallLayout {
  EstimateOptions options;
  int64_t held = 0;     // Evaluation::held_bytes, the same at every candidate
  int64_t in_step = 0;  // Evaluation::optimizer_step_bytes, likewise
};
// The run of SmallLayout before its engine is chosen.
RunArgs small_run() {
  RunArgs a;
  a.model = "gpt2:layers=4";
  a.batch = "4";
  a.seq = "256";
  a.gpu = "A100-SXM4-40GB";
  a.margin = "0%";
  a.precision = "bf16";
  a.gpus = "2";
  return a;
}
SmallLayout small_layout(void (*engine)(RunArgs&)) {
  RunArgs a = small_run();
  engine(a);
  Result<EstimateOptions> o = to_estimate_options(a, RunCommand::Plan);
  EXPECT_TRUE(o.ok()) << o.error();
  SmallLayout l{o.value()};
  const Evaluation e = PlanContext(l.options, int64_t{1} << 50, CostModel(*gpu_spec(*l.options.gpu))).evaluate(Candidate{MemoryPlan{}, 4});
  l.held = e.held_bytes;
  l.in_step = e.optimizer_step_bytes;
  return l;
}

TEST(LayoutFit, ARejectionQuotesTheCandidateOfItsSmallestPeak) {
  const SmallLayout l = small_layout([](RunArgs& a) { a.fsdp = "grad-op"; });
  const GpuSpec& spec = *gpu_spec(*l.options.gpu);
  // A budget just above the model state every candidate holds in its optimizer step (so the
  // search does not stop at the first candidate, test below) and below every peak: nothing fits.
  PlanContext ctx(l.options, l.in_step + 1, CostModel(spec));
  EngineFit f = fit_engine(ctx, {4, 2, 1}, true, [](const Evaluation& e, int64_t) { return e.time.total_ms; });
  ASSERT_FALSE(f.found);
  EXPECT_FALSE(f.model_state_over_budget);
  EXPECT_EQ(f.evaluations, 6);
  int64_t least = 0, at = 0;
  Recompute level = Recompute::None;
  for (int64_t m : {int64_t{4}, int64_t{2}, int64_t{1}}) {
    for (Recompute r : {Recompute::None, Recompute::Full}) {
      const int64_t peak = ctx.evaluate(Candidate{recompute_plan(ctx.graph(m), r), m}).peak_bytes;  // from memory
      if (least == 0 || peak < least) {
        least = peak;
        at = m;
        level = r;
      }
    }
  }
  EXPECT_EQ(f.smallest_peak_bytes, least);
  EXPECT_EQ(f.smallest_peak_micro_batch, at);
  EXPECT_EQ(f.smallest_peak_recompute, level);
}

// A candidate whose optimizer step holds more parameters, gradients, optimizer states and step
// buffers than the budget ends the search at once: every candidate holds as much there
// (schedule/held_state.h), so none fits. One byte below that, the search tries one candidate; at
// it, it goes on. ZeRO-2's step holds more than its end state: the fp32 gradient partition.
TEST(LayoutFit, AModelStateOverTheBudgetEndsTheSearchAtTheFirstCandidate) {
  const SmallLayout l = small_layout([](RunArgs& a) { a.zero = "2"; });
  const GpuSpec& spec = *gpu_spec(*l.options.gpu);
  ASSERT_GT(l.held, 0);
  ASSERT_GT(l.in_step, l.held);
  auto compute = [](const Evaluation& e, int64_t) { return e.time.total_ms; };
  {
    PlanContext ctx(l.options, l.in_step - 1, CostModel(spec));
    ctx.answer_for_layout_search();
    EngineFit f = fit_engine(ctx, {4, 2, 1}, true, compute);
    EXPECT_FALSE(f.found);
    EXPECT_EQ(f.evaluations, 1);
    ASSERT_TRUE(f.model_state_over_budget);
    EXPECT_EQ(f.model_state_over_budget->held_bytes, l.held);
    EXPECT_EQ(f.model_state_over_budget->optimizer_step_bytes, l.in_step);
    // Skipped: answered with the step's state as its (lower-bound) peak, untimed.
    const Evaluation e = ctx.evaluate(Candidate{MemoryPlan{}, 4});
    EXPECT_FALSE(e.feasible);
    EXPECT_EQ(e.peak_bytes, l.in_step);
    EXPECT_EQ(e.time.total_ms, 0.0);
  }
  {
    PlanContext ctx(l.options, l.in_step, CostModel(spec));
    ctx.answer_for_layout_search();
    EngineFit f = fit_engine(ctx, {4, 2, 1}, true, compute);
    EXPECT_FALSE(f.found);  // the activations do not fit beside the state
    EXPECT_FALSE(f.model_state_over_budget);
    EXPECT_EQ(f.evaluations, 6);
  }
}

// Where the layout search reads of a pipeline candidate only whether it fits (Candidate::fit_only),
// its stages stop at the first whose live peak alone is over the budget: that stage's live peak
// is the answer, a lower bound. Asked for its peak later, the candidate is simulated whole, as a
// context that never stopped simulates it; asked again either way, it is answered from memory.
TEST(LayoutFit, APipelineCandidateAskedOnlyWhetherItFitsStopsAtTheFirstStageOverTheBudget) {
  RunArgs a = small_run();  // as one pipeline of 2 stages, micro-batch 2
  a.pipeline_parallel = "2";
  a.zero = "1";
  a.megatron = true;
  a.micro_batch = "2";
  Result<EstimateOptions> o = to_estimate_options(a, RunCommand::Estimate);
  ASSERT_TRUE(o.ok()) << o.error();
  const GpuSpec& spec = *gpu_spec(*o.value().gpu);
  PlanContext probe(o.value(), int64_t{1} << 50, CostModel(spec));
  // Stage 0's live peak at micro-batch 2 (two micro-batches a step).
  ScheduleOptions s = schedule_options(o.value());
  s.micro_batches = 2;
  const Program stage0 = pipeline_stage_program(probe.graph(2), s, PipelineScheduleKind::OneFOneB, 2, 0, 2).program;
  const int64_t live0 = simulate(stage0).peak.bytes;
  ASSERT_GT(live0, model_state(stage0).in_optimizer_step);  // the state alone is under the budget below
  const int64_t budget = live0 - 1;
  PlanContext ctx(o.value(), budget, CostModel(spec));
  ctx.answer_for_layout_search();
  const Evaluation quick = ctx.evaluate(Candidate{MemoryPlan{}, 2, /*fit_only=*/true});
  EXPECT_FALSE(quick.feasible);
  EXPECT_TRUE(quick.peak_is_lower_bound);
  EXPECT_EQ(quick.peak_bytes, live0);
  EXPECT_EQ(ctx.simulations(), 1);
  const Evaluation whole = ctx.evaluate(Candidate{MemoryPlan{}, 2});
  EXPECT_FALSE(whole.feasible);
  EXPECT_FALSE(whole.peak_is_lower_bound);
  EXPECT_GE(whole.peak_bytes, quick.peak_bytes);
  EXPECT_EQ(ctx.simulations(), 2);
  PlanContext never_stopped(o.value(), budget, CostModel(spec));
  never_stopped.answer_for_layout_search();
  const Evaluation reference = never_stopped.evaluate(Candidate{MemoryPlan{}, 2});
  EXPECT_EQ(whole.peak_bytes, reference.peak_bytes);
  EXPECT_EQ(whole.held_bytes, reference.held_bytes);
  EXPECT_EQ(ctx.evaluate(Candidate{MemoryPlan{}, 2, true}).peak_bytes, whole.peak_bytes);
  EXPECT_EQ(ctx.evaluate(Candidate{MemoryPlan{}, 2}).peak_bytes, whole.peak_bytes);
  EXPECT_EQ(ctx.simulations(), 2);
}

TEST(LayoutSearch, BelowEveryPlainFitOnlyCheckpointedOrOffloadedLayoutsRank) {
  // With room for everything, each engine's plain peak at micro-batch 1; a budget one byte under
  // the smallest leaves no plain layout: what ranks is checkpointed or offloaded, and each is
  // exactly its estimate.
  // Fourteen families: the six data-parallel engines, TP 2 x DDP, ZeRO-1, 2 and 3 (T = 4, 8 do not
  // divide 2 GPUs), TP 2 + SP x DDP and ZeRO-1, PP 2 x ZeRO-1 with 1F1B and interleaved (v = 2:
  // one layer per model chunk); the offload families are not tried while one of them fits.
  LayoutPlan roomy = search("gpt2:layers=4", "40GiB", 2, 1, "512");
  ASSERT_EQ(roomy.ranked.size(), 14u);
  int64_t smallest = roomy.ranked.front().peak_bytes;
  for (const LayoutOption& l : roomy.ranked) {
    EXPECT_FALSE(l.checkpointed) << l.engine;
    smallest = std::min(smallest, l.peak_bytes);
  }
  // Under a budget the allocator frees its cache rather than fail, so a plain layout can still fit
  // one byte under its unlimited peak: the budget goes down until none does.
  LayoutPlan tight;
  int64_t budget = smallest - 1;
  for (int i = 0; i < 8; ++i) {
    tight = search("gpt2:layers=4", std::to_string(budget) + "B", 2, 1, "512");
    int64_t plain = 0;
    for (const LayoutOption& l : tight.ranked) {
      if (!l.checkpointed && !l.parallel.offload_optimizer && !l.parallel.offload_params) plain = plain ? std::min(plain, l.peak_bytes) : l.peak_bytes;
    }
    if (plain == 0) break;
    budget = plain - 1;
  }
  ASSERT_FALSE(tight.ranked.empty()) << "nothing fits " << budget << " bytes";
  for (const LayoutOption& l : tight.ranked) {
    EXPECT_TRUE(l.checkpointed || l.parallel.offload_optimizer || l.parallel.offload_params) << l.engine;
  }
  expect_each_is_its_estimate(tight);
  expect_each_is_its_estimate(roomy);
}

TEST(LayoutSearch, OffloadFamiliesWhenNothingElseFits) {
  // gpt2-medium (354M parameters) in bf16 with Adam on 2 GPUs: ZeRO-3's model states alone are
  // 16 Psi / 2 = 2.8 GB per GPU. A 2 GiB budget leaves no family without offload (the smallest,
  // TP 2 x DDP with bf16 parameters, gradients and Adam states, needs 2.06 GiB with every block
  // checkpointed: its step holds PyTorch 2.x's one foreach list; 1.13's two made it 2.42 GiB);
  // ZeRO-3 with the optimizer and parameters on the CPU keeps no model state on the device
  // between ops (1.93 GiB).
  LayoutPlan p = search("gpt2-medium", "2GiB", 2, 1, "128");
  ASSERT_FALSE(p.ranked.empty());
  for (const LayoutOption& l : p.ranked) {
    EXPECT_TRUE(l.parallel.offload_optimizer || l.parallel.offload_params) << l.engine;
    EXPECT_GT(l.offload_bytes, 0) << l.engine;
  }
  expect_each_is_its_estimate(p);
  CliRun r = run_cli("plan gpt2-medium --seq 128 --precision bf16 --gpus 2 --gpu A100-SXM4-40GB --gpu-memory 2GiB --margin 0%");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("offload"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("host-link copies of offloading"), std::string::npos) << r.out;
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
