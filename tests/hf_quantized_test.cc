// --weights int8|nf4|int4|fp8 on a Hugging Face decoder: the stored bytes of each format and the
// kernels' temporaries, by hand, on tiny-llama-gqa (hidden 256, 2 layers, 8 heads, 4 kv heads of
// 32, ffn 688, vocab 1000). Per layer the quantized linears are q 256x256, k and v 128x256,
// o 256x256, gate and up 688x256, down 256x688: 724,992 values (1,449,984 for both layers).
// Not quantized, in the model dtype (2 bytes): embed and lm_head 2 x 256,000 values = 1,024,000
// bytes, five norms of 256 = 2,560 bytes; inv_freq 16 fp32 values = 64 bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "estimate/estimate.h"
#include "frontends/model_source.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

EstimateOptions options(WeightFormat w, Precision p, RunMode mode = RunMode::Inference) {
  EstimateOptions o;
  o.model = std::string(HEADROOM_SOURCE_DIR) + "/validation/hf-configs/tiny-llama-gqa.json";
  ModelSourceOptions src;
  src.precision_given = true;
  select_frontend(o, src);
  o.precision = p;
  o.weights = w;
  o.mode = mode;
  o.seq = 16;
  o.keep_program = true;
  return o;
}

Estimate run(const EstimateOptions& o) {
  Result<Estimate> e = estimate(o);
  EXPECT_TRUE(e.ok()) << e.error();
  return e.ok() ? e.value() : Estimate{};
}

std::vector<int64_t> temps_of(const Program& p, const std::string& name) {
  std::vector<int64_t> out;
  for (const Buffer& b : p.buffers) {
    if (b.name == name) out.push_back(b.bytes);
  }
  std::sort(out.begin(), out.end());
  return out;
}

constexpr int64_t kUnquantized = 1'024'000 + 2'560 + 64;

TEST(HfQuantized, Nf4StoresHalfAByteAValueAndDoubleQuantizedAbsmax) {
  // Per linear of n values: n / 2 packed bytes, ceil(n / 64) uint8 absmax, 4 x ceil(blocks / 256)
  // nested fp32 absmax, a 4-byte offset and the 64-byte NF4 code:
  //   q, o (65,536): 32,768 + 1,024 + 16 + 68 = 33,876; k, v (32,768): 16,384 + 512 + 8 + 68 = 16,972;
  //   gate, up, down (176,128): 88,064 + 2,752 + 44 + 68 = 90,928
  //   per layer 2 x 33,876 + 2 x 16,972 + 3 x 90,928 = 374,480; 2 layers = 748,960
  Estimate e = run(options(WeightFormat::Nf4, Precision::Bf16));
  EXPECT_EQ(e.weights_bytes, 748'960 + kUnquantized);
  EXPECT_EQ(e.parameter_count, 1'963'264);  // values, as transformers' num_parameters() counts them
  // MatMul4Bit with 16 tokens: dequantize_4bit's fp32 absmax (2,752 blocks x 4 = 11,008 bytes) and
  // the bf16 weight (176,128 x 2 = 352,256 bytes) while gate_proj runs.
  EXPECT_EQ(temps_of(e.program, "model.layers.0.mlp.gate_proj.tmp"), (std::vector<int64_t>{11'008, 352'256}));
  // Decoding one token without grad takes gemv_4bit: no temporaries. (Two new tokens: one
  // simulated window, [prefill, decode 1], whose program is kept.)
  EstimateOptions g = options(WeightFormat::Nf4, Precision::Bf16);
  g.seq.reset();
  g.generation = GenerationOptions{4, 2};
  Estimate d = run(g);
  EXPECT_TRUE(std::any_of(d.program.steps.begin(), d.program.steps.end(),
                          [](const Step& s) { return s.label == "decode1.model.layers.0.mlp.gate_proj"; }));
  EXPECT_TRUE(temps_of(d.program, "decode1.model.layers.0.mlp.gate_proj.tmp").empty());
}

TEST(HfQuantized, Int8StoresAByteAValueAndRowScales) {
  // 1,449,984 int8 values + fp32 SCB per output row: q 256 + k 128 + v 128 + o 256 + gate 688 +
  // up 688 + down 256 = 2,400 rows x 4 = 9,600 bytes per layer.
  Estimate e = run(options(WeightFormat::Int8, Precision::Bf16));
  EXPECT_EQ(e.weights_bytes, 1'449'984 + 2 * 9'600 + kUnquantized);
  // q_proj on 16 bf16 tokens: A.to(float16) 16 x 256 x 2 = 8,192; CA 4,096 + SCA 64 + int32
  // product 16 x 256 x 4 = 16,384 + the fp16 result 8,192 = 28,736.
  EXPECT_EQ(temps_of(e.program, "model.layers.0.self_attn.q_proj.tmp"), (std::vector<int64_t>{8'192, 28'736}));
}

TEST(HfQuantized, Int4IsGptqStorageWithTheExllamaScratch) {
  // group 128: qweight in x out / 2 bytes, qzeros ceil(in / 128) x out / 8 int32, scales
  // ceil(in / 128) x out fp16, g_idx in int32:
  //   q, o: 32,768 + 256 + 1,024 + 1,024 = 35,072; k, v: 16,384 + 128 + 512 + 1,024 = 18,048;
  //   gate, up: 88,064 + 688 + 2,752 + 1,024 = 92,528; down (in 688: 6 groups):
  //   88,064 + 768 + 3,072 + 2,752 = 94,656 -> per layer 385,952, 2 layers 771,904
  // exllamav2 scratch: the largest in x out x 2 + 128 + out x 2048 x 8 x 4 + 128 (gate/up, out 688):
  //   352,256 + 128 + 45,088,768 + 128 = 45,441,280
  Estimate e = run(options(WeightFormat::Int4, Precision::Fp16));
  EXPECT_EQ(e.weights_bytes, 771'904 + 45'441'280 + kUnquantized);
  EXPECT_EQ(e.parameter_count, 1'963'264);
  EXPECT_TRUE(temps_of(e.program, "model.layers.0.mlp.gate_proj.tmp").empty());
}

TEST(HfQuantized, Fp8StoresAByteAValueWithFp32RowScales) {
  // FbgemmFp8Linear: 1,449,984 float8_e4m3fn values, fp32 weight_scale per output row (2,400 rows
  // x 4 = 9,600 bytes per layer) and a 4-byte input_scale_ub per linear (7 x 4 = 28 per layer).
  Estimate e = run(options(WeightFormat::Fp8, Precision::Bf16));
  EXPECT_EQ(e.weights_bytes, 1'449'984 + 2 * (9'600 + 28) + kUnquantized);
  EXPECT_EQ(e.parameter_count, 1'963'264);
  // q_proj on 16 tokens: quantize_fp8_per_row's fp8 activations 16 x 256 = 4,096 bytes and fp32
  // row scales 16 x 4 = 64, alive while f8f8bf16_rowwise makes the output: 4,160 bytes.
  EXPECT_EQ(temps_of(e.program, "model.layers.0.self_attn.q_proj.tmp"), (std::vector<int64_t>{4'160}));
  // Decoding one token: 256 + 4 bytes for q_proj, 688 + 4 for down_proj.
  // (Two new tokens: one simulated window, [prefill, decode 1], the program kept.)
  EstimateOptions g = options(WeightFormat::Fp8, Precision::Bf16);
  g.seq.reset();
  g.generation = GenerationOptions{4, 2};
  Estimate d = run(g);
  EXPECT_EQ(temps_of(d.program, "decode1.model.layers.0.self_attn.q_proj.tmp"), (std::vector<int64_t>{260}));
  EXPECT_EQ(temps_of(d.program, "decode1.model.layers.0.mlp.down_proj.tmp"), (std::vector<int64_t>{692}));
}

TEST(HfQuantized, QloraTrainsTheAdaptersOnAnNf4Base) {
  EstimateOptions o = options(WeightFormat::Nf4, Precision::Bf16, RunMode::Training);
  o.lora = LoraConfig{8, 16.0, {"q_proj", "v_proj"}, 0.0};
  o.optimizer = OptimizerKind::PagedAdamW8bit;
  Estimate e = run(o);
  EXPECT_EQ(e.trainable_parameter_count, 14'336);
  // Adapters under 4096 elements keep 32-bit state: 2 x 14,336 x 4 bytes.
  EXPECT_EQ(e.breakdown_at_peak[static_cast<size_t>(Category::OptimizerState)], 114'688);
}

TEST(HfQuantized, BadCombinationsAreOneLineErrors) {
  for (auto [w, p, mode, what] : {std::tuple{WeightFormat::Int4, Precision::Bf16, RunMode::Inference, "runs in fp16"},
                                  std::tuple{WeightFormat::Int4, Precision::Fp16, RunMode::Training, "inference only"},
                                  std::tuple{WeightFormat::Nf4, Precision::Fp32, RunMode::Inference, "fp16 or bf16"},
                                  std::tuple{WeightFormat::Fp8, Precision::Fp16, RunMode::Inference, "runs in bf16"},
                                  std::tuple{WeightFormat::Fp8, Precision::Bf16, RunMode::Training, "inference only"}}) {
    Result<Estimate> e = estimate(options(w, p, mode));
    ASSERT_FALSE(e.ok());
    EXPECT_NE(e.error().find(what), std::string::npos) << e.error();
  }
  EstimateOptions g = options(WeightFormat::Nf4, Precision::Bf16);
  g.group_size = 64;
  Result<Estimate> e = estimate(g);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().find("--group-size applies to --weights int4"), std::string::npos) << e.error();
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
