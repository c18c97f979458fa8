// ZeRO / FSDP: one rank's simulated program against the ZeRO paper's Figure 1 and DeepSpeed's
// own estimators (docs/distributed.md). Every expected number is derived in the comment from the
// parameter count Psi and the data-parallel degree N; nothing below is read off a run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "estimate/estimate.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::CliRun;
using testing::run_cli;

EstimateOptions layout(const std::string& model, int64_t gpus, std::optional<int> zero,
                       std::optional<FsdpStrategy> fsdp = std::nullopt, Precision p = Precision::Bf16) {
  EstimateOptions o;
  o.model = model;
  o.batch = 1;
  o.precision = p;
  o.parallel.gpus = gpus;
  o.parallel.zero_stage = zero;
  o.parallel.fsdp = fsdp;
  return o;
}

PerGpu per_gpu(const EstimateOptions& o) {
  Result<Estimate> r = estimate(o);
  EXPECT_TRUE(r.ok()) << r.error();
  if (!r.ok() || !r.value().per_gpu) return {};
  return *r.value().per_gpu;
}

// "31.4 GB" as the paper prints it: GB = 1e9 bytes, three significant digits (two below 10).
std::string paper_gb(int64_t bytes) {
  const double gb = static_cast<double>(bytes) / 1e9;
  char buf[32];
  std::snprintf(buf, sizeof buf, gb >= 100 ? "%.0f" : gb >= 10 ? "%.1f" : "%.1f", gb);
  return buf;
}

// mlp:layers=447,dim=4096: Psi = 447 * (4096*4096 + 4096) = 447 * 16,781,312 = 7,501,246,464
// parameters (the paper's "7.5B"; no zoo model has exactly 7.5e9: L*(D*D+D) = 7.5e9 has no
// solution with D > 24). Psi / 64 = 117,206,976 exactly, so every partition is exact.
constexpr int64_t kPsi = 7501246464;
constexpr int64_t kN = 64;
const char* kPaperModel = "mlp:layers=447,dim=4096";

TEST(ZeroPaperFigure1, BaselineSixteenBytesPerParameter) {
  // DeepSpeed without partitioning, bf16: parameters 2 Psi, gradients 2 Psi, fp32 master 4 Psi,
  // Adam moments 8 Psi -> 16 Psi = 120,019,943,424 bytes = "120 GB".
  PerGpu g = per_gpu(layout(kPaperModel, kN, 0));
  EXPECT_EQ(g.model_states_bytes, 16 * kPsi);
  EXPECT_EQ(g.model_states_bytes, 120019943424);
  EXPECT_EQ(paper_gb(g.model_states_bytes), "120");
}

TEST(ZeroPaperFigure1, OptimizerStatePartitioning) {
  // Pos: 2 Psi + 2 Psi + 12 Psi / N = 15,002,492,928 * 2 + 12 * 117,206,976
  //    = 30,004,985,856 + 1,406,483,712 = 31,411,469,568 bytes = "31.4 GB".
  PerGpu g = per_gpu(layout(kPaperModel, kN, 1));
  EXPECT_EQ(g.model_states_bytes, 4 * kPsi + 12 * (kPsi / kN));
  EXPECT_EQ(g.model_states_bytes, 31411469568);
  EXPECT_EQ(paper_gb(g.model_states_bytes), "31.4");
}

TEST(ZeroPaperFigure1, PlusGradientPartitioning) {
  // Pos+g: 2 Psi + (2 + 12) Psi / N = 15,002,492,928 + 14 * 117,206,976
  //      = 15,002,492,928 + 1,640,897,664 = 16,643,390,592 bytes = "16.6 GB".
  PerGpu g = per_gpu(layout(kPaperModel, kN, 2));
  EXPECT_EQ(g.model_states_bytes, 2 * kPsi + 14 * (kPsi / kN));
  EXPECT_EQ(g.model_states_bytes, 16643390592);
  EXPECT_EQ(paper_gb(g.model_states_bytes), "16.6");
}

TEST(ZeroPaperFigure1, PlusParameterPartitioning) {
  // Pos+g+p: (2 + 2 + 12) Psi / N = 16 * 117,206,976 = 1,875,311,616 bytes = "1.9 GB".
  PerGpu g = per_gpu(layout(kPaperModel, kN, 3));
  EXPECT_EQ(g.model_states_bytes, 16 * (kPsi / kN));
  EXPECT_EQ(g.model_states_bytes, 1875311616);
  EXPECT_EQ(paper_gb(g.model_states_bytes), "1.9");
}

TEST(ZeroPaperFigure1, FsdpFullShardHoldsTheSameSixteenBytesOverN) {
  // FSDP FULL_SHARD with MixedPrecision(bf16): fp32 flat shards 4 Psi/N, fp32 gradient shards
  // 4 Psi/N, Adam moments 8 Psi/N (= 16 Psi/N, as DeepSpeed's stage 3). torch.optim.Adam's `step`
  // per flat parameter (one per layer: the Linear's weight and bias, read by one op, are one
  // FlatParameter under --fsdp-wrap param; 4,096^2 + 4,096 = 16,781,312 elements, 262,208 per
  // rank, no padding) is a CPU tensor, torch.tensor(0.): no device bytes.
  PerGpu g = per_gpu(layout(kPaperModel, kN, std::nullopt, FsdpStrategy::Full));
  EXPECT_EQ(g.model_states_bytes, 16 * (kPsi / kN));
}

// DeepSpeed's estimators (runtime/zero/stage_1_and_2.py estimate_zero2_model_states_mem_needs
// and stage3.py estimate_zero3_model_states_mem_needs, without offload) count
//   ZeRO-2: 4 Psi + int(16 Psi / N)           (16-bit params and grads in full; fp32 master,
//                                              moments and fp32 gradient partition over N)
//   ZeRO-3: 4 L + int(18 Psi / N)             (L: the largest layer's parameters)
// The simulation holds, when the step begins, the states below; during the step it adds the
// fp32 gradient partition 4 Psi/N (get_flat_partition), freed after it. So:
//   ZeRO-2: estimator - (states + 4 Psi/N) = 4 Psi + 16 Psi/N - (2 Psi + 18 Psi/N)
//                                           = 2 Psi - 2 Psi/N: the estimator keeps a full 16-bit
//           gradient, the engine reduces it in buckets into grads_in_partition (2 Psi/N).
//   ZeRO-3: estimator - 4 L - (states + 4 Psi/N) = 18 Psi/N - 20 Psi/N = -2 Psi/N: the estimator
//           leaves out the 16-bit grads_in_partition the engine keeps until the step.
struct EstimatorCase {
  const char* model;
  int64_t gpus;
};

// ctest names each instance by its printed parameter (the struct's bytes hold a pointer).
void PrintTo(const EstimatorCase& c, std::ostream* os) { *os << c.model << "_on_" << c.gpus; }

int64_t zero2_estimator(int64_t psi, int64_t n) { return 4 * psi + static_cast<int64_t>(16.0 * static_cast<double>(psi) / static_cast<double>(n)); }
int64_t zero3_estimator_without_layer(int64_t psi, int64_t n) { return static_cast<int64_t>(18.0 * static_cast<double>(psi) / static_cast<double>(n)); }

// The case's model under ZeRO `stage` on its GPUs (sequence models at seq 128).
Result<Estimate> estimate_case(const EstimatorCase& c, int stage) {
  EstimateOptions o = layout(c.model, c.gpus, stage);
  if (std::string(c.model).rfind("mlp", 0) != 0) o.seq = 128;
  return estimate(o);
}

class DeepSpeedEstimators : public ::testing::TestWithParam<EstimatorCase> {};

TEST_P(DeepSpeedEstimators, Zero2DiffersByTheFullSixteenBitGradient) {
  const EstimatorCase c = GetParam();
  Result<Estimate> r = estimate_case(c, 2);
  ASSERT_TRUE(r.ok()) << r.error();
  const Estimate& e = r.value();
  const int64_t psi = e.parameter_count;
  ASSERT_EQ(psi % c.gpus, 0) << "the cases are chosen so every partition is exact";
  // Module buffers (GPT-2's causal masks, Llama's rotary caches) are states every rank keeps in
  // full; DeepSpeed's estimators count parameters only.
  const int64_t buffers = e.weights_bytes - 2 * psi;
  const int64_t states = e.per_gpu->model_states_bytes - buffers;
  EXPECT_EQ(states, 2 * psi + 14 * (psi / c.gpus));
  EXPECT_EQ(zero2_estimator(psi, c.gpus) - (states + 4 * (psi / c.gpus)), 2 * psi - 2 * (psi / c.gpus));
}

TEST_P(DeepSpeedEstimators, Zero3DiffersByTheSixteenBitGradientPartition) {
  const EstimatorCase c = GetParam();
  Result<Estimate> r = estimate_case(c, 3);
  ASSERT_TRUE(r.ok()) << r.error();
  const Estimate& e = r.value();
  const int64_t psi = e.parameter_count;
  const int64_t buffers = e.weights_bytes - 2 * psi;
  const int64_t states = e.per_gpu->model_states_bytes - buffers;
  // Per-tensor partitions: exact when every parameter's size divides by N (true for these).
  EXPECT_EQ(states, 16 * (psi / c.gpus));
  EXPECT_EQ(zero3_estimator_without_layer(psi, c.gpus) - (states + 4 * (psi / c.gpus)), -2 * (psi / c.gpus));
}

// mlp 7.5B on 64 GPUs; GPT-2 small (124,439,808 parameters = 8 * 15,554,976) on 8; Llama-2-7B
// (6,738,415,616 = 8 * 842,301,952) on 8.
INSTANTIATE_TEST_SUITE_P(ThreeModels, DeepSpeedEstimators,
                         ::testing::Values(EstimatorCase{"mlp:layers=447,dim=4096", 64}, EstimatorCase{"gpt2", 8},
                                           EstimatorCase{"llama:preset=llama-2-7b", 8}));

TEST(Sharding, DataParallelIsTheSingleGpuProgramPlusDdpBuckets) {
  // DDP keeps a full replica and the Reducer's buckets beside param.grad: mlp:layers=4,dim=256 in
  // fp32 has 263,168 trainable parameters, 1,052,672 bytes of buckets (one at construction, the
  // rebuilt ones from the second forward: the same bytes). On the CPU's exact heap the rank's
  // peak is the single process's plus those bytes (measured: validation/measured_distributed.json).
  EstimateOptions one;
  one.model = "mlp:layers=4,dim=256";
  one.batch = 8;
  one.device = "cpu";
  EstimateOptions four = one;
  four.parallel.gpus = 4;
  four.keep_program = true;
  Result<Estimate> a = estimate(one), b = estimate(four);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(b.value().peak_bytes - a.value().peak_bytes, 1052672);
  EXPECT_FALSE(a.value().per_gpu.has_value());
  ASSERT_TRUE(b.value().per_gpu.has_value());
  EXPECT_EQ(b.value().per_gpu->peak_bytes, b.value().peak_bytes);
  int64_t first = 0, rebuilt = 0;
  for (const Step& st : b.value().program.steps) {
    for (int32_t i = st.first_event; i < st.end_event; ++i) {
      const Event& ev = b.value().program.events[static_cast<size_t>(i)];
      const Buffer& buf = b.value().program.buffers[static_cast<size_t>(ev.buffer)];
      if (ev.kind != Event::Kind::Alloc || buf.name.rfind("DDP bucket", 0) != 0) continue;
      (st.phase == Phase::Setup ? first : rebuilt) += buf.bytes;
    }
  }
  EXPECT_EQ(first, 1052672);
  EXPECT_EQ(rebuilt, 1052672);
}

// The largest number of bytes of "(gathered)" buffers alive at once, and whether any is alive
// when the forward ends.
struct Gathered {
  int64_t max_bytes = 0;
  int64_t at_forward_end = 0;
};
Gathered gathered(const Program& p) {
  Gathered g;
  int64_t live = 0;
  for (const Step& st : p.steps) {
    for (int32_t i = st.first_event; i < st.end_event; ++i) {
      const Event& ev = p.events[static_cast<size_t>(i)];
      const Buffer& b = p.buffers[static_cast<size_t>(ev.buffer)];
      if (b.name.find("(gathered)") == std::string::npos || ev.kind == Event::Kind::Retag) continue;
      live += ev.kind == Event::Kind::Alloc ? b.bytes : -b.bytes;
      g.max_bytes = std::max(g.max_bytes, live);
    }
    if (st.phase == Phase::Backward && st.label == "loss.backward() seed" && st.iteration == 1) g.at_forward_end = live;
  }
  return g;
}

TEST(Sharding, StageThreeGathersOneUnitAndPrefetchesTheNext) {
  // mlp:layers=4,dim=256 in bf16: one Linear's full parameters are 256*256*2 + 256*2 = 131,584
  // bytes. DeepSpeed prefetches the next op's parameters while one computes: at most two
  // Linears (263,168 bytes) are gathered at once, and none between the forward and backward.
  EstimateOptions o = layout("mlp:layers=4,dim=256", 4, 3);
  o.keep_program = true;
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  Gathered g = gathered(r.value().program);
  EXPECT_EQ(g.max_bytes, 2 * 131584);
  EXPECT_EQ(g.at_forward_end, 0);
}

TEST(Sharding, FsdpShardGradOpKeepsTheForwardsGatheredParameters) {
  // SHARD_GRAD_OP does not reshard after the forward: all four Linears, 4 * 131,584 = 526,336
  // bytes, are alive when the backward starts; FULL_SHARD frees each after its forward.
  EstimateOptions o = layout("mlp:layers=4,dim=256", 4, std::nullopt, FsdpStrategy::GradOp);
  o.keep_program = true;
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(gathered(r.value().program).at_forward_end, 4 * 131584);
  o.parallel.fsdp = FsdpStrategy::Full;
  r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(gathered(r.value().program).at_forward_end, 0);
}

TEST(Sharding, DeepSpeedStageTwoBucketIsReduceBucketSize) {
  // The ipg bucket is torch.empty(reduce_bucket_size) in bf16: 5e8 * 2 = 1e9 bytes by default,
  // so a small model's rank peaks at least there; --reduce-bucket-size 1000 makes it 2,000.
  EstimateOptions o = layout("mlp:layers=4,dim=256", 4, 2);
  Result<Estimate> big = estimate(o);
  o.parallel.reduce_bucket_elements = 1000;
  Result<Estimate> small = estimate(o);
  ASSERT_TRUE(big.ok() && small.ok());
  EXPECT_GE(big.value().peak_bytes, 1000000000);
  EXPECT_EQ(big.value().peak_bytes - small.value().peak_bytes, 1000000000 - 2000);
}

TEST(ShardingCli, TensorParallelLayoutErrors) {
  // gpt2 has 12 heads: T = 5 splits no whole head; bert has no Megatron split here; FSDP in
  // PyTorch 1.13 does not compose with tensor parallelism.
  for (const char* args : {"gpt2 --gpus 10 --tensor-parallel 5", "bert-base --gpus 2 --tensor-parallel 2",
                           "gpt2 --gpus 4 --tensor-parallel 2 --fsdp full --precision bf16"}) {
    CliRun r = run_cli(std::string("estimate ") + args);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_TRUE(r.out.empty()) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  }
}

TEST(Sharding, TensorParallelSplitsGpt2Parameters) {
  // GPT-2 small per rank with T = 2: wte rows: 50,257 padded to a multiple of 128 * 2 = 50,432,
  // 25,216 per rank -> 25,216 * 768 = 19,365,888; wpe 1024 * 768 = 786,432; ln_f 1,536.
  // Per layer: ln_1, ln_2 3,072; c_attn 768 * 1,152 + 1,152 = 885,888; attn c_proj 384 * 768
  // + 768 = 295,680; c_fc 768 * 1,536 + 1,536 = 1,181,184; mlp c_proj 1,536 * 768 + 768
  // = 1,180,416 -> 3,546,240, times 12 = 42,554,880. Total 62,708,736.
  EstimateOptions o;
  o.model = "gpt2";
  o.parallel.gpus = 2;
  o.parallel.tensor_parallel = 2;
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r.value().parameter_count, 62708736);
  EXPECT_EQ(r.value().per_gpu->tensor_parallel, 2);
  EXPECT_EQ(r.value().per_gpu->data_parallel, 1);
}

TEST(Sharding, StageZeroInFp32KeepsNoMasterCopy) {
  // mlp:layers=4,dim=256 in fp32: Psi = 4 * (65,536 + 256) = 263,168. DeepSpeed stage 0 without
  // 16-bit parameters uses the client optimizer: parameters 4 Psi, gradients 4 Psi, Adam moments
  // 8 Psi = 16 Psi = 4,210,688 (no fp32 copy); in bf16 the master copy is there: 2 + 2 + 4 + 8.
  EXPECT_EQ(per_gpu(layout("mlp:layers=4,dim=256", 2, 0, std::nullopt, Precision::Fp32)).model_states_bytes, 16 * 263168);
  EXPECT_EQ(per_gpu(layout("mlp:layers=4,dim=256", 2, 0)).model_states_bytes, 16 * 263168);
}

TEST(ShardingCli, PlanRejectsALayout) {
  CliRun r = run_cli("plan mlp:layers=2,dim=64 --gpus 4 --zero 2 --budget 1GiB");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.out.empty());
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(ShardingCli, FitSaysWhichRankItFits) {
  CliRun r = run_cli("fit mlp:layers=2,dim=64 --gpus 4 --zero 3 --precision bf16 --gpu H100-SXM --reduce-bucket-size 1000");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("one rank of 4 GPUs (DeepSpeed ZeRO-3)"), std::string::npos) << r.out;
}

TEST(ShardingCli, EmittedDeepSpeedConfigHasTheBatchArithmetic) {
  // 16 GPUs, tensor-parallel 2 -> data-parallel 8; micro-batch 2 x 4 accumulation steps:
  // train_batch_size = 2 * 4 * 8 = 64, as DeepSpeed's _batch_assertion requires.
  const std::string path = ::testing::TempDir() + "/headroom_ds_config.json";
  std::remove(path.c_str());
  CliRun r = run_cli("estimate gpt2 --precision bf16 --gpus 16 --tensor-parallel 2 --zero 2 --micro-batch 2 --grad-accum 4 "
                     "--reduce-bucket-size 589824 --emit-deepspeed " + path);
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream in(path);
  ASSERT_TRUE(in.good());
  nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["train_micro_batch_size_per_gpu"], 2);
  EXPECT_EQ(j["gradient_accumulation_steps"], 4);
  EXPECT_EQ(j["train_batch_size"].get<int64_t>(),
            j["train_micro_batch_size_per_gpu"].get<int64_t>() * j["gradient_accumulation_steps"].get<int64_t>() * 8);
  EXPECT_EQ(j["train_batch_size"], 64);
  EXPECT_EQ(j["zero_optimization"]["stage"], 2);
  EXPECT_EQ(j["zero_optimization"]["reduce_bucket_size"], 589824);
  EXPECT_EQ(j["bf16"]["enabled"], true);
  EXPECT_EQ(j["optimizer"]["type"], "Adam");
  // Without a DeepSpeed layout there is nothing to emit: one line, exit 2, no file.
  const std::string none = ::testing::TempDir() + "/headroom_ds_none.json";
  std::remove(none.c_str());
  CliRun bad = run_cli("estimate gpt2 --gpus 2 --fsdp full --precision bf16 --emit-deepspeed " + none);
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(bad.out.empty());
  EXPECT_FALSE(std::ifstream(none).good());
}

TEST(Sharding, TensorParallelSplitsLlamaParameters) {
  // Llama-2-7B per rank with T = 2: vocab 32,000 is a multiple of 128 * 2, so embed_tokens and
  // lm_head are 16,000 * 4,096 = 65,536,000 each; per layer q, k, v, o 2,048 * 4,096 = 8,388,608
  // each (33,554,432), gate, up, down 5,504 * 4,096 = 22,544,384 each (67,633,152), two norms
  // 8,192 -> 101,195,776, times 32 = 3,238,264,832; final norm 4,096. Total 3,369,340,928.
  EstimateOptions o;
  o.model = "llama:preset=llama-2-7b";
  o.seq = 16;
  o.mode = RunMode::Inference;
  o.parallel.gpus = 2;
  o.parallel.tensor_parallel = 2;
  Result<Estimate> r = estimate(o);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r.value().parameter_count, 3369340928);
  // llama-3-8b has 8 key/value heads: T = 16 splits no whole query group.
  CliRun bad = run_cli("estimate llama-3-8b --gpus 16 --tensor-parallel 16");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("8 key/value heads"), std::string::npos) << bad.err;
}

TEST(Sharding, FsdpMixedPrecisionKeepsFp32FlatParametersAndGradients) {
  // mlp:layers=4,dim=256 under MixedPrecision(bf16), 4 GPUs: Psi = 263,168, 8 flat parameters
  // (weight and bias of 4 Linears), each with an Adam `step` on the CPU (no device bytes).
  //   no-shard: fp32 parameters 4 Psi + fp32 gradients 4 Psi (cast back to the parameter dtype)
  //             + moments 8 Psi = 16 Psi = 4,210,688;
  //   grad-op:  all sharded at rest, one flat shard per Linear (65,792 / 4 = 16,448 elements, no
  //             padding): 16 Psi / 4 = 1,052,672.
  EXPECT_EQ(per_gpu(layout("mlp:layers=4,dim=256", 4, std::nullopt, FsdpStrategy::NoShard)).model_states_bytes, 16 * 263168);
  EXPECT_EQ(per_gpu(layout("mlp:layers=4,dim=256", 4, std::nullopt, FsdpStrategy::GradOp)).model_states_bytes, 4 * 263168);
}

TEST(ShardingCli, JsonHasPerGpu) {
  CliRun r = run_cli("estimate mlp:layers=4,dim=256 --gpus 4 --zero 3 --precision bf16 --micro-batch 2 --grad-accum 3 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"per_gpu\""), std::string::npos);
  EXPECT_NE(r.out.find("\"model_states_bytes\""), std::string::npos);
  EXPECT_NE(r.out.find("\"batch\": 6"), std::string::npos);  // 2 x 3 per GPU
  EXPECT_NE(r.out.find("\"micro_batch\": 2"), std::string::npos);
}

TEST(ShardingCli, BadLayoutsAreOneLineExitTwo) {
  for (const char* args : {"--zero 3", "--gpus 4 --zero 4", "--gpus 4 --zero 3 --fsdp full", "--gpus 4 --zero 2 --precision amp-bf16",
                           "--gpus 4 --zero 2 --mode infer", "--gpus 4 --fsdp half", "--gpus 0", "--gpus 4 --grad-accum 2",
                           "--gpus 4 --zero 1 --reduce-bucket-size 100", "--gpus 4 --zero 2 --device cpu",
                           "--gpus 4 --batch 5 --micro-batch 2 --grad-accum 2", "--gpus 4 --tensor-parallel 2",
                           "--gpus 6 --tensor-parallel 4 --zero 1"}) {
    CliRun r = run_cli(std::string("estimate mlp:layers=2,dim=64 ") + args);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_TRUE(r.out.empty()) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  }
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
