// hf_decoder_params: the parameters of a Hugging Face decoder declared in each module's __init__
// order with state_dict names (parameter order = named_parameters()), including LoRA adapters
// (--lora) and quantized storage (--weights). Internal to src/frontends/hf.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "frontends/hf/hf_config.h"
#include "frontends/zoo/model_spec.h"
#include "frontends/zoo/transformer_common.h"
#include "ir/builder.h"

namespace headroom::hf_detail {

struct LayerParams {
  LinearParams q, k, v, qkv, o;
  LinearParams gate, up, gate_up, down;  // plain MLPs: up = fc1 (dense_h_to_4h), down = fc2
  TensorId router = kNone;
  struct Expert {
    LinearParams w1, w2, w3;
  };
  std::vector<Expert> experts;
  NormParams in_norm, post_norm, pre_ff_norm, post_ff_norm;
};

struct Params {
  TensorId embed = kNone;
  std::vector<LayerParams> layers;
  NormParams final_norm;
  TensorId inv_freq = kNone;
  TensorId lm_head = kNone;
};

// Module paths of each family's state_dict.
struct Names {
  std::string embed, layer, attn, q, k, v, qkv, o, mlp, fc1, fc2, in_norm, post_norm, final_norm, rotary, lm_head;
};

Names names_of(const HfDecoderConfig& c);

// The model's __init__; `lora_used` collects the LoRA targets that matched a module.
Params declare(GraphBuilder& b, const HfDecoderConfig& c, const Names& n, const BuildConfig& cfg,
               std::set<std::string>& lora_used);

}  // namespace headroom::hf_detail
