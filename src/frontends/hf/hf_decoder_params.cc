#include "frontends/hf/hf_decoder_params.h"

#include <algorithm>

#include "util/checked.h"
#include "util/error.h"

namespace headroom::hf_detail {

Names names_of(const HfDecoderConfig& c) {
  switch (c.family) {
    case HfFamily::GptNeox:
      return {"gpt_neox.embed_in", "gpt_neox.layers.", "attention", "", "", "", "query_key_value", "dense", "mlp",
              "dense_h_to_4h", "dense_4h_to_h", "input_layernorm", "post_attention_layernorm",
              "gpt_neox.final_layer_norm", "gpt_neox.rotary_emb", "embed_out"};
    case HfFamily::Falcon:
      return {"transformer.word_embeddings", "transformer.h.", "self_attention", "", "", "", "query_key_value",
              "dense", "mlp", "dense_h_to_4h", "dense_4h_to_h", "input_layernorm", "post_attention_layernorm",
              "transformer.ln_f", "transformer.rotary_emb", "lm_head"};
    default:
      return {"model.embed_tokens", "model.layers.", "self_attn", "q_proj", "k_proj", "v_proj", "qkv_proj", "o_proj",
              c.experts > 0 ? "block_sparse_moe" : "mlp", "", "", "input_layernorm", "post_attention_layernorm",
              "model.norm", "model.rotary_emb", "lm_head"};
  }
}

namespace {

NormParams norm_params(GraphBuilder& b, const HfDecoderConfig& c, const std::string& m) {
  if (c.norm == HfNorm::LayerNorm) return layer_norm_params(b, m, c.hidden);
  return {b.parameter(m + ".weight", {c.hidden}), kNone};
}

// A decoder layer's nn.Linear stored quantized (--weights), as the libraries keep it:
//  int8 (bitsandbytes Linear8bitLt / Int8Params): int8 weight [out, in] and fp32 row scales SCB;
//  nf4 (bitsandbytes Linear4bit / Params4bit, QLoRA's double quantization): the packed weight
//    [(out * in + 1) / 2, 1] uint8, and its QuantState: absmax quantized to uint8 per 64-value
//    block, their fp32 absmax per 256 blocks, an fp32 offset and the 16-value NF4 code;
//  int4 (GPTQ, auto_gptq QuantLinear): qweight int32 [in / 8, out], qzeros int32
//    [ceil(in / g), out / 8], scales fp16 [ceil(in / g), out], g_idx int32 [in];
//  fp8 (transformers FbgemmFp8Linear, integrations/fbgemm_fp8.py): weight float8_e4m3fn
//    [out, in] (one byte a value), weight_scale fp32 [out, 1] (one scale per output row, from
//    quantize_fp8_per_row), the non-persistent input_scale_ub fp32 [1].
// The bias stays in the model dtype. Every stored tensor is frozen.
LinearParams quantized_linear_params(GraphBuilder& b, WeightFormat w, int64_t group, const std::string& module,
                                     int64_t in, int64_t out, bool bias) {
  LinearParams p;
  p.in = in;
  p.out = out;
  const int64_t n = checked_mul(in, out, module);
  switch (w) {
    case WeightFormat::Int8:
      p.quant.push_back(b.packed_parameter(module + ".weight", {out, in}, DType::I8, 1));
      p.quant.push_back(b.buffer(module + ".weight.SCB", {out}, DType::F32));
      break;
    case WeightFormat::Nf4: {
      const int64_t blocks = (n + 63) / 64;
      p.quant.push_back(b.packed_parameter(module + ".weight", {(n + 1) / 2, 1}, DType::U8, 2));
      p.quant.push_back(b.buffer(module + ".weight.absmax", {blocks}, DType::U8));
      p.quant.push_back(b.buffer(module + ".weight.nested_absmax", {(blocks + 255) / 256}, DType::F32));
      p.quant.push_back(b.buffer(module + ".weight.nested_offset", {}, DType::F32));
      p.quant.push_back(b.buffer(module + ".weight.quant_map", {16}, DType::F32));
      break;
    }
    case WeightFormat::Int4: {
      if (in % 8 != 0 || out % 8 != 0) {
        throw InputError("--weights int4: " + module + " is " + std::to_string(in) + " x " + std::to_string(out) +
                         "; GPTQ packs 8 values per int32 along both dimensions");
      }
      const int64_t groups = (in + group - 1) / group;
      p.quant.push_back(b.packed_parameter(module + ".qweight", {in / 8, out}, DType::I32, 8));
      p.quant.push_back(b.buffer(module + ".qzeros", {groups, out / 8}, DType::I32));
      p.quant.push_back(b.buffer(module + ".scales", {groups, out}, DType::F16));
      p.quant.push_back(b.buffer(module + ".g_idx", {in}, DType::I32));
      break;
    }
    case WeightFormat::Fp8:
      p.quant.push_back(b.packed_parameter(module + ".weight", {out, in}, DType::U8, 1));
      p.quant.push_back(b.buffer(module + ".weight_scale", {out, 1}, DType::F32));
      p.quant.push_back(b.buffer(module + ".input_scale_ub", {1}, DType::F32));
      break;
    case WeightFormat::Default:
      break;
  }
  if (bias) {
    p.bias = b.parameter(module + ".bias", {out});
  }
  return p;
}

// nn.Linear's parameters, and with LoRA on this module peft's lora_A / lora_B after them
// (lora.Linear registers base_layer, then lora_A and lora_B). `used` collects matched targets.
LinearParams linear_params_lora(GraphBuilder& b, const BuildConfig& cfg, std::set<std::string>& used,
                                const std::string& module, int64_t in, int64_t out, bool bias) {
  const std::optional<LoraConfig>& lora = cfg.lora;
  LinearParams p = cfg.weights == WeightFormat::Default ? linear_params(b, module, in, out, bias)
                                                        : quantized_linear_params(b, cfg.weights, cfg.group_size, module, in, out, bias);
  p.in = in;
  p.out = out;
  if (!lora) return p;
  const std::string leaf = module.substr(module.rfind('.') + 1);
  if (std::find(lora->targets.begin(), lora->targets.end(), leaf) == lora->targets.end()) return p;
  used.insert(leaf);
  p.lora_a = b.parameter(module + ".lora_A.default.weight", {lora->r, in});
  p.lora_b = b.parameter(module + ".lora_B.default.weight", {out, lora->r});
  return p;
}

}  // namespace

// The model's __init__, module by module (parameter order = named_parameters()).
Params declare(GraphBuilder& b, const HfDecoderConfig& c, const Names& n, const BuildConfig& cfg,
               std::set<std::string>& lora_used) {
  int64_t scratch = 0;  // exllamav2: the largest layer's scratch_space_fixed()
  auto linear_params = [&](GraphBuilder& bb, const std::string& module, int64_t in, int64_t out, bool bias) {
    // auto_gptq QuantLinear (exllamav2): temp_dq_size() + temp_fwd_size(2048, 8)
    scratch = std::max(scratch, in * out * 2 + 128 + out * 2048 * 8 * 4 + 128);
    return linear_params_lora(bb, cfg, lora_used, module, in, out, bias);
  };
  Params p;
  const int64_t h = c.hidden, q_out = c.heads * c.head_dim, kv_out = c.kv_heads * c.head_dim;
  p.embed = b.parameter(n.embed + ".weight", {c.vocab, h});
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string m = n.layer + std::to_string(i) + ".";
    LayerParams lp;
    auto attention = [&] {
      const std::string a = m + n.attn + ".";
      if (c.family == HfFamily::Phi3) {  // Phi3Attention registers o_proj before qkv_proj
        lp.o = linear_params(b, a + n.o, q_out, h, c.o_bias);
        lp.qkv = linear_params(b, a + n.qkv, h, q_out + 2 * kv_out, c.qkv_bias);
      } else if (c.qkv != HfQkv::Separate) {
        lp.qkv = linear_params(b, a + n.qkv, h, q_out + 2 * kv_out, c.qkv_bias);
        lp.o = linear_params(b, a + n.o, q_out, h, c.o_bias);
      } else {
        lp.q = linear_params(b, a + n.q, h, q_out, c.qkv_bias);
        lp.k = linear_params(b, a + n.k, h, kv_out, c.qkv_bias);
        lp.v = linear_params(b, a + n.v, h, kv_out, c.qkv_bias);
        lp.o = linear_params(b, a + n.o, q_out, h, c.o_bias);
      }
    };
    auto mlp = [&] {
      const std::string f = m + n.mlp + ".";
      if (c.experts > 0) {  // MixtralSparseMoeBlock: gate, then experts (w1, w2, w3)
        lp.router = b.parameter(f + "gate.weight", {c.experts, h});
        for (int64_t e = 0; e < c.experts; ++e) {
          const std::string x = f + "experts." + std::to_string(e) + ".";
          LayerParams::Expert ex;
          ex.w1 = linear_params(b, x + "w1", h, c.intermediate, false);
          ex.w2 = linear_params(b, x + "w2", c.intermediate, h, false);
          ex.w3 = linear_params(b, x + "w3", h, c.intermediate, false);
          lp.experts.push_back(ex);
        }
      } else if (c.fused_gate_up) {
        lp.gate_up = linear_params(b, f + "gate_up_proj", h, 2 * c.intermediate, c.mlp_bias);
        lp.down = linear_params(b, f + "down_proj", c.intermediate, h, c.mlp_bias);
      } else if (c.gated_mlp) {
        lp.gate = linear_params(b, f + "gate_proj", h, c.intermediate, c.mlp_bias);
        lp.up = linear_params(b, f + "up_proj", h, c.intermediate, c.mlp_bias);
        lp.down = linear_params(b, f + "down_proj", c.intermediate, h, c.mlp_bias);
      } else {
        lp.up = linear_params(b, f + n.fc1, h, c.intermediate, c.mlp_bias);
        lp.down = linear_params(b, f + n.fc2, c.intermediate, h, c.mlp_bias);
      }
    };
    if (c.family == HfFamily::GptNeox) {  // GPTNeoXLayer: both norms, attention, mlp
      lp.in_norm = norm_params(b, c, m + n.in_norm);
      lp.post_norm = norm_params(b, c, m + n.post_norm);
      attention();
      mlp();
    } else {  // the decoder layer registers attention and mlp before its norms
      attention();
      mlp();
      lp.in_norm = norm_params(b, c, m + n.in_norm);
      if (!c.shared_layernorm) lp.post_norm = norm_params(b, c, m + n.post_norm);
      if (c.sandwich_norms) {
        lp.pre_ff_norm = norm_params(b, c, m + "pre_feedforward_layernorm");
        lp.post_ff_norm = norm_params(b, c, m + "post_feedforward_layernorm");
      }
    }
    p.layers.push_back(lp);
  }
  p.final_norm = norm_params(b, c, n.final_norm);
  // inv_freq: a non-persistent float32 buffer (arange(...).float() ignores the default dtype).
  p.inv_freq = b.buffer(n.rotary + ".inv_freq", {c.rotary_dim / 2}, DType::F32);
  p.lm_head = c.tie_embeddings ? b.tied_parameter(n.lm_head + ".weight", p.embed)
                               : b.parameter(n.lm_head + ".weight", {c.vocab, h});
  if (cfg.weights == WeightFormat::Int4) {
    // exllamav2_post_init: one fp16 scratch per device (ExLlamaV2DeviceTensors.prepare), the
    // largest scratch_space_fixed() of the quantized layers; the kernels use it instead of
    // allocating per call.
    b.buffer("exllamav2_scratch", {scratch / 2}, DType::F16);
  }
  return p;
}

}  // namespace headroom::hf_detail
