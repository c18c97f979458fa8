// Pieces the Hugging Face transformer builders (bert.cc, gpt2.cc, llama.cc) share: reading their
// spec parameters, the sequence length, and parameters declared in a module's __init__ order.
//
// Each builder mirrors its reference module in two passes, as nn.Module does: declare every
// parameter and buffer in registration order (so parameter order = named_parameters(), which
// decides setup allocation order and optimizer-state order), then run forward() call by call with
// the *_with builder methods.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "frontends/zoo/model_spec.h"
#include "ir/builder.h"

namespace headroom {

// torch.finfo(torch.float32).min: the value the attention masks fill their masked positions with.
inline constexpr double kFloat32Min = -3.4028234663852886e38;

// The sequence length of a sequence model: config.seq, else `fallback`; an InputError when it is
// longer than `max_positions` (naming `model` and `limit_name`, the spec key that sets the limit).
int64_t sequence_length(const BuildConfig& config, int64_t fallback, int64_t max_positions,
                        const std::string& model, const std::string& limit_name);

// A floating-point spec parameter ("dropout=0.2"); InputError when it is not a number in
// [min_value, max_value].
double get_double(SpecReader& r, const std::string& model, const std::string& key, double fallback,
                  double min_value, double max_value);

// InputError unless `heads` divides `hidden` (attention head size).
int64_t head_dim(const std::string& model, int64_t hidden, int64_t heads);

// nn.Linear's parameters, created in registration order: weight [out, in], then bias [out].
struct LinearParams {
  TensorId weight = kNone;
  TensorId bias = kNone;
  TensorId lora_a = kNone, lora_b = kNone;  // LoRA adapters (Hugging Face decoders with --lora)
  std::vector<TensorId> quant;  // quantized storage (--weights): the packed weight, then its state
  int64_t in = 0, out = 0;
};
LinearParams linear_params(GraphBuilder& b, const std::string& module, int64_t in, int64_t out, bool bias = true);

// nn.LayerNorm's parameters: weight [d], bias [d].
struct NormParams {
  TensorId weight = kNone;
  TensorId bias = kNone;
};
NormParams layer_norm_params(GraphBuilder& b, const std::string& module, int64_t d);

inline TensorId apply_linear(GraphBuilder& b, const std::string& module, TensorId x, const LinearParams& p) {
  return b.linear_with(module, x, p.weight, p.bias);
}
inline TensorId apply_layer_norm(GraphBuilder& b, const std::string& module, TensorId x, const NormParams& p) {
  return b.layer_norm_with(module, x, p.weight, p.bias);
}

// Llama-style attention pieces shared by the zoo's llama and the Hugging Face decoders, one
// PyTorch call at a time as transformers' modeling_llama.py writes them.
// rotate_half: cat((-x2, x1), dim=-1) of the two halves of the last dimension.
TensorId rotate_half(GraphBuilder& b, const std::string& module, TensorId x);

// Hugging Face's eager attention softmax, `softmax(attn_weights, dim=-1, dtype=torch.float32)
// .to(dtype)`: the local attn_weights keeps the masked scores until the statement's .to() has
// returned, so in fp16/bf16 they live beside the float32 copy, its softmax and the cast back
// (measured on the H100, transformers 5.17 bf16 eager: scores, fp32 copy, softmax, copy freed,
// cast, softmax freed, scores freed). fp32 scores are one softmax. `module` names the ops
// (module + ".softmax...").
TensorId eager_softmax_as(GraphBuilder& b, const std::string& module, TensorId scores, DType dtype);
// repeat_kv: hidden_states[:, :, None, :, :].expand(...).reshape(...) of [B, kv_heads, S, head_dim];
// every `:` is a slice whose backward allocates a gradient, and the reshape copies. n_rep 1: x.
TensorId repeat_kv(GraphBuilder& b, const std::string& module, TensorId x, int64_t n_rep);

}  // namespace headroom
