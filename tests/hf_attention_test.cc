// --attention eager|sdpa|flash on a Hugging Face decoder: which buffers each implementation
// allocates (hf_decoder.cc cites the upstream function of each rule). tiny-llama-gqa: 8 heads of
// 32, 4 kv heads; batch 2, sequence 16.
#include <gtest/gtest.h>

#include <string>

#include "estimate/estimate.h"
#include "frontends/model_source.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

Program program(AttentionKind a, Precision p, RunMode mode) {
  EstimateOptions o;
  o.model = std::string(HEADROOM_SOURCE_DIR) + "/validation/hf-configs/tiny-llama-gqa.json";
  o.attention = a;
  ModelSourceOptions src;
  src.precision_given = true;
  select_frontend(o, src);
  o.precision = p;
  o.mode = mode;
  o.batch = 2;
  o.seq = 16;
  o.iterations = 1;
  o.keep_program = true;
  Result<Estimate> e = estimate(o);
  EXPECT_TRUE(e.ok()) << e.error();
  return e.value().program;
}

// Bytes of the buffer named `name` (0 when there is none).
int64_t bytes_of(const Program& p, const std::string& name) {
  for (const Buffer& b : p.buffers) {
    if (b.name == name) return b.bytes;
  }
  return 0;
}

const std::string kAttn = "model.layers.0.self_attn";

TEST(HfAttention, EagerMaterialisesScoresAndProbabilities) {
  Program p = program(AttentionKind::Eager, Precision::Bf16, RunMode::Inference);
  // q @ k^T: [2, 8, 16, 16] bf16 = 8,192 bytes; the softmax runs in float32: 16,384 bytes.
  EXPECT_EQ(bytes_of(p, kAttn + ".matmul_scores"), 2 * 8 * 16 * 16 * 2);
  EXPECT_EQ(bytes_of(p, kAttn + ".softmax"), 2 * 8 * 16 * 16 * 4);
  // the 4-D causal mask of _update_causal_mask: [16, 16 + 1] bf16 (expanded to the batch as a view)
  EXPECT_EQ(bytes_of(p, "_update_causal_mask.full"), 16 * 17 * 2);
  // repeat_kv copies keys and values to 8 heads: [2, 8, 16, 32] bf16 = 16,384 bytes each.
  EXPECT_EQ(bytes_of(p, kAttn + ".repeat_kv_key.reshape"), 16'384);
}

TEST(HfAttention, SdpaInHalfPrecisionIsTheFlashKernel) {
  Program p = program(AttentionKind::Sdpa, Precision::Bf16, RunMode::Inference);
  EXPECT_EQ(bytes_of(p, kAttn + ".matmul_scores"), 0);
  EXPECT_EQ(bytes_of(p, "_update_causal_mask.full"), 0);  // no mask: is_causal
  // output [2, 16, 8, 32] bf16 = 16,384; logsumexp [2, 8, 16] float32 = 1,024.
  EXPECT_EQ(bytes_of(p, kAttn + ".scaled_dot_product_attention"), 16'384);
  EXPECT_EQ(bytes_of(p, kAttn + ".scaled_dot_product_attention:1"), 1'024);
  // transformers' sdpa path still repeats the kv heads first.
  EXPECT_EQ(bytes_of(p, kAttn + ".repeat_kv_key.reshape"), 16'384);
}

TEST(HfAttention, SdpaInFloat32IsTheMemoryEfficientKernel) {
  // Output [2, 16, 8, 32] float32 = 32,768; no logsumexp without grad.
  Program infer = program(AttentionKind::Sdpa, Precision::Fp32, RunMode::Inference);
  EXPECT_EQ(bytes_of(infer, kAttn + ".scaled_dot_product_attention"), 32'768);
  EXPECT_EQ(bytes_of(infer, kAttn + ".scaled_dot_product_attention:1"), 0);
  // Under grad: logsumexp [2, 8, ceil(16 / 32) * 32] float32 = 2,048.
  Program train = program(AttentionKind::Sdpa, Precision::Fp32, RunMode::Training);
  EXPECT_EQ(bytes_of(train, kAttn + ".scaled_dot_product_attention:1"), 2 * 8 * 32 * 4);
}

TEST(HfAttention, FlashAttention2ReadsTheKvHeadsInPlace) {
  Program p = program(AttentionKind::Flash, Precision::Bf16, RunMode::Inference);
  EXPECT_EQ(bytes_of(p, kAttn + ".repeat_kv_key.reshape"), 0);
  EXPECT_EQ(bytes_of(p, kAttn + ".flash_attn_func"), 16'384);
  EXPECT_EQ(bytes_of(p, kAttn + ".flash_attn_func:1"), 1'024);
  // flash_attn_func runs in half precision only.
  EstimateOptions o;
  o.model = std::string(HEADROOM_SOURCE_DIR) + "/validation/hf-configs/tiny-llama-gqa.json";
  o.attention = AttentionKind::Flash;
  select_frontend(o, {});
  o.mode = RunMode::Inference;
  Result<Estimate> e = estimate(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().find("fp16 or bf16"), std::string::npos) << e.error();
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
