// hf_config: a Hugging Face config.json read into the sizes and switches of one architecture.
// The decoder-only families share one description (HfDecoderConfig) that hf_decoder.cc builds;
// gpt2 and bert are handed to the zoo's validated builders as specs.
//
// Invariants: every field a family needs is present in the file or has the default that
// family's Python config class (transformers' configuration_*.py) gives it; a missing required
// field or an unknown model_type is an InputError naming it and the file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "frontends/hf/hf_t5.h"
#include "ir/dtype.h"

namespace headroom {

enum class HfFamily : uint8_t { Llama, Mistral, Mixtral, Qwen2, Gemma, Gemma2, Phi3, GptNeox, Falcon, Gpt2, Bert, T5 };

enum class HfNorm : uint8_t {
  Rms,        // LlamaRMSNorm: weight * (x.float() * rsqrt(mean(x^2) + eps)).to(dtype)
  GemmaRms,   // GemmaRMSNorm: (x.float() normalized * (1 + weight.float())).type_as(x)
  LayerNorm,  // nn.LayerNorm with bias (gpt_neox, falcon)
};

enum class HfQkv : uint8_t {
  Separate,      // q_proj, k_proj, v_proj
  Concatenated,  // one projection: all q heads, then k heads, then v heads (phi3, falcon)
  Interleaved,   // one projection, per head [q k v] (gpt_neox)
};

struct HfDecoderConfig {
  HfFamily family = HfFamily::Llama;
  std::string model_type;
  int64_t hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, intermediate = 0, vocab = 0;
  int64_t max_positions = 0;
  int64_t rotary_dim = 0;       // head_dim, or rotary_pct of it (gpt_neox)
  bool tie_embeddings = false;
  bool qkv_bias = false, o_bias = false, mlp_bias = false;
  HfNorm norm = HfNorm::Rms;
  HfQkv qkv = HfQkv::Separate;
  bool gated_mlp = true;        // down(act(gate(x)) * up(x)); else fc2(act(fc1(x)))
  bool fused_gate_up = false;   // phi3's gate_up_proj
  bool gelu = false;            // the MLP activation is a GELU (else SiLU)
  bool parallel_residual = false;  // gpt_neox use_parallel_residual, falcon parallel_attn
  bool shared_layernorm = false;   // falcon (parallel_attn, old architecture): one input_layernorm
  bool scale_embeddings = false;   // gemma: inputs_embeds * sqrt(hidden)
  bool sandwich_norms = false;     // gemma2: post-attention and pre/post-feedforward norms
  double final_logit_softcap = 0.0;  // gemma2
  int64_t experts = 0, experts_per_tok = 0;  // mixtral
  DType dtype = DType::F32;     // torch_dtype
  bool dtype_given = false;
};

// What a config.json describes: a decoder the HF frontend builds, or a zoo spec (gpt2, bert).
struct HfModel {
  std::string path;                // the config.json read
  HfFamily family = HfFamily::Llama;
  HfDecoderConfig decoder;         // decoder families
  std::string zoo_spec;            // gpt2 / bert: "gpt2:hidden=...,..."
  T5Config t5;                     // t5
  std::optional<DType> torch_dtype;
};

// `path` is a config.json or a directory holding one. InputError on an unreadable file, bad
// JSON, an unknown model_type or a missing field.
HfModel read_hf_config(const std::string& path);
// The same from the file's text; `path` names it in messages.
HfModel parse_hf_config(std::string_view text, const std::string& path);

// Whether `arg` names a config.json file or a directory that holds one.
bool looks_like_hf_config(const std::string& arg);

}  // namespace headroom
