// Time beside memory (cost/run_time.h): the load of weights over the host link, the FLOPs the
// timeline counts, whole runs against 6*N*P, throughput units, generation latencies, and the
// estimate's time only with a catalog GPU. Arithmetic by hand in the comments.
#include <gtest/gtest.h>

#include <string>

#include "cli_runner.h"
#include "cost/run_time.h"
#include "estimate/estimate.h"
#include "options/run_args.h"
#include "pack/pack.h"
#include "report/estimate_report.h"
#include "util/format.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

GpuSpec link_gpu(double link_bytes_per_s) {
  GpuSpec g;
  g.name = "round";
  g.fp32_flops = 1e12;
  g.memory_bandwidth_bytes_per_s = 1e11;
  g.host_link.bandwidth_bytes_per_s = link_bytes_per_s;
  return g;
}

TEST(RunTime, LoadOverTheHostLinkByHand) {
  // Link 10 GB/s x 0.75 (host_link_efficiency) = 7.5 GB/s pinned, x 0.5 pageable = 3.75 GB/s.
  // 1e9 bytes in 10 tensors, pinned: 100 us + 10 x 2 us + 1e9 / 7.5e9 s = 0.12 + 133.333.. ms.
  // Pageable: 0.12 + 1e9 / 3.75e9 s = 0.12 + 266.666.. ms.
  CostModel m(link_gpu(1e10));
  EXPECT_NEAR(m.load_ms(1000000000, 10, /*pinned=*/true), 0.12 + 1000.0 / 7.5, 1e-9);
  EXPECT_NEAR(m.load_ms(1000000000, 10, /*pinned=*/false), 0.12 + 1000.0 / 3.75, 1e-9);
  EXPECT_EQ(m.load_ms(0, 0, true), 0);
}

TEST(RunTime, LoadCountsEveryWeightTensorOnce) {
  // mlp:layers=2,dim=256: two Linear(256, 256) with bias: 4 tensors, 2 x (65,536 + 256) floats
  // = 131,584 x 4 = 526,336 bytes.
  EstimateOptions o;
  o.model = "mlp:layers=2,dim=256";
  Graph g = build_graph(o, 1);
  CostModel m(link_gpu(1e10));
  LoadTime l = load_time(m, g, HostMemory::Pinned);
  EXPECT_EQ(l.tensors, 4);
  EXPECT_EQ(l.bytes, 526336);
  EXPECT_NEAR(l.ms, 0.1 + 4 * 0.002 + 526336 / 7.5e9 * 1e3, 1e-12);
}

TEST(RunTime, TrainingStepCountsForwardPlusTwiceBackwardFlops) {
  // The timeline's FLOPs for one training iteration: every op's forward FLOPs once and twice
  // again for its backward (backward_factor 2). Linear(1024, 1024) at batch 1024:
  // 2 x 1024^3 = 2,147,483,648 forward, so the step holds at least 3 x that.
  EstimateOptions o;
  o.model = "mlp:layers=1,dim=1024";
  o.batch = 1024;
  o.gpu = GpuOptions{};
  o.gpu->gpu = "A100-SXM4-40GB";
  Estimate e = estimate(o).value();
  ASSERT_TRUE(e.time);
  Graph g = build_graph(o, 1024);
  double forward = 0;
  for (const Op& op : g.ops) forward += static_cast<double>(op.flops);
  EXPECT_GE(e.time->step.flops, 3 * 2147483648.0);
  EXPECT_LE(e.time->step.flops, 3 * forward);
  EXPECT_EQ(e.time->throughput.unit, "samples/s");
  // 1024 samples per step: samples/s = 1024 / step seconds.
  EXPECT_NEAR(e.time->throughput.value, 1024 / e.time->step.total_ms * 1e3, 1e-9);
}

TEST(RunTime, WholeRunAgainstSixNP) {
  // 1,000,000 tokens at 8 x 1024 = 8,192 tokens per step: ceil(1e6 / 8192) = 123 steps (the last
  // partial), x 3 epochs = 369 steps of 50 ms = 18,450 ms; FLOPs 369 x 2e12 = 7.38e14.
  // The rule: 6 x (1e6 x 3 tokens) x 124,439,808 parameters = 2.23991654e15.
  RunLength r;
  r.tokens = 1000000;
  r.epochs = 3;
  RunTotals t = run_totals(r, 8, 8192, 50.0, 2e12, 124439808, /*training=*/true, /*all_trainable=*/true);
  EXPECT_EQ(t.steps, 369);
  EXPECT_DOUBLE_EQ(t.ms, 18450.0);
  EXPECT_DOUBLE_EQ(t.flops, 7.38e14);
  ASSERT_TRUE(t.rule_flops);
  EXPECT_DOUBLE_EQ(*t.rule_flops, 6.0 * 3e6 * 124439808.0);
  EXPECT_EQ(t.rule, "6*N*P");
  // Samples on a token model: 1000 samples of 1024 tokens at batch 8: 125 steps; N = 1,024,000.
  RunLength s;
  s.samples = 1000;
  RunTotals u = run_totals(s, 8, 8192, 50.0, 2e12, 100, /*training=*/false, true);
  EXPECT_EQ(u.steps, 125);
  EXPECT_DOUBLE_EQ(*u.rule_flops, 2.0 * 1024000 * 100);
  EXPECT_EQ(u.rule, "2*N*P");
  // Frozen parameters (LoRA) do not follow 6*N*P: no rule.
  EXPECT_FALSE(run_totals(s, 8, 8192, 50.0, 2e12, 100, true, /*all_trainable=*/false).rule_flops);
  // Images have no tokens.
  RunLength tok;
  tok.tokens = 10;
  EXPECT_THROW(run_totals(tok, 8, 0, 50.0, 1, 1, true, true), InputError);
}

TEST(RunTime, GptRunExceedsSixNPByAttention) {
  // gpt2 at batch 8 x seq 1024 trains 8,192 tokens per step. The rule: 6 x P = 6 x 124,439,808 =
  // 746,638,848 FLOPs per token. The op count per token, forward: the matmul weights
  // 12 x (768x2304 + 768x768 + 2 x 768x3072) = 84,934,656 plus the tied lm_head 768 x 50,257 =
  // 38,597,376, at 2 FLOPs each: 247,064,064; attention's QK^T and AV, 12 layers x 4 x 1024 x
  // 768 = 37,748,736; together 284,812,800, x 3 for training = 854,438,400: 1.1444 x the rule.
  // Elementwise ops (layer norms, GELU, softmax, adds) add under 2 % on top.
  EstimateOptions o;
  o.model = "gpt2";
  o.batch = 8;
  o.seq = 1024;
  o.gpu = GpuOptions{};
  o.gpu->gpu = "A100-SXM4-80GB";
  o.run_length = RunLength{std::nullopt, 8192 * 100, 1};
  Estimate e = estimate(o).value();
  ASSERT_TRUE(e.time && e.time->run);
  EXPECT_EQ(e.time->tokens_per_step, 8192);
  EXPECT_EQ(e.time->throughput.unit, "tokens/s");
  EXPECT_EQ(e.time->run->steps, 100);
  ASSERT_TRUE(e.time->run->rule_flops);
  EXPECT_DOUBLE_EQ(*e.time->run->rule_flops, 6.0 * 819200 * 124439808);
  const double by_hand = 854438400.0 / 746638848.0;
  const double ratio = e.time->run->flops / *e.time->run->rule_flops;
  EXPECT_GE(ratio, by_hand);
  EXPECT_LE(ratio, by_hand * 1.02);
}

TEST(RunTime, WholeRunCostIsPriceTimesTime) {
  // At $3.60/h a millisecond costs $0.000001: the run's cost is its ms / 1e6.
  RunArgs a;
  a.model = "resnet18";
  a.batch = "32";
  a.gpu = "T4";
  a.samples = "10000";
  a.prices = {"T4=3.60"};
  Estimate e = estimate(to_estimate_options(a).value()).value();
  ASSERT_TRUE(e.time && e.time->run && e.time->run->cost_usd);
  EXPECT_EQ(e.time->run->price->provider, "--price");
  EXPECT_NEAR(*e.time->run->cost_usd, e.time->run->ms / 1e6, 1e-15);
  // Without --price: the catalog's cheapest T4 listing (modal, $0.5904/h).
  a.prices.clear();
  e = estimate(to_estimate_options(a).value()).value();
  ASSERT_TRUE(e.time->run->cost_usd);
  EXPECT_DOUBLE_EQ(e.time->run->price->usd_per_hour, 0.5904);
  EXPECT_NEAR(*e.time->run->cost_usd, 0.5904 * e.time->run->ms / 3.6e6, 1e-15);
}

TEST(RunTime, NoTimeWithoutACatalogGpu) {
  EstimateOptions o;
  o.model = "mlp:layers=2,dim=64";
  EXPECT_FALSE(estimate(o).value().time);
  o.gpu = GpuOptions{};
  o.gpu->gpu_memory = int64_t{16} << 30;
  EXPECT_FALSE(estimate(o).value().time);
  o.run_length = RunLength{100, std::nullopt, 1};
  Result<Estimate> r = estimate(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("--samples needs --gpu NAME"), std::string::npos);
}

TEST(RunTime, GenerationLatenciesInterpolateTheDecodes) {
  // tiny-llama-gqa, prompt 8, 10 new tokens: prefill, decode 1 and decode 9 simulated; the nine
  // decodes take 9 x (first + last) / 2; tokens/s = batch x new tokens / total.
  RunArgs a;
  a.model = std::string(HEADROOM_SOURCE_DIR) + "/validation/hf-configs/tiny-llama-gqa.json";
  a.mode = "generate";
  a.prompt = "8";
  a.new_tokens = "10";
  a.batch = "2";
  a.gpu = "L4";
  Estimate e = estimate(to_estimate_options(a).value()).value();
  ASSERT_TRUE(e.time && e.time->generation);
  const GenerationTime& g = *e.time->generation;
  EXPECT_GT(g.prefill_ms, 0);
  EXPECT_GE(g.last_decode_ms, g.first_decode_ms);
  EXPECT_NEAR(g.per_token_ms, (g.first_decode_ms + g.last_decode_ms) / 2, 1e-12);
  EXPECT_NEAR(g.total_ms, g.prefill_ms + 9 * g.per_token_ms, 1e-9);
  EXPECT_EQ(e.time->throughput.unit, "tokens/s");
  EXPECT_NEAR(e.time->throughput.value, 2 * 10 / g.total_ms * 1e3, 1e-9);
  std::string json = estimate_json(e);
  EXPECT_NE(json.find("\"time_to_first_token_ms\""), std::string::npos);
}

TEST(RunTime, PackExecutionIsTheEstimatesInferenceStep) {
  // One time model: pack's execution time of an inference is estimate's inference step.
  EstimateOptions o;
  o.model = "resnet18";
  o.batch = 4;
  o.mode = RunMode::Inference;
  o.gpu = GpuOptions{};
  o.gpu->gpu = "T4";
  Estimate e = estimate(o).value();
  ASSERT_TRUE(e.time);
  Graph g = build_graph(o, 4);
  const double pack_ms = roofline_seconds(g, DeviceCatalog::builtin().find("T4"), std::nullopt) * 1e3;
  EXPECT_NEAR(pack_ms, e.time->step.total_ms, 1e-9 * e.time->step.total_ms);
}

TEST(RunTime, DurationsReadAsAPersonWould) {
  EXPECT_EQ(human_duration_ms(0.851), "0.851 ms");
  EXPECT_EQ(human_duration_ms(98.14), "98.1 ms");
  EXPECT_EQ(human_duration_ms(12345), "12.3 s");
  EXPECT_EQ(human_duration_ms(38.2 * 60e3), "38.2 min");
  EXPECT_EQ(human_duration_ms(5.1 * 3600e3), "5.10 h");
  // 355 years of 365 days.
  EXPECT_EQ(human_duration_ms(355 * 365 * 86400e3), "355 years");
}

std::string run_cli_out(const std::string& args) { return testing::run_cli(args).out; }

TEST(RunTimeCli, JsonHasLoadStepAndThroughput) {
  testing::CliRun r = testing::run_cli("estimate resnet18 --batch 4 --mode infer --gpu T4 --host-memory pinned --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"load_time_ms\""), std::string::npos);
  EXPECT_NE(r.out.find("\"step_time_ms\""), std::string::npos);
  EXPECT_NE(r.out.find("\"throughput\": {\n    \"value\""), std::string::npos);
  EXPECT_NE(r.out.find("\"unit\": \"samples/s\""), std::string::npos);
  EXPECT_NE(r.out.find("\"host_memory\": \"pinned\""), std::string::npos);
  testing::CliRun text = testing::run_cli("estimate resnet18 --batch 4 --gpu T4 --samples 1000 --epochs 2");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("time on T4 (roofline"), std::string::npos);
  EXPECT_NE(text.out.find(", step "), std::string::npos);
  EXPECT_NE(run_cli_out("estimate resnet18 --batch 4 --mode infer --gpu T4").find(", forward "), std::string::npos);
  // ceil(1000 / 4) = 250 steps x 2 epochs.
  EXPECT_NE(text.out.find("whole run: 500 steps"), std::string::npos);
  // Without a GPU nothing is said about time.
  EXPECT_EQ(testing::run_cli("estimate resnet18 --batch 4").out.find("time on"), std::string::npos);
}

TEST(RunTimeCli, TimeOptionsThatDoNotApplyAreErrors) {
  testing::expect_usage_error("estimate resnet18 --samples 10", "--samples needs --gpu NAME");
  testing::expect_usage_error("estimate resnet18 --gpu-memory 16GiB --tokens 10", "--tokens needs --gpu NAME");
  testing::expect_usage_error("estimate resnet18 --gpu T4 --tokens 10", "--tokens applies to models that take token ids");
  testing::expect_usage_error("estimate resnet18 --gpu T4 --samples 10 --tokens 10", "not both");
  testing::expect_usage_error("estimate resnet18 --gpu T4 --epochs 2", "--epochs needs --samples N or --tokens N");
  testing::expect_usage_error("estimate resnet18 --gpu T4 --host-memory shared", "--host-memory must be pageable or pinned");
  testing::expect_usage_error("estimate resnet18 --gpu T4 --samples 0", "--samples must be a positive integer");
  testing::expect_usage_error("estimate resnet18 --gpu T4 --gpus 2 --samples 10", "applies to one GPU");
  testing::expect_usage_error("fit resnet18 --gpu T4 --samples 10", "--samples");
  testing::expect_usage_error("estimate resnet18 --gpu T4 --price T4=1", "--price applies to a whole run");
  testing::expect_usage_error("estimate resnet18 --gpu T4 --samples 10 --epochs 0", "--epochs must be a positive integer");
  testing::expect_usage_error("estimate " + std::string(HEADROOM_SOURCE_DIR) +
                                  "/validation/hf-configs/tiny-llama-gqa.json --mode generate --prompt 4 --new-tokens 4 --gpu T4 --tokens 100",
                              "--tokens applies to --mode train and infer, not generate");
}

TEST(RunTimeOptions, PythonKeywordsReachTheSameChecks) {
  RunArgs a;
  a.model = "resnet18";
  set_run_arg(a, "samples", "10");
  Result<EstimateOptions> fit = to_estimate_options(a, RunCommand::Fit);
  ASSERT_FALSE(fit.ok());
  EXPECT_EQ(fit.error(), "--samples applies to estimate, not fit");
  set_run_arg(a, "host_memory", "pinned");
  set_run_arg(a, "epochs", "3");
  set_run_arg(a, "gpu", "T4");
  EstimateOptions o = to_estimate_options(a).value();
  EXPECT_EQ(o.host_memory, HostMemory::Pinned);
  ASSERT_TRUE(o.run_length);
  EXPECT_EQ(o.run_length->samples, 10);
  EXPECT_EQ(o.run_length->epochs, 3);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
