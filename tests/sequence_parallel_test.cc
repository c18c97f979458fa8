// Megatron sequence parallelism (--sequence-parallel, frontends/zoo/sequence_parallel.h) in one
// rank's program: the layouts it refuses, Megatron's persistent all-gather buffer, and the
// per-layer saved bytes of Llama (zoo and Hugging Face config) against tensor parallelism alone.
// GPT-2's per-layer bytes against Korthikanti et al. are in megatron_activations_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "cli_runner.h"
#include "estimate/estimate.h"
#include "frontends/model_source.h"
#include "ir/builder.h"
#include "training/op_rules.h"
#include "sim/simulate.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::CliRun;
using testing::run_cli;

std::string hf_config(const std::string& dir, const std::string& name) {
  return std::string(HEADROOM_SOURCE_DIR) + "/" + dir + "/" + name + ".json";
}

EstimateOptions rank_options(const std::string& model, int64_t b, int64_t s, int64_t t, bool sp) {
  EstimateOptions o;
  o.model = model;
  o.batch = b;
  o.seq = s;
  o.precision = Precision::Bf16;
  o.keep_program = true;
  o.parallel.gpus = t;
  o.parallel.tensor_parallel = t;
  o.parallel.sequence_parallel = sp;
  select_frontend(o, ModelSourceOptions{});  // a config.json path: the Hugging Face frontend
  return o;
}

Estimate run(EstimateOptions o) {
  Result<Estimate> r = estimate(o);
  EXPECT_TRUE(r.ok()) << r.error();
  return r.ok() ? r.value() : Estimate{};
}

// Bytes of the buffers made by ops named `prefix`... still alive when the backward starts.
int64_t layer_saved_bytes(const EstimateOptions& o, const std::string& prefix) {
  Estimate e = run(o);
  const Program& p = e.program;
  int32_t at = -1;
  for (const Step& st : p.steps) {
    if (st.label == "loss.backward() seed") {
      at = st.first_event;
      break;
    }
  }
  EXPECT_GT(at, 0);
  Graph g = build_graph(o, o.batch);
  int64_t total = 0;
  for (BufferId id : live_after(p, at - 1)) {
    const Buffer& buf = p.buffers[static_cast<size_t>(id)];
    if (buf.op != kNone && g.op(buf.op).name.rfind(prefix, 0) == 0) total += buf.bytes;
  }
  return total;
}

TEST(SequenceParallel, LayoutsItDoesNotApplyToAreOneLineErrors) {
  const std::pair<std::string, std::string> cases[] = {
      {"gpt2 --gpus 2 --sequence-parallel", "needs --tensor-parallel T > 1"},
      {"gpt2 --gpus 2 --tensor-parallel 1 --sequence-parallel", "needs --tensor-parallel T > 1"},
      // 510 positions do not split over 4 ranks.
      {"gpt2 --seq 510 --gpus 4 --tensor-parallel 4 --sequence-parallel", "multiple of --tensor-parallel 4"},
      {"gpt2 --gpus 2 --tensor-parallel 2 --sequence-parallel --precision amp-bf16", "not through autocast"},
      {"gpt2 --gpus 2 --tensor-parallel 2 --sequence-parallel --mode infer", "--mode train"},
      {hf_config("data/hf-configs", "mixtral-8x7b") + " --seq 64 --gpus 8 --tensor-parallel 8 --sequence-parallel", "mixture-of-experts"},
      {"resnet18 --gpus 2 --tensor-parallel 2 --sequence-parallel", "Megatron split"},
  };
  for (const auto& [args, fragment] : cases) testing::expect_usage_error("estimate " + args, fragment);
}

TEST(SequenceParallel, ColumnParallelInputsShareOnePersistentGatherBuffer) {
  // gpt2, b = 4, s = 512, T = 2, bf16: every all-gather (c_attn, c_fc of 12 layers, lm_head)
  // gathers [4, 512, 768] into get_global_memory_buffer()'s "mpu" tensor: one buffer of
  // 4 * 512 * 768 * 2 = 3,145,728 bytes, made by the first and never freed.
  Estimate e = run(rank_options("gpt2", 4, 512, 2, true));
  int count = 0;
  for (const Buffer& b : e.program.buffers) {
    if (b.name.rfind("Megatron all-gather buffer", 0) != 0) continue;
    ++count;
    EXPECT_EQ(b.bytes, 3'145'728);
    EXPECT_EQ(b.category, Category::Workspaces);
  }
  EXPECT_EQ(count, 1);
  ASSERT_TRUE(e.per_gpu.has_value());
  EXPECT_TRUE(e.per_gpu->sequence_parallel);
  EXPECT_NE(e.per_gpu->layout.find("sequence-parallel"), std::string::npos) << e.per_gpu->layout;
}

// Llama (zoo), bf16, b = 2, s = 64, h = 256, T = 2: sequence parallelism shards what the two
// RMSNorms keep, and nothing else of the layer (the attention and MLP run on the gathered
// sequence as under tensor parallelism alone). Per RMSNorm (hidden.to(float32), pow(2),
// mean(-1), + eps, rsqrt, mul, .to(bf16), weight * h): the fp32 copy of the input 4 sbh (pow and
// mul save it), rsqrt's fp32 output 4 sb, the bf16 normalized tensor 2 sbh (the weight's mul
// saves it) and the norm's output 2 sbh (the q/k/v or gate/up linears save it; under sequence
// parallelism the all-gather keeps its shard). pow's fp32 output is not kept: on the CUDA
// profile mean.dim keeps only sizes (PyTorch 2.x, DeviceProfile::mean_keeps_input; with 1.13's
// MeanBackward1 it was 4 sbh more per norm, 393,728 here).
// Two norms: 16 sbh + 8 sb, of which a rank keeps 1/T:
//   sbh = 64 * 2 * 256 = 32,768, sb = 128: (524,288 + 1,024) * (1 - 1/2) = 262,656.
TEST(SequenceParallel, LlamaLayerKeepsItsNormsOnASequenceShard) {
  const std::string model = "llama:hidden=256,layers=3,heads=8,kv_heads=4,ffn=512,vocab=1000";
  const int64_t tp = layer_saved_bytes(rank_options(model, 2, 64, 2, false), "model.layers.1.");
  const int64_t sp = layer_saved_bytes(rank_options(model, 2, 64, 2, true), "model.layers.1.");
  EXPECT_EQ(tp - sp, 262'656) << "tp " << tp << ", sp " << sp;
}

// The Hugging Face Llama config (validation/hf-configs/tiny-llama-gqa.json: h = 256, 8 heads,
// 4 key/value heads, MLP 688), bf16, b = 2, s = 64, T = 2: the same 16 sbh + 8 sb per layer
// divided by T as the zoo's Llama: 262,656 bytes fewer per layer.
TEST(SequenceParallel, HuggingFaceDecoderLayerKeepsItsNormsOnASequenceShard) {
  const std::string model = hf_config("validation/hf-configs", "tiny-llama-gqa");
  const int64_t tp = layer_saved_bytes(rank_options(model, 2, 64, 2, false), "model.layers.1.");
  const int64_t sp = layer_saved_bytes(rank_options(model, 2, 64, 2, true), "model.layers.1.");
  EXPECT_EQ(tp - sp, 262'656) << "tp " << tp << ", sp " << sp;
}

TEST(SelectiveRecompute, CheckpointsTheEagerAttentionCoreOfEveryBlock) {
  // --checkpoint attention (Megatron's selective recomputation) needs an eager attention core in
  // every block: a Hugging Face config under its default SDPA kernel has none; with --attention
  // eager it runs. GPT-2's bytes are pinned in megatron_activations_test.cc.
  const std::string tiny = hf_config("validation/hf-configs", "tiny-llama-gqa");
  for (const std::string& args : {tiny + " --seq 64 --checkpoint attention", std::string("resnet18 --checkpoint attention")}) {
    testing::expect_usage_error("estimate " + args, "--checkpoint attention");
  }
  CliRun ok = run_cli("estimate " + tiny + " --seq 64 --attention eager --checkpoint attention --gpus 2 --tensor-parallel 2 --sequence-parallel");
  EXPECT_EQ(ok.code, 0) << ok.err;
}

TEST(SequenceParallel, CollectiveOpRules) {
  // [2, 4, 8] bf16 over 2 ranks along the sequence (axis 1): the full tensor 2*4*8*2 = 128 bytes,
  // a shard [2, 2, 8] 64 bytes.
  GraphBuilder b("collectives", DType::BF16);
  TensorId x = b.parameter("x", {2, 4, 8});  // anything that requires grad
  TensorId shard = b.reduce_scatter("rs", x, 1, 2);
  TensorId full = b.all_gather("ag", shard, 1, 2, /*into_buffer=*/true);
  b.mark_output(full);
  Graph g = b.finish();
  ASSERT_EQ(g.tensor(shard).bytes(), 64);
  ASSERT_EQ(g.tensor(full).shape, (std::vector<int64_t>{2, 4, 8}));
  const DeviceProfile cuda = DeviceProfile::cuda();
  // reduce_scatter_to_sequence_parallel_region: a new 64-byte shard, nothing saved; its backward
  // all-gathers the gradient into a new 128-byte tensor.
  RuleContext rs{g, g.op(0), cuda, true, true, {true}};
  ForwardPlan fr = forward_plan(rs);
  EXPECT_EQ(fr.output_alias, std::vector<int>{-1});
  EXPECT_FALSE(fr.into_gather_buffer);
  ASSERT_EQ(fr.events.size(), 1u);
  EXPECT_EQ(fr.events[0].kind, LocalEvent::Kind::AllocOutput);
  EXPECT_TRUE(fr.saved.empty());
  BackwardPlan br = backward_plan(rs, true);
  ASSERT_EQ(br.grads.size(), 1u);
  EXPECT_EQ(br.grads[0].kind, GradOut::Kind::New);
  EXPECT_EQ(br.grads[0].bytes, 128);
  // The column-parallel linear's all-gather: no allocation of its own (a view of Megatron's
  // buffer), the 64-byte shard saved for the re-gather; its backward reduce-scatters the
  // gradient into a new 64-byte shard.
  RuleContext ag{g, g.op(1), cuda, true, true, {true}};
  ForwardPlan fa = forward_plan(ag);
  EXPECT_TRUE(fa.into_gather_buffer);
  EXPECT_TRUE(fa.events.empty());
  ASSERT_EQ(fa.saved.size(), 1u);
  EXPECT_EQ(fa.saved[0].kind, Ref::Kind::Input);
  EXPECT_EQ(fa.saved[0].index, 0);
  BackwardPlan ba = backward_plan(ag, true);
  ASSERT_EQ(ba.grads.size(), 1u);
  EXPECT_EQ(ba.grads[0].kind, GradOut::Kind::New);
  EXPECT_EQ(ba.grads[0].bytes, 64);
}

TEST(SequenceParallel, JsonLayoutSaysSo) {
  CliRun r = run_cli("estimate gpt2 --seq 64 --precision bf16 --gpus 4 --tensor-parallel 2 --sequence-parallel --zero 1 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"sequence_parallel\": true"), std::string::npos) << r.out.substr(0, 2000);
  EXPECT_NE(r.out.find("tensor-parallel 2 (sequence-parallel) x data-parallel 2"), std::string::npos);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
