// Built-in model names with parameters: "NAME" or "NAME:key=value,key=value".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace headroom {

struct ModelSpec {
  std::string name;
  std::map<std::string, std::string> params;
};

// InputError on a malformed spec ("resnet50:", "mlp:layers", "mlp:a=1,a=2").
ModelSpec parse_model_spec(const std::string& text);

enum class LossKind : uint8_t { Default, CrossEntropy, NextToken, Mse };

// Generation (--mode generate) as transformers' generate() runs it with a DynamicCache: forward 0
// is the prefill of `prompt` tokens, forward i (1 <= i < new_tokens) decodes one token with a cache
// of prompt + i - 1 tokens. A graph holds the forwards first..last; one that starts after the
// prefill takes what generate() carries between forwards (the cache, the token ids, the last
// logits) as inputs. `beams` > 1: beam search (num_beams), every forward on batch x beams rows.
// `static_cache`: a StaticCache of prompt + new_tokens positions instead (cache_implementation="static").
struct GenerationWindow {
  int64_t prompt = 0;
  int64_t new_tokens = 0;
  int64_t first = 0, last = 0;
  int64_t beams = 1;
  bool static_cache = false;
};

// How attention runs (transformers' attn_implementation): eager materialises the scores and
// probabilities; sdpa and flash call one fused kernel (see docs/llm.md for the rules).
enum class AttentionKind : uint8_t { Default, Eager, Sdpa, Flash };

// LoRA adapters as peft's LoraConfig describes them (r, lora_alpha, target_modules,
// lora_dropout): every nn.Linear whose name ends in a target gets lora_A [r, in] and
// lora_B [out, r]; the base model is frozen (peft's mark_only_lora_as_trainable).
struct LoraConfig {
  int64_t r = 8;
  double alpha = 8.0;
  std::vector<std::string> targets;
  double dropout = 0.0;
};

// How the decoder layers' nn.Linear weights are stored (--weights): as the model dtype, or
// quantized the way bitsandbytes (int8: LLM.int8, nf4: 4-bit NormalFloat with double
// quantization), GPTQ (int4, exllamav2 kernels, --group-size) or transformers' FbgemmFp8Linear
// (fp8: float8_e4m3fn with fp32 row scales) store them.
enum class WeightFormat : uint8_t { Default, Int8, Int4, Nf4, Fp8 };

// What every builder needs besides its own parameters.
struct BuildConfig {
  int64_t batch = 1;
  std::optional<int64_t> seq;   // sequence length for sequence models (their default otherwise)
  DType dtype = DType::F32;     // activation and weight storage dtype of the model
  LossKind loss = LossKind::Default;
  double dropout_scale = 1.0;   // 0 turns every dropout into identity
  // The graph is for an inference run: module.eval() under torch.no_grad(). Most graphs do not
  // depend on it (the schedule applies eval semantics per op), but some Python forwards branch on
  // it: inception_v3 skips its aux head in eval, nn.MultiheadAttention takes its fused fast path
  // (torch._native_multi_head_attention) under eval + no_grad.
  bool inference = false;
  // nn.MultiheadAttention as PyTorch 2.x runs it (DeviceProfile::mha_sdpa): with
  // need_weights=False F.multi_head_attention_forward calls scaled_dot_product_attention, and the
  // fast path's native multi-head attention calls it too. False: PyTorch 1.13's bmm/softmax/bmm.
  bool mha_sdpa = false;
  std::optional<GenerationWindow> generation;  // Hugging Face decoders only
  AttentionKind attention = AttentionKind::Default;
  std::optional<LoraConfig> lora;  // Hugging Face decoders only
  WeightFormat weights = WeightFormat::Default;  // Hugging Face decoders only
  int64_t group_size = 128;                      // int4
  // Hugging Face decoders, one inference forward: lm_head on the last positions only (0: all).
  int64_t logits_to_keep = 0;
  // Megatron tensor parallelism: the graph of one of `tensor_parallel` ranks (column-parallel
  // QKV and fc1, row-parallel projections, vocab-parallel embedding). Builders that have no
  // split reject values above 1 (ZooEntry::tensor_parallel).
  int64_t tensor_parallel = 1;
  // Megatron sequence parallelism (with tensor_parallel > 1): norms, dropouts and residuals on
  // seq / T positions, all-gathers before the column-parallel GEMMs, reduce-scatters after the
  // row-parallel ones (frontends/zoo/sequence_parallel.h).
  bool sequence_parallel = false;
};

// Reads the spec's parameters with defaults; every key read is recorded, so that
// `reject_unused` can name a parameter the model does not know.
class SpecReader {
 public:
  explicit SpecReader(const ModelSpec& spec) : spec_(spec) {}
  int64_t get_int(const std::string& key, int64_t fallback, int64_t min_value = 1);
  bool get_bool(const std::string& key, bool fallback);
  std::string get_string(const std::string& key, const std::string& fallback);
  bool has(const std::string& key) const { return spec_.params.count(key) > 0; }
  void reject_unused() const;

 private:
  const ModelSpec& spec_;
  std::set<std::string> used_;
};

}  // namespace headroom
