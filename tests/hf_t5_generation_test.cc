// T5 (encoder-decoder) generation, --mode generate on a t5 config.json: the encoder once, then
// the decoder one token at a time with an EncoderDecoderCache. Pins the cross-attention cache
// (fixed, the prompt's length), the self-attention cache (growing), the two-window shortcut
// against the unrolled run, and the CLI.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "cli_runner.h"
#include "estimate/estimate.h"
#include "estimate/parallel.h"
#include "frontends/model_source.h"
#include "schedule/build_program.h"
#include "sim/simulate.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

// tiny-t5: d_model 64, 4 heads of d_kv 16, 2 encoder and 3 decoder layers, vocab 256, fp32.
std::string tiny_t5() { return std::string(HEADROOM_SOURCE_DIR) + "/validation/hf-configs/tiny-t5.json"; }

EstimateOptions t5_generate(int64_t batch, int64_t prompt, int64_t new_tokens) {
  EstimateOptions o;
  o.model = tiny_t5();
  o.batch = batch;
  o.mode = RunMode::Inference;
  o.device = "cpu";
  o.generation = GenerationOptions{prompt, new_tokens};
  select_frontend(o, {});
  return o;
}

BuildConfig window_config(const EstimateOptions& o, int64_t first, int64_t last) {
  BuildConfig cfg;
  cfg.batch = o.batch;
  cfg.inference = true;
  cfg.generation = GenerationWindow{o.generation->prompt, o.generation->new_tokens, first, last};
  return cfg;
}

// Bytes of the graph's KV-cache storages whose name contains `part`.
int64_t cache_bytes(const Graph& g, const std::string& part) {
  int64_t n = 0;
  for (TensorId t : g.kv_cache) {
    if (g.tensors[static_cast<size_t>(t)].name.find(part) != std::string::npos) n += g.tensors[static_cast<size_t>(t)].bytes();
  }
  return n;
}

// Live bytes per category just before the program's last step ("drop outputs").
CategoryBytes live_before_last_step(const Program& p) { return category_bytes_before(p, p.steps.back().first_event); }

TEST(HfT5Generation, CrossAttentionCacheIsTwoLayersHeadsDkvPromptBatchBytes) {
  // Batch 3, prompt 10, 5 new tokens, fp32. The cross-attention cache is made once, in the
  // first forward, from the encoder output: per decoder layer a key and a value
  // [3, 4 heads, 10, 16]:
  //   2 x 3 decoder layers x 4 heads x 16 x 10 prompt tokens x 3 batch x 4 bytes = 46,080 bytes.
  EstimateOptions o = t5_generate(3, 10, 5);
  Graph first = o.graph_loader(window_config(o, 0, 1));
  EXPECT_EQ(cache_bytes(first, "EncDecAttention"), 2 * 3 * 4 * 16 * 10 * 3 * 4);
  EXPECT_EQ(cache_bytes(first, "EncDecAttention"), 46'080);
  // The last window carries it in unchanged (inputs named past_key_values.<i>.cross_attention).
  Graph last = o.graph_loader(window_config(o, 4, 4));
  EXPECT_EQ(cache_bytes(last, "cross_attention"), 46'080);
  EXPECT_EQ(cache_bytes(last, "EncDecAttention"), 0);  // no projection of the encoder output again
}

TEST(HfT5Generation, SelfAttentionCacheGrowsOneTokenPerForward) {
  // After the last of 5 forwards the self-attention cache holds the decoder start token and the
  // 4 tokens fed after it, 5 positions:
  //   2 x 3 layers x 4 heads x 16 x 5 tokens x 3 batch x 4 bytes = 23,040 bytes,
  // beside the fixed cross-attention cache of 46,080: 69,120 bytes of KV cache in all.
  EstimateOptions o = t5_generate(3, 10, 5);
  Program p = build_program(o.graph_loader(window_config(o, 0, 4)), schedule_options(o));
  CategoryBytes live = live_before_last_step(p);
  EXPECT_EQ(live[static_cast<size_t>(Category::KvCache)], 2 * 3 * 4 * 16 * 5 * 3 * 4 + 46'080);
  EXPECT_EQ(live[static_cast<size_t>(Category::KvCache)], 69'120);
  // The last forward's self-attention cache is the cat output of 5 positions.
  Graph last = o.graph_loader(window_config(o, 4, 4));
  EXPECT_EQ(cache_bytes(last, "key_cache.cat") + cache_bytes(last, "value_cache.cat"), 23'040);
}

// The estimate simulates [prefill, decode 1] and [decode M-1] only; the last window's carried-in
// cross-attention cache must keep the projection's layout (a transposed view, which the
// attention matmul copies) for its peak to equal the unrolled run's.
TEST(HfT5Generation, TwoWindowsGiveTheUnrolledPeak) {
  for (auto [batch, prompt, new_tokens] : {std::tuple{1, 6, 2}, std::tuple{2, 9, 4}, std::tuple{3, 32, 7}}) {
    EstimateOptions o = t5_generate(batch, prompt, new_tokens);
    Result<Estimate> e = estimate(o);
    ASSERT_TRUE(e.ok()) << e.error();
    SimResult full = simulate(build_program(o.graph_loader(window_config(o, 0, new_tokens - 1)), schedule_options(o)));
    EXPECT_EQ(e.value().peak_bytes, full.peak.bytes) << batch << " " << prompt << " " << new_tokens;
  }
}

TEST(HfT5Generation, CliEstimatesAndRejectsBeamsAndStaticCache) {
  const std::string gen = "estimate " + tiny_t5() + " --mode generate --prompt 16 --new-tokens 8 --batch 2";
  headroom::testing::CliRun r = headroom::testing::run_cli(gen);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("KV cache"), std::string::npos) << r.out;
  headroom::testing::expect_usage_error(gen + " --beams 2", "--beams applies to the decoder-only families, not t5");
  headroom::testing::expect_usage_error(gen + " --cache static", "--cache static applies to the decoder-only families, not t5");
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
