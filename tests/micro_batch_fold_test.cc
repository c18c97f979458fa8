// schedule/micro_batch_fold.h: the program build_program() writes for k > 4 micro-batches from
// the interpreter's first four is the program the interpreter builds for all k, buffer for
// buffer, event for event and step for step, under every engine and recompute the layout search
// tries (and the single-GPU loops); and it is folded there, not rebuilt.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "estimate/estimate.h"
#include "estimate/parallel.h"
#include "options/run_args.h"
#include "schedule/interpreter.h"
#include "schedule/micro_batch_fold.h"
#include "schedule/transformer_blocks.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

// gpt2:layers=3, 8 sequences of 64 per GPU, bf16 on an A100, one sequence per micro-batch: 8
// micro-batches, 4 of them written out by the fold.
RunArgs small_gpt2(const std::string& gpus = "2") {
  RunArgs a;
  a.model = "gpt2:layers=3";
  a.batch = "8";
  a.seq = "64";
  a.gpu = "A100-SXM4-40GB";
  a.precision = "bf16";
  a.gpus = gpus;
  return a;
}

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

class MicroBatchFold : public testing::TestWithParam<FoldCase> {};

TEST_P(MicroBatchFold, IsTheProgramOfEveryMicroBatch) {
  const FoldCase& c = GetParam();
  Result<EstimateOptions> parsed = to_estimate_options(c.args, RunCommand::Estimate);
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  const EstimateOptions& o = parsed.value();
  const Graph g = build_graph(o, c.micro);
  ScheduleOptions s = schedule_options(o);
  s.micro_batches = static_cast<int>(o.batch / c.micro);
  ASSERT_GT(s.micro_batches, kFoldedMicroBatches);
  if (c.checkpoint_blocks) s.plan.checkpoints = transformer_blocks(g).segments;
  s.plan.checkpoint_impl = o.plan.checkpoint_impl;
  resolve_fsdp_wrap(o.parallel, g, s.sharding);

  const Program every = schedule_detail::Interpreter(g, s).run();
  ScheduleOptions four_options = s;
  four_options.micro_batches = kFoldedMicroBatches;
  const std::optional<Program> folded = expand_micro_batches(schedule_detail::Interpreter(g, four_options).run(), s.micro_batches);
  ASSERT_TRUE(folded.has_value()) << "not folded";
  const Program built = build_program(g, s);  // what every caller gets

  for (const Program* p : {&*folded, &built}) {
    ASSERT_EQ(p->buffers.size(), every.buffers.size());
    ASSERT_EQ(p->events.size(), every.events.size());
    ASSERT_EQ(p->steps.size(), every.steps.size());
    ASSERT_EQ(p->host.size(), every.host.size());
    EXPECT_TRUE(p->transfers.empty());
    for (size_t i = 0; i < every.buffers.size(); ++i) {
      const Buffer &a = every.buffers[i], &b = p->buffers[i];
      ASSERT_TRUE(a.bytes == b.bytes && a.category == b.category && a.op == b.op && a.name == b.name) << "buffer " << i << ": " << a.name << " / " << b.name;
    }
    for (size_t i = 0; i < every.events.size(); ++i) {
      const Event &a = every.events[i], &b = p->events[i];
      ASSERT_TRUE(a.kind == b.kind && a.category == b.category && a.buffer == b.buffer) << "event " << i;
    }
    for (size_t i = 0; i < every.steps.size(); ++i) {
      const Step &a = every.steps[i], &b = p->steps[i];
      ASSERT_TRUE(a.phase == b.phase && a.iteration == b.iteration && a.micro_batch == b.micro_batch && a.op == b.op && a.label == b.label &&
                  a.first_event == b.first_event && a.end_event == b.end_event && a.recompute == b.recompute)
          << "step " << i << ": " << a.label << " / " << b.label;
      ASSERT_TRUE(a.update.elements == b.update.elements && a.update.bytes == b.update.bytes && a.update.tensors == b.update.tensors &&
                  a.update.kernels == b.update.kernels && a.update.on_host == b.update.on_host)
          << "step " << i;
    }
    for (size_t i = 0; i < every.host.size(); ++i) {
      EXPECT_EQ(p->host[i].bytes, every.host[i].bytes);
      EXPECT_EQ(p->host[i].name, every.host[i].name);
    }
    EXPECT_EQ(p->context_use.forward, every.context_use.forward);
    EXPECT_EQ(p->context_use.backward, every.context_use.backward);
  }
  // The last micro-batch of each iteration is numbered k.
  int last = 0;
  for (const Step& st : built.steps) last = std::max(last, st.micro_batch);
  EXPECT_EQ(last, s.micro_batches);
}

INSTANTIATE_TEST_SUITE_P(Engines, MicroBatchFold, testing::ValuesIn(fold_cases()),
                         [](const testing::TestParamInfo<FoldCase>& i) { return i.param.name; });

// Where micro-batch 3 is not self-contained, nothing is folded: a program whose third micro-batch
// frees a buffer of the second.
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
  step(Phase::Forward, 1, 2, {{K::Alloc, Category::Activations, 1}});
  std::vector<Event> third = {{K::Alloc, Category::Activations, 2}, {K::Free, Category::Activations, 2}};
  if (third_frees_the_seconds_buffer) third.insert(third.begin(), {K::Free, Category::Activations, 1});
  step(Phase::Forward, 1, 3, third);
  step(Phase::Forward, 1, 4, {});
  validate_program(p);
  return p;
}

TEST(MicroBatchFoldRefusal, AMicroBatchThatFreesAnEarlierOnesBufferIsNotFolded) {
  EXPECT_FALSE(expand_micro_batches(four_micro_batches(true), 6).has_value());
  // Without that free it is folded: the third micro-batch's buffer gets a copy for each of
  // micro-batches 4 and 5, and the last is numbered 6.
  const std::optional<Program> folded = expand_micro_batches(four_micro_batches(false), 6);
  ASSERT_TRUE(folded.has_value());
  validate_program(*folded);
  ASSERT_EQ(folded->buffers.size(), 5u);
  ASSERT_EQ(folded->steps.size(), 7u);
  EXPECT_EQ(folded->steps[4].micro_batch, 4);
  EXPECT_EQ(folded->steps[5].micro_batch, 5);
  EXPECT_EQ(folded->steps[6].micro_batch, 6);
  EXPECT_EQ(folded->events[folded->steps[4].first_event].buffer, 3);
  EXPECT_EQ(folded->events[folded->steps[5].first_event].buffer, 4);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
