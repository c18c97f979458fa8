// Generation with a DynamicCache (--mode generate on Hugging Face configs): the KV cache size
// rule, the two-window shortcut against the fully unrolled run, and the peaks measured on CPU by
// validation/hf_generate.py (PyTorch 1.13, eager attention), which must match to the byte.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "estimate/estimate.h"
#include "frontends/hf/hf_frontend.h"
#include "frontends/model_source.h"
#include "schedule/build_program.h"
#include "sim/simulate.h"

namespace headroom {
namespace {

std::string validation_config(const std::string& name) {
  return std::string(HEADROOM_SOURCE_DIR) + "/validation/hf-configs/" + name;
}

EstimateOptions generate_options(const std::string& config, int64_t batch, int64_t prompt, int64_t new_tokens) {
  EstimateOptions o;
  o.model = config;
  o.batch = batch;
  o.mode = RunMode::Inference;
  o.device = "cpu";
  o.attention = AttentionKind::Eager;
  o.generation = GenerationOptions{prompt, new_tokens};
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
  cfg.generation = GenerationWindow{o.generation->prompt, o.generation->new_tokens, 0, o.generation->new_tokens - 1};
  return build_program(o.graph_loader(cfg), schedule_options(o));
}

// Live bytes per category just before the program's last step ("drop outputs").
CategoryBytes live_before_last_step(const Program& p) {
  CategoryBytes live{};
  std::vector<Category> cat(p.buffers.size());
  for (int32_t ei = 0; ei < p.steps.back().first_event; ++ei) {
    const Event& e = p.events[static_cast<size_t>(ei)];
    const Buffer& b = p.buffers[static_cast<size_t>(e.buffer)];
    if (e.kind == Event::Kind::Alloc) {
      cat[static_cast<size_t>(e.buffer)] = b.category;
      live[static_cast<size_t>(b.category)] += b.bytes;
    } else if (e.kind == Event::Kind::Free) {
      live[static_cast<size_t>(cat[static_cast<size_t>(e.buffer)])] -= b.bytes;
    }
  }
  return live;
}

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

TEST(HfGeneration, TwoWindowsGiveTheUnrolledPeak) {
  // Decode forward i + 1 repeats forward i's program on a longer cache, so simulating the prefill,
  // decode 1 and the last decode finds the same peak as every forward in one program.
  for (auto [prompt, new_tokens] : {std::pair<int64_t, int64_t>{2, 12}, {16, 6}, {1, 3}, {5, 1}}) {
    EstimateOptions o = generate_options(validation_config("tiny-llama-gqa.json"), 2, prompt, new_tokens);
    for (AttentionKind a : {AttentionKind::Eager, AttentionKind::Sdpa}) {
      o.attention = a;
      Result<Estimate> e = estimate(o);
      ASSERT_TRUE(e.ok()) << e.error();
      SimResult full = simulate(unrolled(o));
      EXPECT_EQ(e.value().peak_bytes, full.peak.bytes) << "prompt " << prompt << ", " << new_tokens << " new tokens";
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
  ASSERT_GE(j.at("cases").size(), 4u);
  for (const nlohmann::json& c : j.at("cases")) {
    EstimateOptions o = generate_options(validation_config(c.at("config").get<std::string>()), c.at("batch").get<int64_t>(),
                                         c.at("prompt").get<int64_t>(), c.at("new_tokens").get<int64_t>());
    Result<Estimate> e = estimate(o);
    ASSERT_TRUE(e.ok()) << e.error();
    std::string id = c.at("config").get<std::string>() + " b" + std::to_string(o.batch) + " p" +
                     std::to_string(o.generation->prompt) + " n" + std::to_string(o.generation->new_tokens);
    EXPECT_EQ(e.value().peak_bytes, c.at("peak_bytes").get<int64_t>()) << id;
    std::string measured_step = c.at("peak_forward").get<std::string>();
    std::string predicted_step = e.value().peak_forward == 0 ? "prefill" : "decode" + std::to_string(e.value().peak_forward);
    EXPECT_EQ(predicted_step, measured_step) << id;
  }
}

}  // namespace
}  // namespace headroom
