// Megatron tensor parallelism for Hugging Face decoder configs (src/frontends/hf/hf_tensor_parallel.h):
// one rank's parameters, derived by hand from the config's sizes and the split of
// megatron_split.h, the same split as the zoo's llama and gpt2, and the one-line errors of a T
// that splits no whole head.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "cli_runner.h"
#include "estimate/estimate.h"
#include "frontends/hf/hf_frontend.h"
#include "frontends/zoo/registry.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::CliRun;
using testing::run_cli;

std::string config(const std::string& name) { return std::string(HEADROOM_SOURCE_DIR) + "/data/hf-configs/" + name + ".json"; }

BuildConfig rank_of(int64_t t) {
  BuildConfig c;
  c.batch = 1;
  c.seq = 4;
  c.inference = true;
  c.tensor_parallel = t;
  return c;
}

int64_t rank_params(const std::string& name, int64_t t) { return hf_graph_loader(config(name)).load(rank_of(t)).parameter_count(); }

TEST(HfTensorParallel, LlamaConfigSplitsAsTheZoosLlama) {
  // Llama-2-7B per rank with T = 2 (the zoo's arithmetic, tests/sharding_test.cc): vocab 32,000
  // is a multiple of 128 * 2, embed_tokens and lm_head 16,000 * 4,096 = 65,536,000 each; per
  // layer q, k, v, o 2,048 * 4,096 (33,554,432), gate, up, down 5,504 * 4,096 (67,633,152),
  // norms 8,192 -> 101,195,776 x 32 = 3,238,264,832; final norm 4,096. Total 3,369,340,928.
  EXPECT_EQ(rank_params("llama-2-7b", 2), 3'369'340'928);
  EXPECT_EQ(rank_params("llama-2-7b", 2), build_model("llama-2-7b", rank_of(2)).parameter_count());
  // T = 8 (docs/distributed.md's table): embed, lm_head 4,000 * 4,096 = 16,384,000 each; per layer
  // 4 * 512 * 4,096 = 8,388,608 + 3 * 1,376 * 4,096 = 16,908,288 + 8,192 = 25,305,088 x 32
  // = 809,762,816; + 32,768,000 + 4,096 = 843,321,344.
  EXPECT_EQ(rank_params("llama-2-7b", 8), 843'321'344);
}

TEST(HfTensorParallel, GroupedQueryAttentionSplitsQueryGroupsAndPadsTheVocabulary) {
  // Mistral-7B (32 heads, 8 kv heads of 128, FFN 14,336, V 32,000, untied), T = 4:
  //   q 8 heads: 1,024 * 4,096 = 4,194,304; k, v 2 kv heads: 256 * 4,096 = 1,048,576 each;
  //   o 4,096 * 1,024 = 4,194,304 -> 10,485,760; gate, up, down 3,584 * 4,096 = 14,680,064 each
  //   -> 44,040,192; norms 8,192: 54,534,144 per layer, x 32 = 1,745,092,608;
  //   vocabulary padded to a multiple of 128 * 4 = 512: 32,256, 8,064 rows per rank:
  //   embed + lm_head 2 * 8,064 * 4,096 = 66,060,288; final norm 4,096 -> 1,811,156,992.
  EXPECT_EQ(rank_params("mistral-7b-v0.1", 4), 1'811'156'992);
}

TEST(HfTensorParallel, ColumnParallelBiasesAreSplitAndRanksAddUpToTheModel) {
  // Qwen2-7B (H 3,584, 28 heads, 4 kv heads of 128, FFN 18,944, V 152,064 = 594 * 256, q/k/v
  // biases, untied), T = 2:
  //   q 14 heads: 1,792 * 3,584 + 1,792 = 6,424,320; k, v 2 * (256 * 3,584 + 256) = 1,835,520;
  //   o 3,584 * 1,792 = 6,422,528 -> 14,682,368; MLP 3 * 9,472 * 3,584 = 101,842,944; norms
  //   7,168: 116,532,480 per layer, x 28 = 3,262,909,440; embed + lm_head 2 * 76,032 * 3,584
  //   = 544,997,376; final norm 3,584 -> 3,807,910,400.
  EXPECT_EQ(rank_params("qwen2-7b", 2), 3'807'910'400);
  // The vocabulary needs no padding, so two ranks hold the whole model once plus a second copy
  // of the replicated norms (28 * 7,168 + 3,584 = 204,288): 2 * 3,807,910,400 - 204,288 =
  // 7,615,616,512, the published count (hf_config_test.cc).
  EXPECT_EQ(2 * rank_params("qwen2-7b", 2) - 204'288, rank_params("qwen2-7b", 1));
}

TEST(HfTensorParallel, TiedEmbeddingIsOneVocabParallelTable) {
  // Gemma-7B (H 3,072, 16 heads = 16 kv heads of 256, FFN 24,576, V 256,000, tied), T = 2:
  //   q, k, v 2,048 * 3,072 = 6,291,456 each, o the same -> 25,165,824; MLP 3 * 12,288 * 3,072
  //   = 113,246,208; norms 6,144: 138,418,176 per layer, x 28 = 3,875,708,928; one table of
  //   128,000 * 3,072 = 393,216,000 (lm_head tied to it); final norm 3,072 -> 4,268,928,000.
  EXPECT_EQ(rank_params("gemma-7b", 2), 4'268'928'000);
}

TEST(HfTensorParallel, GptTwoConfigUsesTheZoosSplit) {
  // gpt2's config.json builds the zoo's GPT-2: 62,708,736 per rank at T = 2 (sharding_test.cc).
  EXPECT_EQ(rank_params("gpt2", 2), 62'708'736);
}

TEST(HfTensorParallel, RankEstimateCarriesTheLayout) {
  CliRun r = run_cli("estimate " + config("llama-3.1-70b") + " --seq 64 --gpus 16 --tensor-parallel 8 --zero 1 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"tensor_parallel\": 8"), std::string::npos) << r.out.substr(0, 2000);
  EXPECT_NE(r.out.find("\"data_parallel\": 2"), std::string::npos);
}

TEST(HfTensorParallel, SplitsThatAreNotWholeHeadsAreOneLineErrors) {
  const std::string tiny = std::string(HEADROOM_SOURCE_DIR) + "/validation/hf-configs/tiny-llama-gqa.json";
  const std::pair<std::string, std::string> cases[] = {
      // 8 key/value heads: T = 16 splits no whole query group.
      {config("llama-3.1-70b") + " --gpus 16 --tensor-parallel 16", "8 key/value heads"},
      // Falcon-7B has 71 heads.
      {config("falcon-7b") + " --gpus 2 --tensor-parallel 2", "71 attention heads"},
      {config("t5-base") + " --gpus 2 --tensor-parallel 2", "t5"},
      {config("bert-base-uncased") + " --gpus 2 --tensor-parallel 2", "no Megatron split"},
      {tiny + " --gpus 2 --tensor-parallel 2 --lora r=8,targets=q_proj", "--lora"},
      {tiny + " --gpus 2 --tensor-parallel 2 --mode infer --weights int8", "--weights"},
      {std::string(HEADROOM_SOURCE_DIR) + "/tests/data/onnx/bert_base_training.onnx --gpus 2 --tensor-parallel 2", "Megatron split"},
  };
  for (const auto& [args, fragment] : cases) testing::expect_usage_error("estimate " + args, fragment);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
