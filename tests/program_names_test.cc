// ScheduleOptions::names (schedule/build_program.h): a program built without names is the named
// program with every buffer name and every op step's label left empty, event for event and step
// for step; and PlanContext::evaluate, which builds without names, reports the same peak, peak op
// and time as the named program of the same candidate.
#include <gtest/gtest.h>

#include <string>

#include "estimate/estimate.h"
#include "estimate/parallel.h"
#include "estimate/pipeline_estimate.h"
#include "options/run_args.h"
#include "plan/evaluate.h"
#include "schedule/transformer_blocks.h"
#include "sim/device_catalog.h"
#include "sim/simulate.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

// gpt2:layers=4, 4 sequences of 128 per GPU over 2 GPUs, bf16, on an A100 (a small model with
// blocks, so that every engine and checkpointing apply).
RunArgs small_gpt2() {
  RunArgs a;
  a.model = "gpt2:layers=4";
  a.batch = "4";
  a.seq = "128";
  a.gpu = "A100-SXM4-40GB";
  a.precision = "bf16";
  a.gpus = "2";
  return a;
}

EstimateOptions options_of(const RunArgs& a) {
  Result<EstimateOptions> o = to_estimate_options(a, RunCommand::Plan);
  EXPECT_TRUE(o.ok()) << o.error();
  return o.ok() ? o.value() : EstimateOptions{};
}

// The candidate's schedule as PlanContext::program builds it.
ScheduleOptions schedule_of(const EstimateOptions& o, const Graph& g, const MemoryPlan& plan, int64_t micro) {
  ScheduleOptions s = schedule_options(o);
  s.micro_batches = static_cast<int>(o.batch / micro);
  s.plan = plan;
  s.plan.checkpoint_impl = o.plan.checkpoint_impl;
  resolve_fsdp_wrap(o.parallel, g, s.sharding);
  return s;
}

void expect_same_but_names(const Program& named, const Program& bare, const Graph& g) {
  ASSERT_EQ(named.buffers.size(), bare.buffers.size());
  ASSERT_EQ(named.events.size(), bare.events.size());
  ASSERT_EQ(named.steps.size(), bare.steps.size());
  ASSERT_EQ(named.transfers.size(), bare.transfers.size());
  ASSERT_EQ(named.host.size(), bare.host.size());
  int named_buffers = 0;
  for (size_t i = 0; i < named.buffers.size(); ++i) {
    const Buffer &a = named.buffers[i], &b = bare.buffers[i];
    EXPECT_EQ(a.bytes, b.bytes) << a.name;
    EXPECT_EQ(a.category, b.category) << a.name;
    EXPECT_EQ(a.op, b.op) << a.name;
    EXPECT_EQ(b.name, "") << a.name;
    if (!a.name.empty()) ++named_buffers;
  }
  EXPECT_EQ(named_buffers, static_cast<int>(named.buffers.size()));
  for (size_t i = 0; i < named.events.size(); ++i) {
    EXPECT_EQ(named.events[i].kind, bare.events[i].kind) << i;
    EXPECT_EQ(named.events[i].category, bare.events[i].category) << i;
    EXPECT_EQ(named.events[i].buffer, bare.events[i].buffer) << i;
  }
  int dropped = 0;
  for (size_t i = 0; i < named.steps.size(); ++i) {
    const Step &a = named.steps[i], &b = bare.steps[i];
    EXPECT_EQ(a.phase, b.phase) << a.label;
    EXPECT_EQ(a.iteration, b.iteration) << a.label;
    EXPECT_EQ(a.micro_batch, b.micro_batch) << a.label;
    EXPECT_EQ(a.op, b.op) << a.label;
    EXPECT_EQ(a.first_event, b.first_event) << a.label;
    EXPECT_EQ(a.end_event, b.end_event) << a.label;
    EXPECT_EQ(a.recompute, b.recompute) << a.label;
    if (b.label.empty()) {
      // Only an op step loses its label, and that label was its op's name.
      ASSERT_NE(a.op, kNone) << a.label;
      EXPECT_EQ(a.label, g.op(a.op).name);
      ++dropped;
    } else {
      EXPECT_EQ(a.label, b.label);
    }
  }
  EXPECT_GT(dropped, 0);
  for (size_t i = 0; i < named.host.size(); ++i) EXPECT_EQ(named.host[i].name, bare.host[i].name);  // not buffers: kept
}

void expect_bare_program_matches(const RunArgs& a, int64_t micro, bool checkpoint_blocks) {
  const EstimateOptions o = options_of(a);
  const Graph g = build_graph(o, micro);
  MemoryPlan plan;
  if (checkpoint_blocks) plan.checkpoints = transformer_blocks(g).segments;
  ScheduleOptions s = schedule_of(o, g, plan, micro);
  const Program named = build_program(g, s);
  s.names = false;
  const Program bare = build_program(g, s);
  expect_same_but_names(named, bare, g);
}

TEST(ProgramNames, DataParallelCheckpointedMicroBatches) {
  expect_bare_program_matches(small_gpt2(), 2, /*checkpoint_blocks=*/true);
}

TEST(ProgramNames, ZeroThree) {
  RunArgs a = small_gpt2();
  a.zero = "3";
  expect_bare_program_matches(a, 4, /*checkpoint_blocks=*/false);
}

TEST(ProgramNames, FsdpUnitsCheckpointed) {
  RunArgs a = small_gpt2();
  a.fsdp = "full";
  expect_bare_program_matches(a, 2, /*checkpoint_blocks=*/true);
}

TEST(ProgramNames, PipelineStages) {
  RunArgs a = small_gpt2();
  a.gpus = "4";
  a.pipeline_parallel = "2";
  a.zero = "1";
  const EstimateOptions o = options_of(a);
  const int64_t micro = 1;
  ScheduleOptions s = schedule_options(o);
  s.micro_batches = static_cast<int>(o.batch / micro);
  const Graph g = build_graph(o, micro);
  const PipelineStages named = simulate_pipeline_stages(g, s, o.parallel, s.micro_batches, true, false);
  s.names = false;
  const PipelineStages bare = simulate_pipeline_stages(g, s, o.parallel, s.micro_batches, true, false);
  EXPECT_EQ(named.stage, bare.stage);
  EXPECT_EQ(named.stage_peak_bytes, bare.stage_peak_bytes);
  expect_same_but_names(named.program, bare.program, *named.graph);
}

// The evaluation (no names) against the named program of the same candidate: the same exact
// peak, the peak step's label as its op (rebuilt from Step::op), the same step time.
TEST(ProgramNames, EvaluationReportsTheNamedPeakOp) {
  int op_step_peaks = 0;  // peaks at a step whose label the evaluation rebuilt from its op
  for (bool zero3 : {false, true}) {
    RunArgs a = small_gpt2();
    if (zero3) a.zero = "3";
    const EstimateOptions o = options_of(a);
    PlanContext ctx(o, int64_t{1} << 50, CostModel(*gpu_spec(*o.gpu)));
    for (bool ckpt : {false, true}) {
      MemoryPlan plan;
      if (ckpt) plan.checkpoints = transformer_blocks(ctx.graph(2)).segments;
      const Candidate c{plan, 2};
      const Evaluation e = ctx.evaluate(c);
      const Program p = ctx.program(c);
      const SimResult sim = simulate(p);
      ASSERT_GE(sim.peak.step, 0);
      const Step& peak = p.steps[static_cast<size_t>(sim.peak.step)];
      EXPECT_EQ(e.exact_peak_bytes, sim.peak.bytes);
      EXPECT_EQ(e.peak_phase, peak.phase);
      EXPECT_EQ(e.peak_op, peak.label);
      EXPECT_FALSE(e.peak_op.empty());
      if (peak.op != kNone && peak.label == ctx.graph(2).op(peak.op).name) ++op_step_peaks;
      const IterationTime t = iteration_time(ctx.cost(), ctx.graph(2), p, plan, o.optimizer, o.iterations);
      EXPECT_DOUBLE_EQ(e.time.total_ms, t.total_ms);
    }
  }
  EXPECT_GT(op_step_peaks, 0);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
