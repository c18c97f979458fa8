// Megatron-LM's own DDP and optimizers (--megatron; schedule/interpreter_megatron.cc): the
// contiguous buffer layout (schedule/megatron_buffer.h) by hand, the model states one rank holds
// against Megatron's own count (megatron/training/theoretical_memory_usage.py
// compute_weight_and_optimizer_memory: 18 bytes per parameter, 6 + 12/d with the distributed
// optimizer) and the padding that count leaves out, and the layout errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli_runner.h"
#include "estimate/estimate.h"
#include "frontends/hf/hf_frontend.h"
#include "llama_stages_options.h"
#include "schedule/megatron_buffer.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

TEST(MegatronBuffer, DistributedOptimizerPadsEachStartTo64AndTheEndToLcmOfDpAnd128) {
  // Parameters in buffer order 100, 10 000, 100, 10 000 elements, dp = 3:
  //   starts 0, 128 (ceil64(100)), 10 176 (ceil64(10 128)), 10 304 (ceil64(10 276)); end 20 304,
  //   padded to a multiple of lcm(3, 128) = 384: 53 x 384 = 20 352.
  const std::vector<int64_t> numels = {100, 10'000, 100, 10'000};
  const MegatronBufferLayout l = megatron_buffer_layout(numels, 3, true);
  EXPECT_EQ(l.start, (std::vector<int64_t>{0, 128, 10'176, 10'304}));
  EXPECT_EQ(l.elements, 20'352);
  // Each rank owns 20 352 / 3 = 6 784 elements: rank 0 [0, 6 784) holds 100 + 6 656 of them,
  // rank 1 [6 784, 13 568) 3 344 + 100 + 3 264, rank 2 [13 568, 20 352) 6 736 (and the end's 48).
  EXPECT_EQ(megatron_rank_pieces(l, numels, 3, 0), (std::vector<int64_t>{100, 6'656, 0, 0}));
  EXPECT_EQ(megatron_rank_pieces(l, numels, 3, 1), (std::vector<int64_t>{0, 3'344, 100, 3'264}));
  EXPECT_EQ(megatron_rank_pieces(l, numels, 3, 2), (std::vector<int64_t>{0, 0, 0, 6'736}));
  // Padding per rank 28, 76 and 48: rank 0 holds the most parameter elements.
  EXPECT_EQ(megatron_most_loaded_rank({l}, {numels}, 3), 0);
  // Without the distributed optimizer nothing is padded (_compute_default_per_buffer_param_layout).
  const MegatronBufferLayout plain = megatron_buffer_layout(numels, 3, false);
  EXPECT_EQ(plain.start, (std::vector<int64_t>{0, 100, 10'100, 10'200}));
  EXPECT_EQ(plain.elements, 20'200);
}

EstimateOptions llama_stages(bool distributed_optimizer) {
  EstimateOptions o = testing::llama2_7b_four_stages();
  o.parallel.megatron = true;
  if (distributed_optimizer) o.parallel.zero_stage = 1;
  return o;
}

PerGpu per_gpu(const EstimateOptions& o) {
  Result<Estimate> r = estimate(o);
  EXPECT_TRUE(r.ok()) << r.error();
  return r.ok() ? *r.value().per_gpu : PerGpu{};
}

// Llama-2-7B (data/hf-configs/llama-2-7b.json), 8 GPUs, P = 4, d = 2, bf16. Megatron's
// compute_weight_and_optimizer_memory for it (num_layers 32, hidden 4096, 32 heads and query
// groups, kv_channels 128, ffn_hidden 11008, swiglu, RMSNorm, padded vocab 32 000, untied):
//   layer = 2 h^2 (1 + 1) + 2 h ffn 3/2 + 2 h = 67 108 864 + 135 266 304 + 8 192 = 202 383 360;
//   most loaded shard = 32 layers / 4 + embedding 32 000 h + final norm h / 4
//                     = 1 619 066 880 + 131 072 000 + 1 024 = 1 750 139 904 parameters.
// Stage 0 really holds 8 layers and the embedding, Psi = 1 750 138 880 (the final norm is the last
// stage's; the formula spreads it over the stages), every numel a multiple of 64 and Psi of
// lcm(2, 128): the buffers need no padding. Plus Llama's rotary inv_freq buffer (64 fp32 = 256).
constexpr int64_t kPsi = 8 * 202'383'360LL + 131'072'000;  // 1,750,138,880
constexpr int64_t kMegatronShard = kPsi + 1'024;            // theoretical_memory_usage's shard
constexpr int64_t kRotaryBytes = 256;

TEST(MegatronDdp, DistributedOptimizerHoldsMegatronsSixPlusTwelveOverDBytesPerParameter) {
  const PerGpu g = per_gpu(llama_stages(true));
  EXPECT_EQ(g.engine, "megatron");
  EXPECT_EQ(g.stage, 0);
  // theoretical_memory_usage: 1 750 139 904 x (6 + 12 / 2) = 21 001 678 848 bytes. The rank: bf16
  // param_data 2 Psi + fp32 main_grad 4 Psi + fp32 main params and two Adam moments on its half
  // 12 Psi / 2 = 12 Psi = 21 001 666 560, less the formula's 1 024 final-norm parameters
  // (12 288 bytes), plus the 256-byte rotary buffer.
  const int64_t theoretical = kMegatronShard * 12;
  EXPECT_EQ(theoretical, 21'001'678'848);
  EXPECT_EQ(g.model_states_bytes, 12 * kPsi + kRotaryBytes);
  EXPECT_EQ(g.model_states_bytes, theoretical - 12 * 1'024 + kRotaryBytes);
  // DeepSpeed's ZeRO-1 under the same pipeline holds 10 Psi (tests/pipeline_llama_pin_test.cc):
  // Megatron's fp32 main_grad buffer is 2 Psi = 3 500 277 760 bytes (3.26 GiB) more.
  EXPECT_EQ(g.model_states_bytes - (10 * kPsi + kRotaryBytes), 3'500'277'760);
}

TEST(MegatronDdp, LlamaPipelinePeaksAreDeepSpeedsPlusTwoPsi) {
  // Simulated regression pins (docs/distributed.md, "Megatron-LM's own DDP: --megatron"). Under
  // 1F1B and interleaving every stage peaks in a later micro-batch's backward, when every
  // gradient of the stage exists, so each peak is DeepSpeed ZeRO-1's pinned one
  // (tests/pipeline_llama_pin_test.cc) plus the model states' difference, 2 Psi of the stage:
  // 2 x 1,750,138,880 on stage 0, 2 x 1,619,066,880 on stages 1 and 2, 2 x 1,750,142,976 on stage 3.
  constexpr int64_t kMiddle = 8 * 202'383'360LL, kLast = kMiddle + 4'096 + 131'072'000;
  EstimateOptions o = llama_stages(true);
  PerGpu g = per_gpu(o);
  EXPECT_EQ(g.stage_peak_bytes, (std::vector<int64_t>{29'889'020'160 + 2 * kPsi, 25'573'982'464 + 2 * kMiddle, 22'502'572'288 + 2 * kMiddle,
                                                      21'574'133'000 + 2 * kLast}));
  EXPECT_EQ(g.activations_bytes, 12'370'575'360);  // the same activations as DeepSpeed's
  o.parallel.pipeline_schedule = PipelineScheduleKind::Interleaved;
  o.parallel.virtual_stages = 2;
  g = per_gpu(o);
  // Two model chunks per rank, each its own DDP buffer (4 layers; the embedding with chunk 0 of
  // stage 0, the head with chunk 1 of stage 3): no padding either, the same 2 Psi in all.
  EXPECT_EQ(g.stage_peak_bytes, (std::vector<int64_t>{34'543'845'632 + 2 * kPsi, 30'261'313'792 + 2 * kMiddle, 27'172'077'824 + 2 * kMiddle,
                                                      26'225'812'744 + 2 * kLast}));
  EXPECT_EQ(g.model_states_bytes, 12 * kPsi + kRotaryBytes);
}

TEST(MegatronDdp, WithoutTheDistributedOptimizerEighteenBytesPerParameter) {
  const PerGpu g = per_gpu(llama_stages(false));
  // 2 (bf16 params) + 4 (fp32 main_grad) + 4 (fp32 main params) + 8 (Adam) = 18 bytes each.
  EXPECT_EQ(g.model_states_bytes, 18 * kPsi + kRotaryBytes);
  EXPECT_EQ(g.model_states_bytes, kMegatronShard * 18 - 18 * 1'024 + kRotaryBytes);
}

TEST(MegatronDdp, PaddingIsWhatThePerParameterCountLeavesOut) {
  // mlp:layers=2,dim=100 in bf16 on 3 GPUs: two Linear(100, 100), Psi = 2 x (10 000 + 100)
  // = 20 200; the buffer in reverse order is the layout of MegatronBuffer above: 20 352 elements,
  // rank 0 (the most loaded) owns 6 756 parameter elements.
  //   param_data  20 352 x 2 = 40 704     main_grad  20 352 x 4 = 81 408
  //   main params 6 756 x 4  = 27 024     Adam       2 x 27 024 = 54 048      total 203 184
  // where 6 Psi + 12 Psi / 3 = 202 000: the padding adds 1 184 bytes.
  EstimateOptions o;
  o.model = "mlp:layers=2,dim=100";
  o.batch = 4;
  o.precision = Precision::Bf16;
  o.parallel.gpus = 3;
  o.parallel.megatron = true;
  o.parallel.zero_stage = 1;
  const PerGpu g = per_gpu(o);
  EXPECT_EQ(g.model_states_bytes, 203'184);
  EXPECT_EQ(g.model_states_bytes - (6 * 20'200 + 12 * 20'200 / 3), 1'184);
}

TEST(MegatronCli, LayoutErrorsAreOneLineExitTwo) {
  const std::string m = "estimate gpt2:layers=4 --seq 64 --precision bf16 ";
  testing::expect_usage_error(m + "--megatron", "need --gpus N");
  testing::expect_usage_error(m + "--gpus 2 --megatron --zero 2", "Megatron-LM has no ZeRO-2 or 3");
  testing::expect_usage_error(m + "--gpus 2 --megatron --fsdp full", "--megatron and --fsdp are two engines");
  testing::expect_usage_error(m + "--gpus 2 --megatron --zero 1 --offload-optimizer cpu", "not Megatron-LM's");
  testing::expect_usage_error("estimate gpt2:layers=4 --seq 64 --precision amp-bf16 --gpus 2 --megatron", "not through autocast");
  testing::expect_usage_error(m + "--gpus 2 --megatron --zero-grad zeros", "zeroes its main_grad buffer in place");
  testing::expect_usage_error(m + "--gpus 2 --megatron --zero 1 --emit deepspeed /dev/null", "use --emit megatron");
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
