// schedule/micro_batch_fold.h: the program build_program() writes for k micro-batches from the
// interpreter's first few is the program the interpreter builds for all k, buffer for buffer,
// event for event and step for step, under every engine, recompute and pipeline schedule the
// layout search tries (and the single-GPU loops); and it is folded there, not rebuilt.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "estimate/estimate.h"
#include "estimate/parallel.h"
#include "options/run_args.h"
#include "estimate/pipeline_estimate.h"
#include "schedule/interpreter.h"
#include "schedule/pipeline_plan.h"
#include "schedule/pipeline_split.h"
#include "schedule/micro_batch_fold.h"
#include "schedule/transformer_blocks.h"
#include "small_gpt2_args.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

// gpt2:layers=3, 8 sequences of 64 per GPU, bf16 on an A100, one sequence per micro-batch: 8
// micro-batches, 4 of them written out by the fold.
RunArgs small_gpt2(const std::string& gpus = "2") { return testing::small_gpt2_run(3, gpus); }

struct FoldCase {
  std::string name;
  RunArgs args;
  bool checkpoint_blocks = false;
  int64_t micro = 1;
};

void PrintTo(const FoldCase& c, std::ostream* os) { *os << c.name; }

std::vector<FoldCase> fold_cases() {
  std::vector<FoldCase> v;
  auto add = [&](const std::string& name, RunArgs a, bool ckpt = false, int64_t micro = 1) { v.push_back({name, std::move(a), ckpt, micro}); };
  add("one_gpu_adam", small_gpt2("1"));
  {
    RunArgs a = small_gpt2("1");
    a.optimizer = "sgd";
    a.zero_grad = "zeros";
    a.precision = "fp32";
    add("one_gpu_sgd_zeros", a);
  }
  for (const char* amp : {"amp-fp16", "amp-bf16"}) {
    RunArgs a = small_gpt2("1");
    a.precision = amp;  // autocast's weight casts each forward; fp16's GradScaler
    add(amp[4] == 'f' ? "one_gpu_amp_fp16" : "one_gpu_amp_bf16", a);
  }
  add("ddp", small_gpt2());
  add("ddp_checkpointed", small_gpt2(), true);
  add("ddp_five_micro_batches_of_two", [] {
    RunArgs a = small_gpt2();
    a.batch = "10";
    return a;
  }(), false, 2);
  for (const char* z : {"1", "2", "3"}) {
    RunArgs a = small_gpt2();
    a.zero = z;
    add(std::string("zero") + z, a);
    add(std::string("zero") + z + "_checkpointed", a, true);
  }
  {
    RunArgs a = small_gpt2();
    a.zero = "2";
    a.offload_optimizer = "cpu";
    add("zero2_offload", a);
  }
  {
    RunArgs a = small_gpt2();
    a.zero = "3";
    a.offload_optimizer = "cpu";
    a.offload_params = "cpu";
    add("zero3_offload", a);
  }
  for (const char* f : {"full", "grad-op"}) {
    RunArgs a = small_gpt2();
    a.fsdp = f;
    add(std::string("fsdp_") + (f[0] == 'f' ? "full" : "grad_op"), a);
    add(std::string("fsdp_") + (f[0] == 'f' ? "full" : "grad_op") + "_checkpointed", a, true);
  }
  {
    RunArgs a = small_gpt2();
    a.checkpoint_impl = "non-reentrant";
    a.checkpoints = {"blocks"};  // --checkpoint-impl applies to a --checkpoint
    add("ddp_non_reentrant", a, true);
  }
  for (bool sp : {false, true}) {
    RunArgs a = small_gpt2();
    a.tensor_parallel = "2";
    a.sequence_parallel = sp;
    add(sp ? "tp2_sp" : "tp2", a);
    add(sp ? "tp2_sp_checkpointed" : "tp2_checkpointed", a, true);
    RunArgs m = small_gpt2("4");
    m.tensor_parallel = "2";
    m.sequence_parallel = sp;
    m.megatron = true;
    m.zero = "1";
    add(sp ? "megatron_tp2_sp_distributed_optimizer" : "megatron_tp2_distributed_optimizer", m);
  }
  return v;
}

// `p` is `every`, buffer for buffer, event for event and step for step; its last micro-batch
// numbered as every's.
void expect_same_program(const Program& p, const Program& every) {
  ASSERT_EQ(p.buffers.size(), every.buffers.size());
  ASSERT_EQ(p.events.size(), every.events.size());
  ASSERT_EQ(p.steps.size(), every.steps.size());
  ASSERT_EQ(p.host.size(), every.host.size());
  EXPECT_TRUE(p.transfers.empty());
  for (size_t i = 0; i < every.buffers.size(); ++i) {
    const Buffer &a = every.buffers[i], &b = p.buffers[i];
    ASSERT_TRUE(a.bytes == b.bytes && a.category == b.category && a.op == b.op && a.name == b.name) << "buffer " << i << ": " << a.name << " / " << b.name;
  }
  for (size_t i = 0; i < every.events.size(); ++i) {
    const Event &a = every.events[i], &b = p.events[i];
    ASSERT_TRUE(a.kind == b.kind && a.category == b.category && a.buffer == b.buffer) << "event " << i;
  }
  int last = 0;
  for (size_t i = 0; i < every.steps.size(); ++i) {
    const Step &a = every.steps[i], &b = p.steps[i];
    ASSERT_TRUE(a.phase == b.phase && a.iteration == b.iteration && a.micro_batch == b.micro_batch && a.op == b.op && a.label == b.label &&
                a.first_event == b.first_event && a.end_event == b.end_event && a.recompute == b.recompute)
        << "step " << i << ": " << a.label << " / " << b.label;
    ASSERT_TRUE(a.update.elements == b.update.elements && a.update.bytes == b.update.bytes && a.update.tensors == b.update.tensors &&
                a.update.kernels == b.update.kernels && a.update.on_host == b.update.on_host)
        << "step " << i;
    last = std::max(last, b.micro_batch);
  }
  EXPECT_GT(last, kFoldTemplateMicroBatch + 1);
  for (size_t i = 0; i < every.host.size(); ++i) {
    EXPECT_EQ(p.host[i].bytes, every.host[i].bytes);
    EXPECT_EQ(p.host[i].name, every.host[i].name);
  }
  EXPECT_EQ(p.context_use.forward, every.context_use.forward);
  EXPECT_EQ(p.context_use.backward, every.context_use.backward);
}

class MicroBatchFold : public ::testing::TestWithParam<FoldCase> {};

TEST_P(MicroBatchFold, IsTheProgramOfEveryMicroBatch) {
  const FoldCase& c = GetParam();
  Result<EstimateOptions> parsed = to_estimate_options(c.args, RunCommand::Estimate);
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  const EstimateOptions& o = parsed.value();
  const Graph g = build_graph(o, c.micro);
  ScheduleOptions s = schedule_options(o);
  s.micro_batches = static_cast<int>(o.batch / c.micro);
  ASSERT_GT(s.micro_batches, kFoldTemplateMicroBatch + 1);
  if (c.checkpoint_blocks) s.plan.checkpoints = transformer_blocks(g).segments;
  s.plan.checkpoint_impl = o.plan.checkpoint_impl;
  resolve_fsdp_wrap(o.parallel, g, s.sharding);

  const Program every = schedule_detail::Interpreter(g, s).run();
  ScheduleOptions four_options = s;
  four_options.micro_batches = kFoldTemplateMicroBatch + 1;
  const std::optional<Program> folded = expand_micro_batches(schedule_detail::Interpreter(g, four_options).run(), accumulation_order(4), 4,
                                                             accumulation_order(s.micro_batches), s.micro_batches);
  ASSERT_TRUE(folded.has_value()) << "not folded";
  expect_same_program(*folded, every);
  expect_same_program(build_program(g, s), every);  // what every caller gets
}

INSTANTIATE_TEST_SUITE_P(Engines, MicroBatchFold, ::testing::ValuesIn(fold_cases()),
                         [](const ::testing::TestParamInfo<FoldCase>& i) { return i.param.name; });

// Pipeline stages: the stage's program under each schedule against the interpreter over every
// micro-batch (gpt2:layers=4 over P = 2, one sequence per micro-batch).
struct PipelineFoldCase {
  std::string name;
  PipelineScheduleKind kind;
  int stages, stage, micro_batches, virtual_stages;
  bool checkpoint_blocks;
};

void PrintTo(const PipelineFoldCase& c, std::ostream* os) { *os << c.name; }

class PipelineFold : public ::testing::TestWithParam<PipelineFoldCase> {};

TEST_P(PipelineFold, IsTheStageProgramOfEveryMicroBatch) {
  const PipelineFoldCase& c = GetParam();
  RunArgs a = small_gpt2("4");
  a.model = "gpt2:layers=4";
  a.batch = std::to_string(c.micro_batches);
  a.micro_batch = "1";
  a.pipeline_parallel = std::to_string(c.stages);
  a.zero = "1";
  Result<EstimateOptions> parsed = to_estimate_options(a, RunCommand::Estimate);
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  const EstimateOptions& o = parsed.value();
  const Graph model = build_graph(o, 1);
  ScheduleOptions base = schedule_options(o);
  if (c.checkpoint_blocks) base.plan.checkpoints = transformer_blocks(model).segments;
  // As pipeline_stage_program() sets the stage up.
  const RankGraph rank = pipeline_rank_graph(model, c.stages, c.virtual_stages, c.stage);
  ScheduleOptions s = base;
  s.micro_batches = c.micro_batches;
  s.pipeline.active = true;
  s.pipeline.order = pipeline_order(c.kind, c.stages, c.stage, c.micro_batches, static_cast<int>(rank.chunks.size()));
  s.pipeline.chunks = rank.chunks;
  s.pipeline.kind = c.kind;
  s.pipeline.stages = c.stages;
  s.pipeline.stage = c.stage;
  s.plan = plan_for_rank(model, rank.graph, base.plan);
  const Program every = schedule_detail::Interpreter(rank.graph, s).run();
  // Folded from four micro-batches (both interleaved cases have P = 2, so four is a multiple).
  ScheduleOptions few = s;
  few.micro_batches = kFoldTemplateMicroBatch + 1;
  few.pipeline.order = pipeline_order(c.kind, c.stages, c.stage, few.micro_batches, static_cast<int>(rank.chunks.size()));
  const std::optional<Program> folded = expand_micro_batches(schedule_detail::Interpreter(rank.graph, few).run(), few.pipeline.order, few.micro_batches,
                                                             s.pipeline.order, c.micro_batches);
  ASSERT_TRUE(folded.has_value()) << "not folded";
  expect_same_program(*folded, every);
  expect_same_program(build_program(rank.graph, s), every);
  // And pipeline_stage_program, which the estimate and the layout search call, builds it so.
  const PipelineStageRun run = pipeline_stage_program(model, base, c.kind, c.stages, c.stage, c.micro_batches, c.virtual_stages);
  expect_same_program(run.program, every);
}

INSTANTIATE_TEST_SUITE_P(Schedules, PipelineFold,
                         ::testing::Values(PipelineFoldCase{"one_f_one_b_stage0", PipelineScheduleKind::OneFOneB, 2, 0, 8, 1, false},
                                         PipelineFoldCase{"one_f_one_b_stage1", PipelineScheduleKind::OneFOneB, 2, 1, 8, 1, false},
                                         PipelineFoldCase{"one_f_one_b_stage0_checkpointed", PipelineScheduleKind::OneFOneB, 2, 0, 7, 1, true},
                                         PipelineFoldCase{"one_f_one_b_four_stages", PipelineScheduleKind::OneFOneB, 4, 0, 9, 1, false},
                                         PipelineFoldCase{"gpipe_stage0", PipelineScheduleKind::GPipe, 2, 0, 6, 1, false},
                                         PipelineFoldCase{"interleaved_stage0", PipelineScheduleKind::Interleaved, 2, 0, 8, 2, false},
                                         PipelineFoldCase{"interleaved_stage1_checkpointed", PipelineScheduleKind::Interleaved, 2, 1, 10, 2, true}),
                         [](const ::testing::TestParamInfo<PipelineFoldCase>& i) { return i.param.name; });

// Where micro-batch 3's actions use another micro-batch's buffer, nothing is folded: a program
// whose third backward frees a buffer of the second micro-batch.
Program four_micro_batches(bool third_frees_the_seconds_buffer) {
  Program p;
  p.buffers = {{64, Category::Weights, "w", kNone}, {16, Category::Activations, "a2", kNone}, {16, Category::Activations, "a3", kNone}};
  auto step = [&](Phase ph, int it, int mb, std::vector<Event> ev) {
    Step s;
    s.phase = ph;
    s.iteration = it;
    s.micro_batch = mb;
    s.first_event = static_cast<int32_t>(p.events.size());
    for (const Event& e : ev) p.events.push_back(e);
    s.end_event = static_cast<int32_t>(p.events.size());
    p.steps.push_back(s);
  };
  using K = Event::Kind;
  step(Phase::Setup, 0, 0, {{K::Alloc, Category::Weights, 0}});
  step(Phase::Forward, 1, 1, {});
  step(Phase::Backward, 1, 1, {});
  step(Phase::Forward, 1, 2, {{K::Alloc, Category::Activations, 1}});
  step(Phase::Backward, 1, 2, {});
  step(Phase::Forward, 1, 3, {{K::Alloc, Category::Activations, 2}});
  std::vector<Event> third = {{K::Free, Category::Activations, 2}};
  if (third_frees_the_seconds_buffer) third.push_back({K::Free, Category::Activations, 1});
  step(Phase::Backward, 1, 3, third);
  step(Phase::Forward, 1, 4, {});
  step(Phase::Backward, 1, 4, {});
  validate_program(p);
  return p;
}

TEST(MicroBatchFoldRefusal, AMicroBatchThatFreesAnEarlierOnesBufferIsNotFolded) {
  EXPECT_FALSE(expand_micro_batches(four_micro_batches(true), accumulation_order(4), 4, accumulation_order(6), 6).has_value());
  // Without that free it is folded: micro-batches 3, 4 and 5 each get their copy of the third's
  // buffer, and the last is numbered 6.
  const std::optional<Program> folded = expand_micro_batches(four_micro_batches(false), accumulation_order(4), 4, accumulation_order(6), 6);
  ASSERT_TRUE(folded.has_value());
  validate_program(*folded);
  ASSERT_EQ(folded->buffers.size(), 5u);
  ASSERT_EQ(folded->steps.size(), 13u);
  for (int m = 1; m <= 6; ++m) {
    EXPECT_EQ(folded->steps[static_cast<size_t>(2 * m - 1)].micro_batch, m);
    EXPECT_EQ(folded->steps[static_cast<size_t>(2 * m)].micro_batch, m);
  }
  EXPECT_EQ(folded->events[static_cast<size_t>(folded->steps[5].first_event)].buffer, 2);   // micro-batch 3's forward
  EXPECT_EQ(folded->events[static_cast<size_t>(folded->steps[7].first_event)].buffer, 3);   // micro-batch 4's
  EXPECT_EQ(folded->events[static_cast<size_t>(folded->steps[9].first_event)].buffer, 4);   // micro-batch 5's
  EXPECT_EQ(folded->steps[11].end_event, folded->steps[11].first_event);                     // micro-batch 6: the fourth's, empty
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
