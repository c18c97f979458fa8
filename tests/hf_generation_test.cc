// Generation with a DynamicCache (--mode generate on Hugging Face configs): the KV cache size
// rule, the two-window shortcut against the fully unrolled run, and the peaks measured on CPU by
// validation/hf_generate.py (PyTorch 1.13, eager attention), which must match to the byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "estimate/estimate.h"
#include "estimate/parallel.h"
#include "frontends/hf/hf_frontend.h"
#include "frontends/model_source.h"
#include "schedule/build_program.h"
#include "sim/simulate.h"

namespace headroom {
namespace {

std::string validation_config(const std::string& name) {
  return std::string(HEADROOM_SOURCE_DIR) + "/validation/hf-configs/" + name;
}

EstimateOptions generate_options(const std::string& config, int64_t batch, int64_t prompt, int64_t new_tokens,
                                 int64_t beams = 1, bool static_cache = false) {
  EstimateOptions o;
  o.model = config;
  o.batch = batch;
  o.mode = RunMode::Inference;
  o.device = "cpu";
  o.attention = AttentionKind::Eager;
  o.generation = GenerationOptions{prompt, new_tokens, beams, static_cache};
  ModelSourceOptions src;
  src.precision_given = true;  // fp32, as measured
  select_frontend(o, src);
  return o;
}

// The whole run as one graph (every forward), simulated as one program.
Program unrolled(const EstimateOptions& o) {
  BuildConfig cfg;
  cfg.batch = o.batch;
  cfg.inference = true;
  cfg.attention = o.attention;
  cfg.dtype = o.precision == Precision::Bf16 ? DType::BF16 : DType::F32;
  cfg.generation = GenerationWindow{o.generation->prompt, o.generation->new_tokens, 0, o.generation->new_tokens - 1,
                                    o.generation->beams, o.generation->static_cache};
  return build_program(o.graph_loader(cfg), schedule_options(o));
}

// Live bytes per category just before the program's last step ("drop outputs").
CategoryBytes live_before_last_step(const Program& p) { return category_bytes_before(p, p.steps.back().first_event); }

TEST(HfGeneration, KvCacheIsTwoTimesLayersKvHeadsHeadDimBytesTokensBatch) {
  // tiny-llama-gqa: 2 layers, 4 kv heads of 256 / 8 = 32, fp32. After the last of 7 forwards
  // (prompt 10, 7 new tokens) the cache holds 10 + 7 - 1 = 16 tokens for each of 3 sequences:
  //   2 (k, v) x 2 layers x 4 kv heads x 32 x 4 bytes x 16 tokens x 3 = 98,304 bytes.
  EstimateOptions o = generate_options(validation_config("tiny-llama-gqa.json"), 3, 10, 7);
  CategoryBytes live = live_before_last_step(unrolled(o));
  EXPECT_EQ(live[static_cast<size_t>(Category::KvCache)], 2 * 2 * 4 * 32 * 4 * 16 * 3);
  EXPECT_EQ(live[static_cast<size_t>(Category::KvCache)], 98'304);
  // bf16 halves it: the cache is in the model's dtype.
  EstimateOptions bf = o;
  bf.precision = Precision::Bf16;
  EXPECT_EQ(live_before_last_step(unrolled(bf))[static_cast<size_t>(Category::KvCache)], 49'152);
}

TEST(HfGeneration, BeamSearchKvCacheIsTimesBeams) {
  // The same run with --beams 2: every forward runs batch x beams = 6 rows, and after the last
  // reorder_cache (index_select per layer, the old tensor freed) the cache is
  //   2 (k, v) x 2 layers x 4 kv heads x 32 x 4 bytes x 16 tokens x 3 batch x 2 beams = 196,608 bytes.
  EstimateOptions o = generate_options(validation_config("tiny-llama-gqa.json"), 3, 10, 7, 2);
  CategoryBytes live = live_before_last_step(unrolled(o));
  EXPECT_EQ(live[static_cast<size_t>(Category::KvCache)], 2 * 2 * 4 * 32 * 4 * 16 * 3 * 2);
  EXPECT_EQ(live[static_cast<size_t>(Category::KvCache)], 196'608);
}

TEST(HfGeneration, StaticCacheIsPreallocatedToPromptPlusNewTokens) {
  // --cache static: StaticCache zeros of max_cache_len = prompt + new tokens = 10 + 7 = 17 positions
  // per layer for batch x beams rows, from before the prefill to the end:
  //   2 (k, v) x 2 layers x 4 kv heads x 32 x 4 bytes x 17 positions x 3 batch = 104,448 bytes,
  // the same at the end of the run and at the peak (index_copy_ writes in place: no copy).
  EstimateOptions o = generate_options(validation_config("tiny-llama-gqa.json"), 3, 10, 7, 1, true);
  EXPECT_EQ(live_before_last_step(unrolled(o))[static_cast<size_t>(Category::KvCache)], 2 * 2 * 4 * 32 * 4 * 17 * 3);
  Result<Estimate> e = estimate(o);
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_EQ(e.value().kv_cache_bytes, 104'448);
  // With 2 beams: 6 rows, twice that.
  o.generation->beams = 2;
  EXPECT_EQ(live_before_last_step(unrolled(o))[static_cast<size_t>(Category::KvCache)], 208'896);
}

// KV cache bytes during the first step labelled `label`: the most live while it runs, and what
// is left when it has run.
std::pair<int64_t, int64_t> kv_during(const Program& p, const std::string& label) {
  int64_t live = 0;
  for (const Step& st : p.steps) {
    int64_t most = live;
    for (int32_t ei = st.first_event; ei < st.end_event; ++ei) {
      const Event& e = p.events[static_cast<size_t>(ei)];
      const Buffer& buf = p.buffers[static_cast<size_t>(e.buffer)];
      if (buf.category != Category::KvCache) continue;
      if (e.kind == Event::Kind::Alloc) live += buf.bytes;
      if (e.kind == Event::Kind::Free) live -= buf.bytes;
      most = std::max(most, live);
    }
    if (st.label == label) return {most, live};
  }
  ADD_FAILURE() << "no step " << label;
  return {-1, -1};
}

TEST(HfGeneration, BeamSearchReorderCopiesOneTensorAtATime) {
  // tiny-llama-gqa (2 layers, 4 kv heads of 32, fp32), batch 1, 2 beams, prompt 10: after the
  // prefill each cache tensor is 2 rows x 4 x 10 tokens x 32 x 4 bytes = 10,240 bytes, 4 of them.
  // reorder_cache's index_select makes each new tensor while the old one is in the slot:
  // 5 x 10,240 = 51,200 while it runs, then the old one goes: 4 x 10,240 = 40,960 again.
  Program p = unrolled(generate_options(validation_config("tiny-llama-gqa.json"), 1, 10, 3, 2));
  for (const char* step : {"prefill.past_key_values.0.key.index_select", "prefill.past_key_values.0.value.index_select",
                           "prefill.past_key_values.1.key.index_select", "prefill.past_key_values.1.value.index_select"}) {
    EXPECT_EQ(kv_during(p, step), std::make_pair(int64_t{5 * 10'240}, int64_t{4 * 10'240})) << step;
  }
}

TEST(HfGeneration, BeamSearchPeakAtTheLastValueCat) {
  // tiny-llama-mha (3 layers, 4 kv heads of 32, fp32), batch 1, 2 beams, prompt 2, 300 new tokens:
  // the peak is in the last decode (299) when layer 2 concatenates its values: every cache tensor
  // holds 2 + 300 - 1 = 301 tokens and layer 2's old values (300 tokens) are still in the slot.
  // Per token and tensor: 2 rows (batch x beams) x 4 kv heads x 32 x 4 bytes = 1,024 bytes:
  //   1,024 x (6 x 301 + 300) = 2,156,544 bytes.
  EstimateOptions o = generate_options(validation_config("tiny-llama-mha.json"), 1, 2, 300, 2);
  Result<Estimate> e = estimate(o);
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_EQ(e.value().peak_forward, 299);
  EXPECT_EQ(e.value().peak_op, "decode299.model.layers.2.self_attn.value_cache.cat");
  EXPECT_EQ(e.value().kv_cache_bytes, 1'024 * (6 * 301 + 300));
  EXPECT_EQ(e.value().kv_cache_bytes, 2'156'544);
}

TEST(HfGeneration, TwoWindowsGiveTheUnrolledPeak) {
  // Decode forward i + 1 repeats forward i's program on a longer cache (a StaticCache: the same
  // cache, longer ids), so simulating the prefill, decode 1 and the last decode finds the same
  // peak as every forward in one program.
  for (auto [prompt, new_tokens, beams] : {std::tuple<int64_t, int64_t, int64_t>{2, 12, 1}, {16, 6, 1}, {1, 3, 1}, {5, 1, 1},
                                           {2, 12, 3}, {16, 6, 2}, {1, 3, 4}, {5, 1, 2}}) {
    for (auto [a, static_cache] : {std::pair{AttentionKind::Eager, false}, {AttentionKind::Sdpa, false},
                                   {AttentionKind::Eager, true}, {AttentionKind::Sdpa, true}}) {
      EstimateOptions o = generate_options(validation_config("tiny-llama-gqa.json"), 2, prompt, new_tokens, beams, static_cache);
      o.attention = a;
      Result<Estimate> e = estimate(o);
      ASSERT_TRUE(e.ok()) << e.error();
      SimResult full = simulate(unrolled(o));
      EXPECT_EQ(e.value().peak_bytes, full.peak.bytes) << "prompt " << prompt << ", " << new_tokens << " new tokens, " << beams << " beams" << (static_cache ? ", static" : "");
      EXPECT_EQ(e.value().kv_cache_bytes, full.at_peak[static_cast<size_t>(Category::KvCache)]);
    }
  }
}

TEST(HfGeneration, PeakStepAndKvCacheAtThePeak) {
  // prompt 2, 40 new tokens on tiny-llama-gqa (batch 1): the peak is in the last decode (39),
  // after both layers have concatenated, so the whole cache of 2 + 40 - 1 = 41 tokens is live:
  //   2 x 2 layers x 4 kv heads x 32 x 4 bytes x 41 tokens = 83,968 bytes.
  Result<Estimate> e = estimate(generate_options(validation_config("tiny-llama-gqa.json"), 1, 2, 40));
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_EQ(e.value().peak_forward, 39);
  EXPECT_EQ(e.value().kv_cache_bytes, 83'968);
}

// validation/measured_generate.json: measured by validation/hf_generate.py.
TEST(HfGeneration, MatchesTheCpuMeasurementToTheByte) {
  std::ifstream f(std::string(HEADROOM_SOURCE_DIR) + "/validation/measured_generate.json");
  ASSERT_TRUE(f.good());
  nlohmann::json j = nlohmann::json::parse(f);
  ASSERT_GE(j.at("cases").size(), 11u);
  for (const nlohmann::json& c : j.at("cases")) {
    EstimateOptions o = generate_options(validation_config(c.at("config").get<std::string>()), c.at("batch").get<int64_t>(),
                                         c.at("prompt").get<int64_t>(), c.at("new_tokens").get<int64_t>(),
                                         c.value("beams", int64_t{1}), c.value("cache", std::string("dynamic")) == "static");
    Result<Estimate> e = estimate(o);
    ASSERT_TRUE(e.ok()) << e.error();
    std::string id = c.at("config").get<std::string>() + " b" + std::to_string(o.batch) + " p" +
                     std::to_string(o.generation->prompt) + " n" + std::to_string(o.generation->new_tokens) + " k" +
                     std::to_string(o.generation->beams) + (o.generation->static_cache ? " static" : "");
    EXPECT_EQ(e.value().peak_bytes, c.at("peak_bytes").get<int64_t>()) << id;
    std::string measured_step = c.at("peak_forward").get<std::string>();
    std::string predicted_step = e.value().peak_forward == 0 ? "prefill" : "decode" + std::to_string(e.value().peak_forward);
    EXPECT_EQ(predicted_step, measured_step) << id;
  }
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

TEST(HfGeneration, HtmlReportHasTheKvCacheBand) {
  const std::string out = std::string(HEADROOM_BINARY_DIR) + "/hf_generation_report.html";
  headroom::testing::CliRun r = headroom::testing::run_cli(
      "report " + validation_config("tiny-llama-gqa.json") +
      " --mode generate --prompt 2 --new-tokens 40 --precision fp32 -o " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream f(out);
  std::stringstream ss;
  ss << f.rdbuf();
  // 40 new tokens are drawn whole (kReportUnrolledTokens = 64): the prefill, every decode, and the
  // cache as its own category.
  EXPECT_NE(ss.str().find("kv cache"), std::string::npos);
  EXPECT_NE(ss.str().find("prefill."), std::string::npos);
  EXPECT_NE(ss.str().find("decode20."), std::string::npos);
  EXPECT_NE(ss.str().find("decode39."), std::string::npos);
}

TEST(HfGeneration, HtmlReportOfALongLoopShowsThePeakWindow) {
  // Past 64 new tokens the page shows the window holding the peak, as the estimate simulates it
  // (the last decode): no decode from the middle of the loop.
  const std::string out = std::string(HEADROOM_BINARY_DIR) + "/hf_generation_report_long.html";
  headroom::testing::CliRun r = headroom::testing::run_cli(
      "report " + validation_config("tiny-llama-gqa.json") +
      " --mode generate --prompt 2 --new-tokens 80 --precision fp32 -o " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream f(out);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_NE(ss.str().find("decode79."), std::string::npos);
  EXPECT_EQ(ss.str().find("decode40."), std::string::npos);
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

TEST(HfGeneration, BadBeamAndCacheOptionsAreOneLineErrors) {
  const std::string gen = "estimate " + validation_config("tiny-llama-gqa.json") + " --mode generate --prompt 4 --new-tokens 3";
  headroom::testing::expect_usage_error(gen + " --beams 0", "--beams must be a positive integer");
  headroom::testing::expect_usage_error(gen + " --cache paged", "--cache must be dynamic or static");
  headroom::testing::expect_usage_error(gen + " --cache static --attention flash --precision bf16",
                                        "--cache static does not run with --attention flash");
  headroom::testing::expect_usage_error("estimate " + validation_config("tiny-llama-gqa.json") + " --mode infer --beams 2",
                                        "--beams applies to --mode generate");
  headroom::testing::expect_usage_error("estimate " + validation_config("tiny-llama-gqa.json") + " --mode infer --cache static",
                                        "--cache applies to --mode generate");
}

TEST(HfGeneration, TrainingOnlyOptionsAreErrors) {
  EstimateOptions o = generate_options(validation_config("tiny-llama-gqa.json"), 2, 4, 3);
  o.micro_batch = 1;
  Result<Estimate> e = estimate(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().find("--micro-batch applies to training only"), std::string::npos) << e.error();
  o.micro_batch.reset();
  o.seq = 8;
  e = estimate(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().find("--seq does not apply"), std::string::npos) << e.error();
  // prompt + new tokens - 1 must fit max_position_embeddings (512).
  e = estimate(generate_options(validation_config("tiny-llama-gqa.json"), 1, 500, 14));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().find("max_position_embeddings 512"), std::string::npos) << e.error();
}

}  // namespace
}  // namespace headroom
