// Hugging Face config.json as models (src/frontends/hf): parameter counts of the published
// checkpoints from the configs shipped in data/hf-configs/, the frontend choice, the default
// precision from torch_dtype, and one-line errors for unknown model types and missing fields.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli_runner.h"
#include "estimate/estimate.h"
#include "frontends/hf/hf_frontend.h"
#include "frontends/model_source.h"
#include "util/error.h"

namespace headroom {
namespace {

using headroom::testing::CliRun;
using headroom::testing::run_cli;

std::string config(const std::string& name) { return std::string(HEADROOM_SOURCE_DIR) + "/data/hf-configs/" + name + ".json"; }

int64_t params(const std::string& name) {
  BuildConfig c;
  c.batch = 1;
  c.seq = 4;
  c.inference = true;
  return hf_graph_loader(config(name)).load(c).parameter_count();
}

// The published counts are what `sum(p.numel() for p in model.parameters())` prints for the
// checkpoint (tied weights once); each is re-derived below from the config's sizes.
TEST(HfConfig, DecoderParameterCountsEqualThePublishedCheckpoints) {
  // Llama-2-7B (meta-llama/Llama-2-7b-hf, 6,738,415,616 in the model card's "7B"; HF's
  // num_parameters()): H 4096, L 32, FFN 11008, V 32000, untied.
  //   layer: q,k,v,o 4 * 4096^2 = 67,108,864; mlp 3 * 4096 * 11008 = 135,266,304; norms 8,192
  //          = 202,383,360 (x 32 = 6,476,267,520); embed + lm_head 2 * 32000 * 4096 = 262,144,000;
  //   norm 4,096 -> 6,738,415,616
  EXPECT_EQ(params("llama-2-7b"), 6'738'415'616);
  // Llama-3-8B (8,030,261,248): H 4096, kv heads 8 (k, v 4096 -> 1024), FFN 14336, V 128256.
  //   layer: 2 * 4096^2 + 2 * 4096 * 1024 = 41,943,040; mlp 3 * 4096 * 14336 = 176,160,768;
  //          norms 8,192 = 218,112,000 (x 32 = 6,979,584,000); 2 * 128256 * 4096 = 1,050,673,152;
  //   norm 4,096 -> 8,030,261,248
  EXPECT_EQ(params("llama-3-8b"), 8'030'261'248);
  // Llama-3.1-70B (70,553,706,496): H 8192, L 80, kv 8 (1024), FFN 28672, V 128256.
  //   layer: 2 * 8192^2 + 2 * 8192 * 1024 = 150,994,944; mlp 3 * 8192 * 28672 = 704,643,072;
  //          norms 16,384 = 855,654,400 (x 80 = 68,452,352,000); 2 * 128256 * 8192 = 2,101,346,304;
  //   norm 8,192 -> 70,553,706,496
  EXPECT_EQ(params("llama-3.1-70b"), 70'553'706'496);
  // Mistral-7B-v0.1 (7,241,732,096): Llama-3-8B's layer (218,112,000 x 32) with V 32000:
  //   6,979,584,000 + 2 * 32000 * 4096 = 262,144,000 + 4,096 -> 7,241,732,096
  EXPECT_EQ(params("mistral-7b-v0.1"), 7'241'732'096);
  // Mixtral-8x7B (46,702,792,704): attention 41,943,040; 8 experts x 3 x 4096 x 14336 =
  //   1,409,286,144; router 8 * 4096 = 32,768; norms 8,192 = 1,451,270,144 per layer
  //   (x 32 = 46,440,644,608); 2 * 32000 * 4096 = 262,144,000; norm 4,096 -> 46,702,792,704
  EXPECT_EQ(params("mixtral-8x7b"), 46'702'792'704);
  // Qwen2-7B (7,615,616,512): H 3584, L 28, heads 28, kv 4 (512), FFN 18944, V 152064, q/k/v biases.
  //   layer: q 3584^2 + 3584 = 12,848,640; k, v 2 * (512 * 3584 + 512) = 3,671,040;
  //          o 3584^2 = 12,845,056; mlp 3 * 3584 * 18944 = 203,685,888; norms 7,168
  //          = 233,057,792 (x 28 = 6,525,618,176); 2 * 152064 * 3584 = 1,089,994,752;
  //   norm 3,584 -> 7,615,616,512
  EXPECT_EQ(params("qwen2-7b"), 7'615'616'512);
  // Gemma-7B (8,537,680,896): H 3072, L 28, 16 heads of 256 (q, k, v, o: 4096 x 3072 each),
  //   FFN 24576, V 256000, lm_head tied.
  //   layer: 4 * 4096 * 3072 = 50,331,648; mlp 3 * 3072 * 24576 = 226,492,416; norms 6,144
  //          = 276,830,208 (x 28 = 7,751,245,824); embed 256000 * 3072 = 786,432,000; norm 3,072
  //   -> 8,537,680,896
  EXPECT_EQ(params("gemma-7b"), 8'537'680'896);
  // Gemma-2-9B (9,241,705,984): H 3584, L 42, 16 heads of 256, kv 8, FFN 14336, tied, 4 norms.
  //   layer: q, o 2 * 4096 * 3584 = 29,360,128; k, v 2 * 2048 * 3584 = 14,680,064;
  //          mlp 3 * 3584 * 14336 = 154,140,672; norms 4 * 3584 = 14,336 = 198,195,200
  //          (x 42 = 8,324,198,400); embed 256000 * 3584 = 917,504,000; norm 3,584 -> 9,241,705,984
  EXPECT_EQ(params("gemma-2-9b"), 9'241'705'984);
  // Phi-3-mini-4k (3,821,079,552): H 3072, L 32, FFN 8192, V 32064, fused qkv and gate_up.
  //   layer: qkv 9216 * 3072 = 28,311,552; o 9,437,184; gate_up 16384 * 3072 = 50,331,648;
  //          down 3072 * 8192 = 25,165,824; norms 6,144 = 113,252,352 (x 32 = 3,624,075,264);
  //   2 * 32064 * 3072 = 197,001,216; norm 3,072 -> 3,821,079,552
  EXPECT_EQ(params("phi-3-mini-4k"), 3'821'079'552);
  // Pythia-6.9B (6,857,302,016): H 4096, L 32, FFN 16384, V 50432, biases, LayerNorms, untied.
  //   layer: 2 LayerNorms 16,384; qkv 3 * 4096^2 + 12,288 = 50,343,936; dense 4096^2 + 4096 =
  //          16,781,312; h_to_4h 16384 * 4096 + 16384 = 67,125,248; 4h_to_h 4096 * 16384 + 4096 =
  //          67,112,960 = 201,379,840 (x 32 = 6,444,154,880); embed_in + embed_out
  //          2 * 50432 * 4096 = 413,138,944; final LayerNorm 8,192 -> 6,857,302,016
  EXPECT_EQ(params("pythia-6.9b"), 6'857'302'016);
  // Falcon-7B (6,921,720,704): H 4544, L 32, 71 heads of 64, multi-query (qkv out 4544 + 128),
  //   no biases, one LayerNorm per layer, lm_head tied.
  //   layer: LayerNorm 9,088; qkv 4672 * 4544 = 21,229,568; dense 4544^2 = 20,647,936;
  //          mlp 2 * 4 * 4544^2 = 165,183,488 = 207,070,080 (x 32 = 6,626,242,560);
  //   embed 65024 * 4544 = 295,469,056; ln_f 9,088 -> 6,921,720,704
  EXPECT_EQ(params("falcon-7b"), 6'921'720'704);
}

TEST(HfConfig, Gpt2AndBertGoThroughTheZooBuilders) {
  // GPT-2 (124,439,808): 12 * (12 * 768^2 + 13 * 768) + (50257 + 1024) * 768 + 2 * 768, tied.
  EXPECT_EQ(params("gpt2"), 124'439'808);
  // BERT-base-uncased: BertModel 109,482,240 (embeddings 23,837,184 + 12 layers x 7,087,872 +
  // pooler 590,592) plus the zoo's 2-label classifier 768 * 2 + 2 = 1,538.
  EXPECT_EQ(params("bert-base-uncased"), 109'482'240 + 1'538);
}

TEST(HfConfig, T5BaseParameterCountAndModes) {
  // T5-base (t5-base, T5ForConditionalGeneration: 222,903,552): d_model 768, 12 heads of 64,
  // d_ff 3072, 12 + 12 blocks, vocab 32128, lm_head tied to `shared`.
  //   shared 32128 x 768 = 24,674,304
  //   encoder block: q,k,v,o 4 x 768^2 = 2,359,296; wi, wo 2 x 768 x 3072 = 4,718,592;
  //     2 layer norms 1,536 = 7,079,424 (x 12 = 84,953,088); relative bias 32 x 12 = 384;
  //     final norm 768 -> 84,954,240
  //   decoder block: + EncDecAttention 2,359,296 and its norm 768 = 9,439,488 (x 12 =
  //     113,273,856); relative bias 384; final norm 768 -> 113,275,008
  //   24,674,304 + 84,954,240 + 113,275,008 = 222,903,552
  EXPECT_EQ(params("t5-base"), 222'903'552);
  for (RunMode mode : {RunMode::Inference, RunMode::Training}) {
    EstimateOptions o;
    o.model = config("t5-base");
    select_frontend(o, {});
    o.mode = mode;
    o.seq = 64;
    Result<Estimate> e = estimate(o);
    ASSERT_TRUE(e.ok()) << e.error();
    EXPECT_GT(e.value().peak_bytes, e.value().weights_bytes);
  }
  EstimateOptions g;
  g.model = config("t5-base");
  g.generation = GenerationOptions{8, 4};
  g.mode = RunMode::Inference;
  select_frontend(g, {});
  Result<Estimate> e = estimate(g);  // encoder once, then the decoder with its cache
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_GT(e.value().kv_cache_bytes, 0);
}

std::string write_config(const std::string& name, const std::string& body) {
  auto dir = std::filesystem::path(HEADROOM_BINARY_DIR) / "hf_config_test" / name;
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << body;
  return dir.string();
}

TEST(HfConfig, BadConfigsAreOneLineErrors) {
  std::string mamba = write_config("mamba", R"({"model_type": "mamba", "hidden_size": 64})");
  try {
    hf_graph_loader(mamba);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("model_type 'mamba' is not supported"), std::string::npos) << e.what();
  }
  std::string dir = write_config("missing", R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2})");
  try {
    hf_graph_loader(dir);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("missing field 'num_attention_heads'"), std::string::npos) << e.what();
  }
  CliRun r = run_cli("estimate " + dir + " --mode infer");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("missing field 'num_attention_heads'"), std::string::npos) << r.err;
  r = run_cli("estimate " + mamba);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("model_type 'mamba'"), std::string::npos) << r.err;
  r = run_cli("estimate " + config("nope"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("cannot read"), std::string::npos) << r.err;
}

// Found by hf_config_fuzz (fuzz/corpus/hf/crash-model-type-newline): a JSON "\n" in model_type,
// torch_dtype or feed_forward_proj reached the library's message as a raw newline.
TEST(HfConfig, ControlBytesInConfigStringsStayOneLine) {
  const char* configs[] = {
      R"({"model_type": "lla\nma", "hidden_size": 64})",
      R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
          "num_attention_heads": 4, "vocab_size": 32, "torch_dtype": "float\n16"})",
      R"({"model_type": "t5", "d_model": 64, "d_ff": 128, "d_kv": 16, "num_layers": 1, "num_heads": 4,
          "vocab_size": 32, "feed_forward_proj": "gated\ngelu"})",
      R"({"model_type": "llama", "hidden_size": [1, [2, "x\ny"]], "num_hidden_layers": 1})",
  };
  for (const char* text : configs) {
    try {
      parse_hf_config(text, "config.json");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      EXPECT_NE(what.find("config.json: "), std::string::npos) << what;
    }
  }
}

TEST(HfConfig, FrontendChoiceAndDefaultPrecision) {
  std::string dir = write_config("tiny", R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100,
      "max_position_embeddings": 64, "torch_dtype": "bfloat16"})");
  EXPECT_EQ(model_source_kind(dir), ModelSourceKind::HuggingFace);
  EXPECT_EQ(model_source_kind(config("llama-3-8b")), ModelSourceKind::HuggingFace);
  EXPECT_EQ(model_source_kind("gpt2"), ModelSourceKind::Builtin);
  EstimateOptions o;
  o.model = dir;
  o.mode = RunMode::Inference;
  select_frontend(o, {});
  EXPECT_EQ(o.precision, Precision::Bf16);  // torch_dtype
  EstimateOptions given;
  given.model = dir;
  ModelSourceOptions src;
  src.precision_given = true;
  select_frontend(given, src);
  EXPECT_EQ(given.precision, Precision::Fp32);
  // max_position_embeddings is the sequence limit.
  o.seq = 65;
  Result<Estimate> e = estimate(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().find("max_position_embeddings"), std::string::npos) << e.error();
  // --attention and generation need a Hugging Face config.
  EstimateOptions zoo;
  zoo.model = "gpt2";
  zoo.attention = AttentionKind::Eager;
  EXPECT_THROW(select_frontend(zoo, {}), InputError);
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

// Every shipped decoder config estimates in each mode and attention (small sizes: the point is
// that every family's forward builds and simulates; the numbers are pinned elsewhere).
TEST(HfConfig, EveryFamilyRunsInEveryModeAndAttention) {
  for (const char* name : {"llama-2-7b", "llama-3-8b", "mistral-7b-v0.1", "mixtral-8x7b", "qwen2-7b", "gemma-7b",
                           "gemma-2-9b", "phi-3-mini-4k", "pythia-6.9b", "falcon-7b"}) {
    for (AttentionKind a : {AttentionKind::Eager, AttentionKind::Sdpa, AttentionKind::Flash}) {
      EstimateOptions o;
      o.model = config(name);
      o.attention = a;
      ModelSourceOptions src;
      src.precision_given = true;
      select_frontend(o, src);
      o.precision = Precision::Bf16;
      o.mode = RunMode::Inference;
      o.seq = 8;
      Result<Estimate> e = estimate(o);
      ASSERT_TRUE(e.ok()) << name << ": " << e.error();
      EXPECT_GT(e.value().peak_bytes, e.value().weights_bytes) << name;
      o.seq.reset();
      o.generation = GenerationOptions{6, 4};
      e = estimate(o);
      ASSERT_TRUE(e.ok()) << name << ": " << e.error();
      EXPECT_GT(e.value().kv_cache_bytes, 0) << name;
      o.generation.reset();
      o.mode = RunMode::Training;
      o.seq = 4;
      o.iterations = 1;
      o.optimizer = OptimizerKind::Sgd;
      e = estimate(o);
      ASSERT_TRUE(e.ok()) << name << ": " << e.error();
    }
  }
}

}  // namespace
}  // namespace headroom
