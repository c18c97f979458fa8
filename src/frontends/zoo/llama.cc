// Hugging Face LlamaForCausalLM (transformers 4.31 modeling_llama.py, pretraining_tp=1, eager
// attention) as validation/models.py re-implements it. Untied lm_head; input_ids [B, S] int64,
// S = --seq, 128 by default. Loss: next-token cross-entropy.
//
//   llama:hidden=H,layers=L,heads=N,kv_heads=K,ffn=F,vocab=V,seq=P   (models.py's keys)
//   llama:preset=llama-2-7b|llama-3-8b|llama-2-70b[,key=value...]     (or the preset as the name)
// Without a preset: hidden 256, layers 2, heads 8, kv_heads = heads, ffn 688, vocab 1000, seq 2048.
// `seq` is max_position_embeddings, the length of each layer's rotary cos/sin caches (4096 for
// Llama-2, 8192 for Llama-3); the sequence length must not exceed it. `seq-default` sets the
// sequence length used when --seq is not given (128). rope_theta and eps are accepted for
// models.py compatibility (they do not change memory).
//
// Call by call as the reference runs:
//  - LlamaModel builds position_ids (arange), a bool all-ones attention mask and the 4-D float
//    mask of _prepare_decoder_attention_mask: _make_causal_mask (full, arange, masked_fill_,
//    expand) + _expand_mask (expand().to(dtype), 1 - mask, masked_fill): [B, 1, S, S], kept for
//    the whole forward, like inputs_embeds (a local of LlamaModel.forward);
//  - RMSNorm: to(float32), pow(2).mean(-1, keepdim), rsqrt(var + eps), x * rsqrt, weight * x.to(dtype);
//  - rotary: cos/sin caches sliced to S, squeezed, indexed by position_ids, unsqueezed;
//    rotate_half with two slices, neg and cat; q * cos + rotate_half(q) * sin;
//  - repeat_kv: unsqueeze, expand, reshape (a copy) when kv_heads < heads;
//  - scores / sqrt(head_dim) + mask, softmax in float32 then cast back, matmul, transpose,
//    contiguous, reshape, o_proj; SwiGLU MLP down(silu(gate(x)) * up(x)); logits.float().
// Casts to and from float32 are emitted only when the model's dtype is not float32 (in float32
// `.to(torch.float32)` returns the tensor itself).
#include <cmath>

#include "frontends/zoo/losses.h"
#include "frontends/zoo/megatron_split.h"
#include "frontends/zoo/registry.h"
#include "frontends/zoo/sequence_parallel.h"
#include "frontends/zoo/transformer_common.h"
#include "util/error.h"

namespace headroom {
namespace {

struct LlamaConfig {
  int64_t hidden = 256, layers = 2, heads = 8, kv_heads = 0, ffn = 688, vocab = 1000;
  int64_t max_positions = 2048;  // models.py's `seq`
  double rope_theta = 10000.0, eps = 1e-6;
  int64_t tp = 1;  // Megatron tensor-parallel ranks; the graph is one rank's
};

struct LlamaPreset {
  const char* name;
  LlamaConfig config;
};

const LlamaPreset kPresets[] = {
    {"llama-2-7b", {4096, 32, 32, 32, 11008, 32000, 4096, 10000.0, 1e-6}},
    {"llama-3-8b", {4096, 32, 32, 8, 14336, 128256, 8192, 500000.0, 1e-6}},
    {"llama-2-70b", {8192, 80, 64, 8, 28672, 32000, 4096, 10000.0, 1e-6}},
};

struct LlamaLayerParams {
  TensorId q = kNone, k = kNone, v = kNone, o = kNone;
  TensorId inv_freq = kNone, cos_cached = kNone, sin_cached = kNone;  // persistent=False buffers
  TensorId gate = kNone, up = kNone, down = kNone;
  TensorId input_norm = kNone, post_norm = kNone;
};

struct LlamaParams {
  TensorId embed = kNone;
  std::vector<LlamaLayerParams> layers;
  TensorId norm = kNone;
  TensorId lm_head = kNone;
};

// LlamaForCausalLM.__init__: parameters and buffers in registration order (a decoder layer
// registers self_attn and mlp before its two norms).
LlamaParams declare(GraphBuilder& b, const LlamaConfig& c) {
  LlamaParams p;
  const int64_t h = c.hidden, hd = c.hidden / c.heads, t = c.tp;
  // Megatron (megatron_split.h): vocab-parallel embedding and output layer, column-parallel
  // q/k/v and gate/up (whole heads and query groups per rank), row-parallel o_proj and down_proj.
  const int64_t vocab = megatron_vocab_rows(c.vocab, t);
  p.embed = b.parameter("model.embed_tokens.weight", {vocab, h});
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string m = "model.layers." + std::to_string(i);
    LlamaLayerParams lp;
    lp.q = b.parameter(m + ".self_attn.q_proj.weight", {c.heads / t * hd, h});
    lp.k = b.parameter(m + ".self_attn.k_proj.weight", {c.kv_heads / t * hd, h});
    lp.v = b.parameter(m + ".self_attn.v_proj.weight", {c.kv_heads / t * hd, h});
    lp.o = b.parameter(m + ".self_attn.o_proj.weight", {h, c.heads / t * hd});
    // inv_freq is computed in float32; the caches are in the default (model) dtype.
    lp.inv_freq = b.buffer(m + ".self_attn.rotary_emb.inv_freq", {hd / 2}, DType::F32);
    lp.cos_cached = b.buffer(m + ".self_attn.rotary_emb.cos_cached", {1, 1, c.max_positions, hd}, b.activation_dtype());
    lp.sin_cached = b.buffer(m + ".self_attn.rotary_emb.sin_cached", {1, 1, c.max_positions, hd}, b.activation_dtype());
    lp.gate = b.parameter(m + ".mlp.gate_proj.weight", {c.ffn / t, h});
    lp.up = b.parameter(m + ".mlp.up_proj.weight", {c.ffn / t, h});
    lp.down = b.parameter(m + ".mlp.down_proj.weight", {h, c.ffn / t});
    lp.input_norm = b.parameter(m + ".input_layernorm.weight", {h});
    lp.post_norm = b.parameter(m + ".post_attention_layernorm.weight", {h});
    p.layers.push_back(lp);
  }
  p.norm = b.parameter("model.norm.weight", {h});
  p.lm_head = b.parameter("lm_head.weight", {vocab, h});
  return p;
}

class LlamaForward {
 public:
  LlamaForward(GraphBuilder& b, const LlamaConfig& c, const LlamaParams& p, SequenceParallel sp)
      : b_(b), c_(c), p_(p), sp_(sp) {}

  // LlamaForCausalLM.forward: logits [B, S, vocab] in float32.
  TensorId run(TensorId input_ids) {
    size_t scope = b_.open_scope();
    TensorId hidden = model(input_ids);
    b_.hold(hidden);
    TensorId logits = b_.linear_with("lm_head", sp_.gather_for_linear(b_, "lm_head.all_gather", hidden), p_.lm_head);
    if (b_.tensor(logits).dtype != DType::F32) logits = b_.cast("logits.float", logits, DType::F32);
    b_.release_holds(scope);
    return logits;
  }

 private:
  DType dtype() const { return b_.activation_dtype(); }

  TensorId model(TensorId input_ids) {
    size_t scope = b_.open_scope();
    const int64_t batch = b_.shape(input_ids)[0], seq = b_.shape(input_ids)[1];
    TensorId position_ids = b_.factory("model.position_ids", {seq}, DType::I64);  // torch.arange
    position_ids = b_.unsqueeze("model.position_ids.unsqueeze", position_ids, 0);
    position_ids = b_.view("model.position_ids.view", position_ids, {-1, seq});
    b_.hold(position_ids);
    TensorId inputs_embeds = b_.embedding_with("model.embed_tokens", input_ids, p_.embed);
    b_.hold(inputs_embeds);
    TensorId ones = b_.factory("model.attention_mask", {batch, seq}, DType::Bool);  // torch.ones(bool)
    TensorId mask = prepare_decoder_attention_mask(ones, batch, seq);
    b_.hold(mask);
    TensorId hidden = sp_.scatter(b_, "model.scatter_to_sequence_parallel_region", inputs_embeds);
    for (int64_t i = 0; i < c_.layers; ++i) {
      hidden = decoder_layer("model.layers." + std::to_string(i), p_.layers[static_cast<size_t>(i)], hidden, mask,
                             position_ids);
    }
    hidden = rms_norm("model.norm", hidden, p_.norm);
    b_.release_holds(scope);
    return hidden;
  }

  TensorId prepare_decoder_attention_mask(TensorId attention_mask, int64_t batch, int64_t seq) {
    const std::string m = "model._prepare_decoder_attention_mask";
    size_t scope = b_.open_scope();
    b_.hold(attention_mask);
    TensorId combined = kNone;
    if (seq > 1) combined = make_causal_mask(m + "._make_causal_mask", batch, seq);
    TensorId expanded = expand_mask(m + "._expand_mask", attention_mask, seq);
    combined = combined == kNone ? expanded : b_.add(m + ".add", expanded, combined);
    b_.release_holds(scope);
    return combined;
  }

  TensorId make_causal_mask(const std::string& m, int64_t batch, int64_t seq) {
    size_t scope = b_.open_scope();
    b_.factory(m + ".min_value", {}, DType::F32);  // torch.tensor(torch.finfo(dtype).min), a temporary
    TensorId mask = b_.factory(m + ".full", {seq, seq}, DType::F32);
    TensorId mask_cond = b_.factory(m + ".mask_cond", {seq}, DType::I64);  // torch.arange
    b_.hold(mask_cond);
    TensorId next = b_.add_scalar(m + ".mask_cond_add", mask_cond, 1.0);
    next = b_.view(m + ".mask_cond_view", next, {seq, 1});
    TensorId lower = b_.compare(m + ".lt", mask_cond, next);
    mask = b_.masked_fill_(m + ".masked_fill_", mask, lower, 0.0);
    if (dtype() != DType::F32) mask = b_.cast(m + ".to", mask, dtype());
    // mask[None, None, :, :]
    mask = b_.unsqueeze(m + ".unsqueeze", mask, 0);
    mask = b_.unsqueeze(m + ".unsqueeze", mask, 1);
    mask = b_.slice(m + ".slice", mask, 2, 0, seq);
    mask = b_.slice(m + ".slice", mask, 3, 0, seq);
    mask = b_.expand(m + ".expand", mask, {batch, 1, seq, seq});
    b_.release_holds(scope);
    return mask;
  }

  TensorId expand_mask(const std::string& m, TensorId mask, int64_t seq) {
    size_t scope = b_.open_scope();
    const int64_t batch = b_.shape(mask)[0], src_len = b_.shape(mask)[1];
    // mask[:, None, None, :]
    TensorId e = b_.slice(m + ".slice", mask, 0, 0, batch);
    e = b_.unsqueeze(m + ".unsqueeze", e, 1);
    e = b_.unsqueeze(m + ".unsqueeze", e, 2);
    e = b_.slice(m + ".slice", e, 3, 0, src_len);
    e = b_.expand(m + ".expand", e, {batch, 1, seq, src_len});
    e = b_.cast(m + ".to", e, dtype());  // a bool -> float copy of the expanded [B, 1, S, S]
    b_.hold(e);
    TensorId inverted = b_.rsub_scalar(m + ".rsub", e, 1.0);
    b_.hold(inverted);
    TensorId as_bool = b_.cast(m + ".to_bool", inverted, DType::Bool);
    TensorId out = b_.masked_fill(m + ".masked_fill", inverted, as_bool, kFloat32Min);
    b_.release_holds(scope);
    return out;
  }

  TensorId rms_norm(const std::string& m, TensorId x, TensorId weight) {
    size_t scope = b_.open_scope();
    b_.hold(x);  // the caller's hidden_states until the norm returns
    const DType input_dtype = b_.tensor(x).dtype;
    TensorId h = x;
    if (input_dtype != DType::F32) h = b_.cast(m + ".to_float32", h, DType::F32);
    TensorId variance = b_.pow_scalar(m + ".pow", h, 2.0);
    variance = b_.mean(m + ".mean", variance, -1, true);
    b_.hold(variance);
    TensorId r = b_.add_scalar(m + ".add_eps", variance, c_.eps);
    r = b_.rsqrt(m + ".rsqrt", r);
    h = b_.mul(m + ".mul", h, r);
    if (input_dtype != DType::F32) h = b_.cast(m + ".to_input_dtype", h, input_dtype);
    TensorId out = b_.mul(m + ".mul_weight", weight, h);
    b_.release_holds(scope);
    return out;
  }

  TensorId decoder_layer(const std::string& m, const LlamaLayerParams& lp, TensorId hidden, TensorId mask,
                         TensorId position_ids) {
    size_t scope = b_.open_scope();
    b_.hold(hidden);  // residual, and the caller's hidden_states until the layer returns
    TensorId residual = hidden;
    hidden = rms_norm(m + ".input_layernorm", hidden, lp.input_norm);
    hidden = attention(m + ".self_attn", lp, hidden, mask, position_ids);
    hidden = b_.add(m + ".add_attn", residual, hidden);
    residual = hidden;
    hidden = rms_norm(m + ".post_attention_layernorm", hidden, lp.post_norm);
    hidden = mlp(m + ".mlp", lp, hidden);
    hidden = b_.add(m + ".add_mlp", residual, hidden);
    b_.release_holds(scope);
    return hidden;
  }

  std::pair<TensorId, TensorId> apply_rotary_pos_emb(const std::string& m, TensorId q, TensorId k, TensorId cos,
                                                     TensorId sin, TensorId position_ids) {
    size_t scope = b_.open_scope();
    b_.hold(q);  // the caller's query_states / key_states until this returns
    b_.hold(k);
    cos = b_.squeeze(m + ".cos.squeeze", cos, 1);
    cos = b_.squeeze(m + ".cos.squeeze", cos, 0);
    sin = b_.squeeze(m + ".sin.squeeze", sin, 1);
    sin = b_.squeeze(m + ".sin.squeeze", sin, 0);
    cos = b_.unsqueeze(m + ".cos.unsqueeze", b_.index(m + ".cos.index", cos, position_ids), 1);
    b_.hold(cos);
    sin = b_.unsqueeze(m + ".sin.unsqueeze", b_.index(m + ".sin.index", sin, position_ids), 1);
    b_.hold(sin);
    TensorId qc = b_.mul(m + ".q_mul_cos", q, cos);
    TensorId qs = b_.mul(m + ".q_rot_mul_sin", rotate_half(b_, m + ".q_rotate_half", q), sin);
    TensorId q_embed = b_.add(m + ".q_embed", qc, qs);
    TensorId kc = b_.mul(m + ".k_mul_cos", k, cos);
    TensorId ks = b_.mul(m + ".k_rot_mul_sin", rotate_half(b_, m + ".k_rotate_half", k), sin);
    TensorId k_embed = b_.add(m + ".k_embed", kc, ks);
    b_.release_holds(scope);
    return {q_embed, k_embed};
  }

  TensorId attention(const std::string& m, const LlamaLayerParams& lp, TensorId hidden, TensorId mask,
                     TensorId position_ids) {
    size_t scope = b_.open_scope();
    b_.hold(hidden);  // the argument (the input norm's output) until the attention returns
    hidden = sp_.gather_for_linear(b_, m + ".qkv.all_gather", hidden);
    const int64_t batch = b_.shape(hidden)[0], seq = b_.shape(hidden)[1];
    const int64_t hd = c_.hidden / c_.heads;
    TensorId q = b_.linear_with(m + ".q_proj", hidden, lp.q);
    TensorId k = b_.linear_with(m + ".k_proj", hidden, lp.k);
    TensorId v = b_.linear_with(m + ".v_proj", hidden, lp.v);
    const int64_t heads = c_.heads / c_.tp, kv_heads = c_.kv_heads / c_.tp;  // this rank's
    q = b_.transpose(m + ".q.transpose", b_.view(m + ".q.view", q, {batch, seq, heads, hd}), 1, 2);
    k = b_.transpose(m + ".k.transpose", b_.view(m + ".k.view", k, {batch, seq, kv_heads, hd}), 1, 2);
    v = b_.transpose(m + ".v.transpose", b_.view(m + ".v.view", v, {batch, seq, kv_heads, hd}), 1, 2);
    // rotary_emb(value_states, seq_len): cos_cached[:, :, :seq_len, ...] (.to(dtype) is a no-op).
    TensorId cos = b_.slice(m + ".rotary_emb.cos", lp.cos_cached, 0, 0, 1);
    cos = b_.slice(m + ".rotary_emb.cos", cos, 1, 0, 1);
    cos = b_.slice(m + ".rotary_emb.cos", cos, 2, 0, seq);
    TensorId sin = b_.slice(m + ".rotary_emb.sin", lp.sin_cached, 0, 0, 1);
    sin = b_.slice(m + ".rotary_emb.sin", sin, 1, 0, 1);
    sin = b_.slice(m + ".rotary_emb.sin", sin, 2, 0, seq);
    std::tie(q, k) = apply_rotary_pos_emb(m + ".rotary", q, k, cos, sin, position_ids);
    b_.hold(q);
    k = repeat_kv(b_, m + ".repeat_kv_key", k, c_.heads / c_.kv_heads);
    b_.hold(k);
    v = repeat_kv(b_, m + ".repeat_kv_value", v, c_.heads / c_.kv_heads);
    b_.hold(v);
    TensorId w = b_.matmul(m + ".matmul_scores", q, b_.transpose(m + ".key.transpose", k, 2, 3));
    w = b_.div_scalar(m + ".div", w, std::sqrt(static_cast<double>(hd)));
    w = b_.add(m + ".add_mask", w, mask);
    w = eager_softmax_as(b_, m, w, b_.tensor(q).dtype);
    b_.hold(w);
    TensorId out = b_.matmul(m + ".matmul_context", w, v);
    out = b_.transpose(m + ".context.transpose", out, 1, 2);
    out = b_.contiguous(m + ".context.contiguous", out);
    out = b_.reshape(m + ".context.reshape", out, {batch, seq, heads * hd});
    out = b_.linear_with(m + ".o_proj", out, lp.o);
    out = sp_.scatter(b_, m + ".o_proj.reduce_scatter", out);
    b_.release_holds(scope);
    return out;
  }

  TensorId mlp(const std::string& m, const LlamaLayerParams& lp, TensorId x) {
    size_t scope = b_.open_scope();
    b_.hold(x);
    x = sp_.gather_for_linear(b_, m + ".fc1.all_gather", x);
    TensorId gate = b_.linear_with(m + ".gate_proj", x, lp.gate);
    gate = b_.silu(m + ".act_fn", gate);
    TensorId up = b_.linear_with(m + ".up_proj", x, lp.up);
    TensorId h = b_.mul(m + ".mul", gate, up);
    TensorId out = b_.linear_with(m + ".down_proj", h, lp.down);
    out = sp_.scatter(b_, m + ".down_proj.reduce_scatter", out);
    b_.release_holds(scope);
    return out;
  }

  GraphBuilder& b_;
  const LlamaConfig& c_;
  const LlamaParams& p_;
  SequenceParallel sp_;
};

const LlamaConfig* find_preset(const std::string& name) {
  for (const LlamaPreset& p : kPresets) {
    if (name == p.name) return &p.config;
  }
  return nullptr;
}

// `fixed_preset`: the preset named by the model name itself ("llama-2-7b"), or "" for `llama`.
Graph build_llama(const std::string& fixed_preset, const ModelSpec& spec, const BuildConfig& cfg) {
  SpecReader r(spec);
  LlamaConfig c;
  std::string preset = fixed_preset.empty() ? r.get_string("preset", "") : fixed_preset;
  if (!preset.empty()) {
    const LlamaConfig* pc = find_preset(preset);
    if (pc == nullptr) {
      throw InputError("model '" + spec.name + "': unknown preset '" + preset +
                       "' (llama-2-7b, llama-3-8b or llama-2-70b)");
    }
    c = *pc;
  }
  c.hidden = r.get_int("hidden", c.hidden);
  c.layers = r.get_int("layers", c.layers);
  c.heads = r.get_int("heads", c.heads);
  c.kv_heads = r.get_int("kv_heads", c.kv_heads == 0 ? c.heads : c.kv_heads);
  c.ffn = r.get_int("ffn", c.ffn);
  c.vocab = r.get_int("vocab", c.vocab);
  c.max_positions = r.get_int("seq", c.max_positions);
  c.rope_theta = get_double(r, spec.name, "rope_theta", c.rope_theta, 1e-300, 1e300);
  c.eps = get_double(r, spec.name, "eps", c.eps, 0.0, 1.0);
  const int64_t seq_default = r.get_int("seq-default", 128);
  r.reject_unused();
  const int64_t hd = head_dim(spec.name, c.hidden, c.heads);
  if (c.heads % c.kv_heads != 0) {
    throw InputError("model '" + spec.name + "': heads=" + std::to_string(c.heads) +
                     " is not a multiple of kv_heads=" + std::to_string(c.kv_heads));
  }
  c.tp = cfg.tensor_parallel;
  check_megatron_split(c.tp, c.heads, c.kv_heads, c.ffn, spec.name);
  if (hd % 2 != 0) {
    throw InputError("model '" + spec.name + "': the head size " + std::to_string(hd) +
                     " must be even for rotary embeddings");
  }
  const int64_t seq = sequence_length(cfg, seq_default, c.max_positions, spec.name, "seq, the rotary cache length");

  GraphBuilder b(spec.name, cfg.dtype);
  b.set_dim("batch", cfg.batch);
  b.set_dim("seq", seq);
  set_transformer_dims(b, c.hidden, c.layers);
  LlamaParams p = declare(b, c);
  TensorId input_ids = b.input("input_ids", {cfg.batch, seq}, DType::I64);
  TensorId logits = LlamaForward(b, c, p, SequenceParallel(cfg)).run(input_ids);
  b.mark_output(logits);
  b.begin_loss();
  b.set_loss(add_loss(b, logits, LossKind::NextToken, cfg));
  Graph g = b.finish();
  g.block_class = "LlamaDecoderLayer";  // transformers' modeling_llama.py
  return g;
}

}  // namespace

void register_llama(std::vector<ZooEntry>& out) {
  out.push_back({"llama",
                 "Hugging Face LlamaForCausalLM; params hidden=256, layers=2, heads=8, kv_heads=heads, ffn=688, "
                 "vocab=1000, seq=2048 (rotary cache), or preset=llama-2-7b|llama-3-8b|llama-2-70b "
                 "(seq 128 by default)",
                 "transformer", true,
                 [](const ModelSpec& s, const BuildConfig& cfg) { return build_llama("", s, cfg); },
                 /*tensor_parallel=*/true});
  for (const LlamaPreset& p : kPresets) {
    std::string name = p.name;
    out.push_back({name, "Hugging Face LlamaForCausalLM, " + name + " sizes (= llama:preset=" + name + ")",
                   "transformer", true,
                   [name](const ModelSpec& s, const BuildConfig& cfg) { return build_llama(name, s, cfg); },
                   /*tensor_parallel=*/true});
  }
}

}  // namespace headroom
