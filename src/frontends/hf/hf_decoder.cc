#include "frontends/hf/hf_decoder.h"

#include "frontends/hf/hf_decoder_params.h"
#include "frontends/hf/hf_tensor_parallel.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "frontends/zoo/losses.h"
#include "frontends/zoo/megatron_split.h"
#include "frontends/zoo/sequence_parallel.h"
#include "frontends/zoo/transformer_common.h"
#include "ir/builder.h"
#include "util/checked.h"
#include "util/error.h"

namespace headroom {
namespace {

using hf_detail::declare;
using hf_detail::LayerParams;
using hf_detail::Names;
using hf_detail::names_of;
using hf_detail::Params;

// The keys and values each layer holds (DynamicCache / StaticCache .key_cache / value_cache).
// `max_len` > 0: a StaticCache, preallocated to that many tokens and updated in place.
struct Cache {
  std::vector<TensorId> k, v;
  int64_t max_len = 0;
};

class Forward {
 public:
  // `inference`: no autograd (the memory-efficient kernel then computes no logsumexp).
  Forward(GraphBuilder& b, const HfDecoderConfig& c, const Params& p, AttentionKind attention, bool inference,
          const BuildConfig& cfg)
      : b_(b), c_(c), p_(p), n_(names_of(c)), attention_(attention), inference_(inference), lora_(cfg.lora),
        weights_(cfg.weights), sp_(cfg) {}

  // One model call on `ids` [B, S] with `past` cached tokens; `cache` null: use_cache=False.
  // Returns the final hidden states [B, S, H] (the caller applies lm_head).
  TensorId model(const std::string& pre, TensorId ids, int64_t past, Cache* cache) {
    size_t scope = b_.open_scope();
    const int64_t batch = b_.shape(ids)[0], seq = b_.shape(ids)[1];
    TensorId embeds = b_.embedding_with(pre + n_.embed, ids, p_.embed);
    b_.hold(embeds);  // inputs_embeds, a local of the whole forward
    // cache_position = torch.arange(past, past + S); position_ids = cache_position.unsqueeze(0)
    TensorId cache_position = b_.factory(pre + "cache_position", {seq}, DType::I64);
    b_.hold(cache_position);
    TensorId position_ids = b_.unsqueeze(pre + "position_ids", cache_position, 0);
    b_.hold(position_ids);
    TensorId mask = causal_mask(pre + "_update_causal_mask", batch, seq, past, cache_position,
                                cache != nullptr ? cache->max_len : 0);
    if (mask != kNone) b_.hold(mask);
    TensorId hidden = embeds;
    if (c_.scale_embeddings) {
      // normalizer = torch.tensor(hidden_size ** 0.5, dtype=hidden_states.dtype)
      TensorId normalizer = b_.factory(pre + "normalizer", {}, b_.tensor(embeds).dtype);
      hidden = b_.mul(pre + "embed_scale", hidden, normalizer);
    }
    hidden = sp_.scatter(b_, pre + "scatter_to_sequence_parallel_region", hidden);
    auto [cos, sin] = rotary(pre + n_.rotary, position_ids);
    b_.hold(cos);
    b_.hold(sin);
    for (int64_t i = 0; i < c_.layers; ++i) {
      hidden = layer(pre + n_.layer + std::to_string(i), static_cast<size_t>(i), hidden, mask, cos, sin, cache);
    }
    hidden = norm(pre + n_.final_norm, hidden, p_.final_norm);
    b_.release_holds(scope);
    return hidden;
  }

  // lm_head on the last `keep` positions (0: all), gemma2's final soft-capping.
  TensorId logits(const std::string& pre, TensorId hidden, int64_t keep) {
    size_t scope = b_.open_scope();
    b_.hold(hidden);
    hidden = sp_.gather_for_linear(b_, pre + n_.lm_head + ".all_gather", hidden);
    const auto s = b_.shape(hidden);
    // hidden_states[:, -num_logits_to_keep:, :] (0 keeps all: three full-range slices, whose
    // backward still allocates a gradient each).
    TensorId x = b_.slice(pre + "keep.slice", hidden, 0, 0, s[0]);
    x = b_.slice(pre + "keep.slice", x, 1, keep > 0 ? s[1] - keep : 0, s[1]);
    x = b_.slice(pre + "keep.slice", x, 2, 0, s[2]);
    TensorId out = b_.linear_with(pre + n_.lm_head, x, p_.lm_head);
    if (c_.final_logit_softcap > 0.0) {
      out = b_.div_scalar(pre + "final_logit_softcapping.div", out, c_.final_logit_softcap);
      out = b_.tanh(pre + "final_logit_softcapping.tanh", out);
      out = b_.mul_scalar(pre + "final_logit_softcapping.mul", out, c_.final_logit_softcap);
    }
    b_.release_holds(scope);
    return out;
  }

 private:
  DType dtype() const { return b_.activation_dtype(); }
  bool eager() const { return attention_ == AttentionKind::Eager; }

  // LlamaModel._update_causal_mask: eager builds [B, 1, S, past + S + 1] in the model dtype
  // (_prepare_4d_causal_attention_mask_with_cache_position, DynamicCache's target length); sdpa
  // without padding returns None (AttentionMaskConverter._ignore_causal_mask_sdpa: one query, or
  // as many keys as queries), and so does flash_attention_2. With a StaticCache (`static_len` > 0)
  // the sdpa shortcut is skipped (`not using_static_cache`) and the target length is the cache's
  // max_cache_len, for eager and sdpa.
  TensorId causal_mask(const std::string& m, int64_t batch, int64_t seq, int64_t past, TensorId cache_position,
                       int64_t static_len) {
    if (!eager() && static_len == 0) return kNone;
    const int64_t target =
        static_len > 0 ? static_len : checked_add(checked_add(past, seq, "mask length"), 1, "mask length");
    size_t scope = b_.open_scope();
    TensorId mask = b_.factory(m + ".full", {seq, target}, dtype());  // torch.full(min_dtype)
    if (seq != 1) mask = b_.opaque(m + ".triu", {mask}, {{{seq, target}, dtype()}})[0];
    TensorId arange = b_.factory(m + ".arange", {target}, DType::I64);
    TensorId column = b_.view(m + ".cache_position.reshape", cache_position, {seq, 1});
    TensorId keep = b_.compare(m + ".gt", arange, column);
    // causal_mask *= (arange > cache_position): in place, like add_ (no new storage).
    mask = b_.add_(m + ".mul_", mask, keep);
    mask = b_.unsqueeze(m + ".unsqueeze", mask, 0);
    mask = b_.unsqueeze(m + ".unsqueeze", mask, 1);
    mask = b_.slice(m + ".slice", mask, 2, 0, seq);
    mask = b_.slice(m + ".slice", mask, 3, 0, target);
    mask = b_.expand(m + ".expand", mask, {batch, 1, seq, target});
    b_.release_holds(scope);
    return mask;
  }

  // LlamaRotaryEmbedding.forward: inv_freq[None, :, None].float().expand(B, -1, 1) @
  // position_ids[:, None, :].float(), transposed, cat((freqs, freqs)), cos/sin, times
  // attention_scaling, .to(x.dtype). cos and sin are [1, S, rotary_dim].
  std::pair<TensorId, TensorId> rotary(const std::string& m, TensorId position_ids) {
    size_t scope = b_.open_scope();
    const int64_t seq = b_.shape(position_ids)[1], half = c_.rotary_dim / 2;
    TensorId inv = b_.unsqueeze(m + ".inv_freq.unsqueeze", p_.inv_freq, 0);
    inv = b_.slice(m + ".inv_freq.slice", inv, 1, 0, half);
    inv = b_.unsqueeze(m + ".inv_freq.unsqueeze", inv, 2);
    inv = b_.expand(m + ".inv_freq.expand", inv, {1, half, 1});
    TensorId pos = b_.slice(m + ".position_ids.slice", position_ids, 0, 0, 1);
    pos = b_.unsqueeze(m + ".position_ids.unsqueeze", pos, 1);
    pos = b_.slice(m + ".position_ids.slice", pos, 2, 0, seq);
    pos = b_.cast(m + ".position_ids.float", pos, DType::F32);
    b_.hold(pos);  // position_ids_expanded, a local until the function returns
    TensorId freqs = b_.matmul(m + ".matmul", inv, pos);
    freqs = b_.transpose(m + ".transpose", freqs, 1, 2);
    b_.hold(freqs);
    TensorId emb = b_.cat(m + ".cat", {freqs, freqs}, -1);
    b_.hold(emb);
    // cos = emb.cos(); sin = emb.sin(); cos = cos * attention_scaling (rebinding frees the first).
    TensorId cos = b_.opaque(m + ".cos", {emb}, {{b_.shape(emb), DType::F32}})[0];
    TensorId sin = b_.opaque(m + ".sin", {emb}, {{b_.shape(emb), DType::F32}})[0];
    b_.hold(sin);
    cos = b_.mul_scalar(m + ".cos.attention_scaling", cos, 1.0);
    b_.hold(cos);
    sin = b_.mul_scalar(m + ".sin.attention_scaling", sin, 1.0);
    b_.hold(sin);
    if (dtype() != DType::F32) {  // return cos.to(x.dtype), sin.to(x.dtype)
      cos = b_.cast(m + ".cos.to", cos, dtype());
      b_.hold(cos);
      sin = b_.cast(m + ".sin.to", sin, dtype());
    }
    b_.release_holds(scope);
    return {cos, sin};
  }

  TensorId norm(const std::string& m, TensorId x, const NormParams& w) {
    if (c_.norm == HfNorm::LayerNorm) return apply_layer_norm(b_, m, x, w);
    size_t scope = b_.open_scope();
    b_.hold(x);
    const DType input_dtype = b_.tensor(x).dtype;
    TensorId h = x;
    if (input_dtype != DType::F32) h = b_.cast(m + ".to_float32", h, DType::F32);
    b_.hold(h);
    TensorId variance = b_.pow_scalar(m + ".pow", h, 2.0);
    variance = b_.mean(m + ".mean", variance, -1, true);
    b_.hold(variance);
    TensorId r = b_.add_scalar(m + ".add_eps", variance, 1e-6);  // the value of eps changes no size
    r = b_.rsqrt(m + ".rsqrt", r);
    h = b_.mul(m + ".mul", h, r);
    TensorId out;
    if (c_.norm == HfNorm::GemmaRms) {
      // output * (1.0 + self.weight.float()), then .type_as(x)
      TensorId wf = w.weight;
      if (b_.tensor(wf).dtype != DType::F32) wf = b_.cast(m + ".weight.float", wf, DType::F32);
      TensorId scale = b_.add_scalar(m + ".one_plus_weight", wf, 1.0);
      out = b_.mul(m + ".mul_weight", h, scale);
      if (input_dtype != DType::F32) out = b_.cast(m + ".type_as", out, input_dtype);
    } else {
      if (input_dtype != DType::F32) h = b_.cast(m + ".to_input_dtype", h, input_dtype);
      out = b_.mul(m + ".mul_weight", w.weight, h);
    }
    b_.release_holds(scope);
    return out;
  }

  TensorId layer(const std::string& m, size_t i, TensorId hidden, TensorId mask, TensorId cos, TensorId sin,
                 Cache* cache) {
    const LayerParams& lp = p_.layers[i];
    size_t scope = b_.open_scope();
    b_.hold(hidden);  // residual, and the caller's hidden_states until the layer returns
    TensorId residual = hidden;
    TensorId out;
    if (c_.family == HfFamily::GptNeox && c_.parallel_residual) {
      // attn = attention(input_layernorm(x)); mlp = mlp(post_attention_layernorm(x)); mlp + attn + x
      TensorId a = attention(m + "." + n_.attn, i, norm(m + "." + n_.in_norm, hidden, lp.in_norm), mask, cos, sin, cache);
      b_.hold(a);
      TensorId f = mlp(m + "." + n_.mlp, lp, norm(m + "." + n_.post_norm, hidden, lp.post_norm));
      out = b_.add(m + ".add", f, a);
      out = b_.add(m + ".add_residual", out, residual);
    } else if (c_.shared_layernorm) {
      // Falcon (parallel_attn): one layernorm feeds attention and mlp; mlp_output += attention_output;
      // output = residual + dropout(mlp_output) (p = 0: dropout returns its input in eval).
      TensorId ln = norm(m + "." + n_.in_norm, hidden, lp.in_norm);
      b_.hold(ln);
      TensorId a = attention(m + "." + n_.attn, i, ln, mask, cos, sin, cache);
      b_.hold(a);
      TensorId f = mlp(m + "." + n_.mlp, lp, ln);
      f = b_.add_(m + ".add_attention", f, a);
      out = b_.add(m + ".dropout_add", residual, f);
    } else {
      TensorId h = norm(m + "." + n_.in_norm, hidden, lp.in_norm);
      h = attention(m + "." + n_.attn, i, h, mask, cos, sin, cache);
      if (c_.sandwich_norms) h = norm(m + ".post_attention_layernorm", h, lp.post_norm);
      h = b_.add(m + ".add_attn", residual, h);
      b_.hold(h);
      residual = h;
      h = norm(m + (c_.sandwich_norms ? ".pre_feedforward_layernorm" : "." + n_.post_norm), h,
               c_.sandwich_norms ? lp.pre_ff_norm : lp.post_norm);
      h = c_.experts > 0 ? moe(m + "." + n_.mlp, lp, h) : mlp(m + "." + n_.mlp, lp, h);
      if (c_.sandwich_norms) h = norm(m + ".post_feedforward_layernorm", h, lp.post_ff_norm);
      out = b_.add(m + ".add_mlp", residual, h);
    }
    b_.release_holds(scope);
    return out;
  }

  // apply_rotary_pos_emb(q, k, cos, sin): cos.unsqueeze(1), q * cos + rotate_half(q) * sin.
  std::pair<TensorId, TensorId> apply_rotary(const std::string& m, TensorId q, TensorId k, TensorId cos, TensorId sin) {
    size_t scope = b_.open_scope();
    b_.hold(q);
    b_.hold(k);
    cos = b_.unsqueeze(m + ".cos.unsqueeze", cos, 1);
    sin = b_.unsqueeze(m + ".sin.unsqueeze", sin, 1);
    TensorId qc = b_.mul(m + ".q_mul_cos", q, cos);
    TensorId qs = b_.mul(m + ".q_rot_mul_sin", rotate_half(b_, m + ".q_rotate_half", q), sin);
    TensorId q_embed = b_.add(m + ".q_embed", qc, qs);
    b_.hold(q_embed);
    TensorId kc = b_.mul(m + ".k_mul_cos", k, cos);
    TensorId ks = b_.mul(m + ".k_rot_mul_sin", rotate_half(b_, m + ".k_rotate_half", k), sin);
    TensorId k_embed = b_.add(m + ".k_embed", kc, ks);
    b_.release_holds(scope);
    return {q_embed, k_embed};
  }

  // DynamicCache.update: the prefill appends the new keys/values (no copy); a decode step
  // concatenates them to the cached ones (a new tensor of past + S tokens) and the cache slot drops
  // the old tensor once the cat has returned.
  std::pair<TensorId, TensorId> update_cache(const std::string& m, size_t i, TensorId k, TensorId v, Cache* cache) {
    if (cache == nullptr) return {k, v};
    if (cache->max_len > 0) return update_static_cache(m, i, k, v, *cache);
    if (cache->k[i] == kNone) {
      b_.mark_kv_cache(k);
      b_.mark_kv_cache(v);
      cache->k[i] = k;
      cache->v[i] = v;
      return {k, v};
    }
    // key_states, value_states = past_key_value.update(key_states, value_states, ...): the new
    // token's keys and values stay referenced by the caller's locals until update returns.
    size_t scope = b_.open_scope();
    b_.hold(k);
    b_.hold(v);
    TensorId nk = b_.cat(m + ".key_cache.cat", {cache->k[i], k}, -2);
    b_.mark_kv_cache(nk);
    TensorId nv = b_.cat(m + ".value_cache.cat", {cache->v[i], v}, -2);
    b_.mark_kv_cache(nv);
    b_.release_holds(scope);
    cache->k[i] = nk;
    cache->v[i] = nv;
    return {nk, nv};
  }

  // StaticCache.update: k_out.index_copy_(2, cache_position, key_states), then the value, in
  // place in the preallocated [B, kv_heads, max_cache_len, head_dim] tensors, which it returns:
  // attention then reads all max_cache_len positions (the mask hides the empty ones).
  std::pair<TensorId, TensorId> update_static_cache(const std::string& m, size_t i, TensorId k, TensorId v, Cache& cache) {
    size_t scope = b_.open_scope();
    b_.hold(k);
    b_.hold(v);
    OpAttrs inplace;
    inplace.inplace = true;
    cache.k[i] = b_.opaque(m + ".key_cache.index_copy_", {cache.k[i], k}, {{b_.shape(cache.k[i]), dtype()}}, inplace)[0];
    cache.v[i] = b_.opaque(m + ".value_cache.index_copy_", {cache.v[i], v}, {{b_.shape(cache.v[i]), dtype()}}, inplace)[0];
    b_.release_holds(scope);
    return {cache.k[i], cache.v[i]};
  }

  // q, k, v [B, heads, S, head_dim] from the layer's projections.
  std::tuple<TensorId, TensorId, TensorId> project(const std::string& m, const LayerParams& lp, TensorId hidden) {
    const int64_t batch = b_.shape(hidden)[0], seq = b_.shape(hidden)[1];
    const int64_t hd = c_.head_dim, q_out = c_.heads * hd, kv_out = c_.kv_heads * hd;
    TensorId q, k, v;
    if (c_.qkv == HfQkv::Separate) {
      q = linear(m + "." + n_.q, hidden, lp.q);
      k = linear(m + "." + n_.k, hidden, lp.k);
      v = linear(m + "." + n_.v, hidden, lp.v);
      q = b_.transpose(m + ".q.transpose", b_.view(m + ".q.view", q, {batch, seq, c_.heads, hd}), 1, 2);
      k = b_.transpose(m + ".k.transpose", b_.view(m + ".k.view", k, {batch, seq, c_.kv_heads, hd}), 1, 2);
      v = b_.transpose(m + ".v.transpose", b_.view(m + ".v.view", v, {batch, seq, c_.kv_heads, hd}), 1, 2);
      return {q, k, v};
    }
    TensorId qkv = linear(m + "." + n_.qkv, hidden, lp.qkv);
    if (c_.qkv == HfQkv::Interleaved) {
      // gpt_neox: qkv.view(B, S, heads, 3 * head_dim); q = qkv[..., :hd].permute(0, 2, 1, 3), ...
      qkv = b_.view(m + ".qkv.view", qkv, {batch, seq, c_.heads, 3 * hd});
      q = b_.permute(m + ".q.permute", b_.slice(m + ".q.slice", qkv, 3, 0, hd), {0, 2, 1, 3});
      k = b_.permute(m + ".k.permute", b_.slice(m + ".k.slice", qkv, 3, hd, 2 * hd), {0, 2, 1, 3});
      v = b_.permute(m + ".v.permute", b_.slice(m + ".v.slice", qkv, 3, 2 * hd, 3 * hd), {0, 2, 1, 3});
      return {q, k, v};
    }
    // phi3 / falcon: q = qkv[..., :q_out], k = qkv[..., q_out:q_out + kv_out], v = the rest.
    q = b_.slice(m + ".q.slice", qkv, 2, 0, q_out);
    k = b_.slice(m + ".k.slice", qkv, 2, q_out, q_out + kv_out);
    v = b_.slice(m + ".v.slice", qkv, 2, q_out + kv_out, q_out + 2 * kv_out);
    q = b_.transpose(m + ".q.transpose", b_.unflatten(m + ".q.view", q, 2, {c_.heads, hd}), 1, 2);
    k = b_.transpose(m + ".k.transpose", b_.unflatten(m + ".k.view", k, 2, {c_.kv_heads, hd}), 1, 2);
    v = b_.transpose(m + ".v.transpose", b_.unflatten(m + ".v.view", v, 2, {c_.kv_heads, hd}), 1, 2);
    return {q, k, v};
  }

  TensorId attention(const std::string& m, size_t i, TensorId hidden, TensorId mask, TensorId cos, TensorId sin,
                     Cache* cache) {
    const LayerParams& lp = p_.layers[i];
    size_t scope = b_.open_scope();
    b_.hold(hidden);
    hidden = sp_.gather_for_linear(b_, m + ".qkv.all_gather", hidden);
    const int64_t batch = b_.shape(hidden)[0], seq = b_.shape(hidden)[1], hd = c_.head_dim;
    auto [q, k, v] = project(m, lp, hidden);
    if (c_.rotary_dim == hd) {
      std::tie(q, k) = apply_rotary(m + ".rotary", q, k, cos, sin);
    } else {
      // gpt_neox partial rotary: the first rotary_dim channels rotate, the rest pass; cat back.
      TensorId q_rot = b_.slice(m + ".q_rot", q, -1, 0, c_.rotary_dim), q_pass = b_.slice(m + ".q_pass", q, -1, c_.rotary_dim, hd);
      TensorId k_rot = b_.slice(m + ".k_rot", k, -1, 0, c_.rotary_dim), k_pass = b_.slice(m + ".k_pass", k, -1, c_.rotary_dim, hd);
      b_.hold(q_pass);
      b_.hold(k_pass);
      auto [qr, kr] = apply_rotary(m + ".rotary", q_rot, k_rot, cos, sin);
      q = b_.cat(m + ".q.cat", {qr, q_pass}, -1);
      k = b_.cat(m + ".k.cat", {kr, k_pass}, -1);
    }
    b_.hold(q);
    std::tie(k, v) = update_cache(m, i, k, v, cache);
    TensorId out;
    const int64_t groups = c_.heads / c_.kv_heads;
    if (attention_ == AttentionKind::Flash) {
      out = flash_attention(m, q, k, v);
    } else {
      k = repeat_kv(b_, m + ".repeat_kv_key", k, groups);
      b_.hold(k);
      v = repeat_kv(b_, m + ".repeat_kv_value", v, groups);
      b_.hold(v);
      out = eager() ? eager_attention(m, q, k, v, mask) : sdpa(m, q, k, v, mask);
    }
    out = b_.reshape(m + ".attn_output.reshape", out, {batch, seq, c_.heads * hd});
    out = linear(m + "." + n_.o, out, lp.o);
    out = sp_.scatter(b_, m + "." + n_.o + ".reduce_scatter", out);
    b_.release_holds(scope);
    return out;
  }

  // eager_attention_forward: softmax(q @ k^T / sqrt(d) + mask) in float32, @ v; returns
  // [B, S, heads, head_dim] contiguous (transpose(1, 2).contiguous()).
  TensorId eager_attention(const std::string& m, TensorId q, TensorId k, TensorId v, TensorId mask) {
    const int64_t keys = b_.shape(k)[2];
    TensorId w = b_.matmul(m + ".matmul_scores", q, b_.transpose(m + ".key.transpose", k, 2, 3));
    w = b_.div_scalar(m + ".div", w, std::sqrt(static_cast<double>(c_.head_dim)));
    if (mask != kNone) {
      // causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]
      TensorId cm = b_.slice(m + ".causal_mask", mask, 0, 0, b_.shape(mask)[0]);
      cm = b_.slice(m + ".causal_mask", cm, 1, 0, 1);
      cm = b_.slice(m + ".causal_mask", cm, 2, 0, b_.shape(mask)[2]);
      cm = b_.slice(m + ".causal_mask", cm, 3, 0, keys);
      w = b_.add(m + ".add_mask", w, cm);
    }
    w = eager_softmax_as(b_, m, w, b_.tensor(q).dtype);
    b_.hold(w);  // attn_weights, a local until the attention returns
    TensorId out = b_.matmul(m + ".matmul_context", w, v);
    out = b_.transpose(m + ".attn_output.transpose", out, 1, 2);
    return b_.contiguous(m + ".attn_output.contiguous", out);
  }

  // torch.nn.functional.scaled_dot_product_attention (is_causal = S > 1, no mask): PyTorch's
  // dispatcher (sdp_utils select_sdp_backend) takes the flash kernel for fp16/bf16
  // (_scaled_dot_product_flash_attention: output in [B, S, heads, d] layout and a float32
  // logsumexp [B, heads, S]) and the memory-efficient one for float32
  // (_scaled_dot_product_efficient_attention: the same output, and a logsumexp padded to a
  // multiple of 32 rows only when compute_log_sumexp, i.e. under grad). The transpose(1, 2) that
  // follows in HF is then already contiguous: contiguous() copies nothing.
  //
  // With a mask (a StaticCache: is_causal=False, attn_mask [B, 1, S, max_cache_len] in the model
  // dtype) flash is not eligible (sdp_utils check_for_attn_mask) and the memory-efficient kernel
  // runs; its preprocess_mask (aten/src/ATen/native/transformers/attention.cpp) pads a mask whose
  // strides are not multiples of 8 (pad_bias<8>: a [B, 1, S, round_up(len, 8)] copy, freed when
  // the call returns): HF's mask is an expand of [S, len], so that is every len not a multiple of 8.
  TensorId sdpa(const std::string& m, TensorId q, TensorId k, TensorId v, TensorId mask) {
    const auto s = b_.shape(q);  // [B, heads, S, d]
    std::vector<GraphBuilder::OpaqueOutput> outs = {{{s[0], s[2], s[1], s[3]}, b_.tensor(q).dtype}};
    if (mask != kNone) {
      const auto ms = b_.shape(mask);  // [B, 1, S, len]
      std::vector<TensorId> in = {q, k, v};
      if (ms[3] % 8 != 0) {
        in.push_back(b_.opaque(m + ".attn_mask.pad_bias", {mask}, {{{ms[0], ms[1], ms[2], (ms[3] + 7) / 8 * 8}, b_.tensor(mask).dtype}})[0]);
      } else {
        in.push_back(mask);
      }
      if (!inference_) outs.push_back({{s[0], s[1], (s[2] + 31) / 32 * 32}, DType::F32});
      return b_.opaque(m + ".scaled_dot_product_attention", in, outs)[0];
    }
    if (dtype() != DType::F32) {
      outs.push_back({{s[0], s[1], s[2]}, DType::F32});
    } else if (!inference_) {
      outs.push_back({{s[0], s[1], (s[2] + 31) / 32 * 32}, DType::F32});
    }
    return b_.opaque(m + ".scaled_dot_product_attention", {q, k, v}, outs)[0];
  }

  // LlamaFlashAttention2 -> flash_attn_func: q, k, v transposed to [B, S, heads, d] (views; the
  // kernel needs only the last dimension contiguous), no repeat_kv (the kernel reads the
  // kv heads of each group), output [B, S, heads, d] and softmax_lse float32 [B, heads, S]
  // (flash_attn_interface._flash_attn_forward).
  TensorId flash_attention(const std::string& m, TensorId q, TensorId k, TensorId v) {
    const auto s = b_.shape(q);
    q = b_.transpose(m + ".q.transpose_bshd", q, 1, 2);
    k = b_.transpose(m + ".k.transpose_bshd", k, 1, 2);
    v = b_.transpose(m + ".v.transpose_bshd", v, 1, 2);
    return b_.opaque(m + ".flash_attn_func", {q, k, v},
                     {{{s[0], s[2], s[1], s[3]}, b_.tensor(q).dtype}, {{s[0], s[1], s[2]}, DType::F32}})[0];
  }

  // nn.Linear, or peft's lora.Linear: result = base_layer(x); result = result +
  // lora_B(lora_A(dropout(x))) * scaling (scaling = lora_alpha / r; dropout is nn.Identity at 0).
  TensorId linear(const std::string& m, TensorId x, const LinearParams& p) {
    if (p.lora_a == kNone) return base_linear(m, x, p);
    size_t scope = b_.open_scope();
    b_.hold(x);
    TensorId result = base_linear(m + ".base_layer", x, p);
    TensorId d = x;
    if (lora_->dropout > 0.0) d = b_.dropout(m + ".lora_dropout", x, lora_->dropout);
    TensorId a = b_.linear_with(m + ".lora_A", d, p.lora_a);
    TensorId up = b_.linear_with(m + ".lora_B", a, p.lora_b);
    up = b_.mul_scalar(m + ".scaling", up, lora_->alpha / static_cast<double>(lora_->r));
    TensorId out = b_.add(m + ".add", result, up);
    b_.release_holds(scope);
    return out;
  }

  // nn.Linear, or the quantized layer of --weights with its kernel's temporaries:
  //  nf4: bnb.matmul_4bit: one token without grad takes gemv_4bit (no temporary); otherwise
  //    MatMul4Bit: F.linear(A, dequantize_4bit(B).t(), bias), the dequantized weight [out, in]
  //    in the model dtype and, first, the fp32 absmax of its blocks (dequantize_blockwise);
  //  int8: MatMul8bitLt: A.to(float16) (when the model is not fp16), int8_vectorwise_quant's
  //    int8 copy and fp32 row scales, the int32 product, the fp16 result before .to(dtype);
  //    the outlier columns (threshold 6.0) depend on the data and are not counted;
  //  int4: exllamav2 gemm_half_q_half into the output, in the persistent scratch;
  //  fp8: FbgemmFp8Linear.forward: quantize_fp8_per_row(x) gives the fp8 activations [tokens, in]
  //    and their fp32 row scales [tokens], alive while f8f8bf16_rowwise makes the bf16 output,
  //    then deleted; the bias is added out of place (output + self.bias).
  // Otherwise the bias is added in place.
  TensorId base_linear(const std::string& m, TensorId x, const LinearParams& p) {
    if (p.quant.empty()) return apply_linear(b_, m, x, p);
    const int64_t tokens = b_.tensor(x).numel() / p.in;
    const int64_t act = b_.tensor(x).bytes() / b_.tensor(x).numel();
    int64_t temp = 0, aux = 0;
    if (weights_ == WeightFormat::Nf4 && !(inference_ && tokens == 1)) {
      temp = checked_mul(checked_mul(p.out, p.in, m), act, m);
      aux = checked_mul((checked_mul(p.out, p.in, m) + 63) / 64, 4, m);
    } else if (weights_ == WeightFormat::Int8) {
      if (b_.tensor(x).dtype != DType::F16) aux = checked_mul(checked_mul(tokens, p.in, m), 2, m);
      temp = checked_add(checked_mul(tokens, p.in, m), checked_mul(tokens, 4, m), m);
      temp = checked_add(temp, checked_mul(checked_mul(tokens, p.out, m), 4, m), m);
      if (b_.tensor(x).dtype != DType::F16) temp = checked_add(temp, checked_mul(checked_mul(tokens, p.out, m), 2, m), m);
    } else if (weights_ == WeightFormat::Fp8) {
      temp = checked_add(checked_mul(tokens, p.in, m), checked_mul(tokens, 4, m), m);
    }
    TensorId out = b_.quant_linear(m, x, p.quant, p.out, temp, aux);
    if (p.bias != kNone && weights_ == WeightFormat::Fp8) return b_.add(m + ".bias.add", out, p.bias);
    if (p.bias != kNone) out = b_.add_(m + ".bias.add_", out, p.bias);
    return out;
  }

  TensorId act(const std::string& m, TensorId x) {
    return c_.gelu ? b_.gelu(m, x, /*approximate_tanh=*/c_.norm == HfNorm::GemmaRms) : b_.silu(m, x);
  }

  TensorId mlp(const std::string& m, const LayerParams& lp, TensorId x) {
    size_t scope = b_.open_scope();
    b_.hold(x);
    x = sp_.gather_for_linear(b_, m + ".fc1.all_gather", x);
    TensorId out;
    if (c_.fused_gate_up) {
      // up_states = gate_up_proj(x); gate, up_states = up_states.chunk(2, dim=-1);
      // up_states = up_states * act(gate); down_proj(up_states)
      TensorId gu = linear(m + ".gate_up_proj", x, lp.gate_up);
      std::vector<TensorId> parts = b_.chunk(m + ".chunk", gu, 2, -1);
      b_.hold(parts[1]);
      TensorId h = b_.mul(m + ".mul", parts[1], act(m + ".activation_fn", parts[0]));
      out = linear(m + ".down_proj", h, lp.down);
    } else if (c_.gated_mlp) {
      TensorId gate = act(m + ".act_fn", linear(m + ".gate_proj", x, lp.gate));
      TensorId up = linear(m + ".up_proj", x, lp.up);
      out = linear(m + ".down_proj", b_.mul(m + ".mul", gate, up), lp.down);
    } else {
      TensorId h = act(m + ".act", linear(m + "." + n_.fc1, x, lp.up));
      out = linear(m + "." + n_.fc2, h, lp.down);
    }
    out = sp_.scatter(b_, m + ".down_proj.reduce_scatter", out);
    b_.release_holds(scope);
    return out;
  }

  // MixtralSparseMoeBlock.forward: router logits, softmax in float32, topk, renormalise, then per
  // expert: torch.where on its one-hot mask, index its tokens, run the expert, scale by the
  // routing weights and index_add_ into final_hidden_states (in place). Routing is balanced:
  // expert e gets floor(T * k / E) tokens, one more for the first (T * k) mod E experts.
  TensorId moe(const std::string& m, const LayerParams& lp, TensorId x) {
    size_t scope = b_.open_scope();
    b_.hold(x);
    const auto s = b_.shape(x);
    const int64_t tokens = s[0] * s[1], k = c_.experts_per_tok, e_count = c_.experts;
    TensorId flat = b_.view(m + ".view", x, {tokens, s[2]});
    b_.hold(flat);
    TensorId router_logits = b_.linear_with(m + ".gate", flat, lp.router);
    b_.hold(router_logits);  // returned with the output
    TensorId rw = router_logits;
    if (b_.tensor(rw).dtype != DType::F32) rw = b_.cast(m + ".softmax.to_float32", rw, DType::F32);
    rw = b_.softmax(m + ".softmax", rw, 1);
    auto topk = b_.opaque(m + ".topk", {rw}, {{{tokens, k}, DType::F32}, {{tokens, k}, DType::I64}});
    TensorId weights = topk[0], selected = topk[1];
    b_.hold(selected);
    TensorId denom = b_.sum(m + ".sum", weights, -1, true);
    OpAttrs inplace;
    inplace.inplace = true;
    weights = b_.opaque(m + ".div_", {weights, denom}, {{{tokens, k}, DType::F32}}, inplace)[0];
    if (dtype() != DType::F32) weights = b_.cast(m + ".routing_weights.to", weights, dtype());
    b_.hold(weights);
    TensorId final_states = b_.factory(m + ".zeros", {tokens, s[2]}, dtype());
    TensorId one_hot = b_.opaque(m + ".one_hot", {selected}, {{{tokens, k, e_count}, DType::I64}})[0];
    TensorId expert_mask = b_.permute(m + ".permute", one_hot, {2, 1, 0});
    b_.hold(expert_mask);
    const int64_t routed = checked_mul(tokens, k, "routed tokens");
    for (int64_t e = 0; e < e_count; ++e) {
      const std::string x_name = m + ".experts." + std::to_string(e);
      const int64_t n = routed / e_count + (e < routed % e_count ? 1 : 0);
      size_t es = b_.open_scope();
      TensorId sel = b_.select(x_name + ".mask", expert_mask, 0, e);
      auto where = b_.opaque(x_name + ".where", {sel}, {{{n}, DType::I64}, {{n}, DType::I64}});
      b_.hold(where[0]);
      b_.hold(where[1]);
      TensorId state = b_.opaque(x_name + ".index", {flat, where[1]}, {{{n, s[2]}, dtype()}})[0];
      const LayerParams::Expert& ex = lp.experts[static_cast<size_t>(e)];
      TensorId h = act(x_name + ".act_fn", linear(x_name + ".w1", state, ex.w1));
      h = b_.mul(x_name + ".mul", h, linear(x_name + ".w3", state, ex.w3));
      h = linear(x_name + ".w2", h, ex.w2);
      TensorId scale = b_.opaque(x_name + ".routing_weights.index", {weights, where[1], where[0]}, {{{n, 1}, dtype()}})[0];
      h = b_.mul(x_name + ".mul_routing", h, scale);
      final_states = b_.opaque(x_name + ".index_add_", {final_states, where[1], h}, {{{tokens, s[2]}, dtype()}}, inplace)[0];
      b_.release_holds(es);
    }
    TensorId out = b_.reshape(m + ".reshape", final_states, {s[0], s[1], s[2]});
    b_.release_holds(scope);
    return out;
  }

  GraphBuilder& b_;
  const HfDecoderConfig& c_;
  const Params& p_;
  Names n_;
  AttentionKind attention_;
  bool inference_;
  const std::optional<LoraConfig>& lora_;
  WeightFormat weights_;
  SequenceParallel sp_;  // Megatron sequence parallelism (sequence_parallel.h); off by default
};

// transformers' decoder layer class of each model_type (modeling_<type>.py).
std::string decoder_layer_class(const std::string& model_type) {
  static const std::map<std::string, std::string> classes = {
      {"llama", "LlamaDecoderLayer"}, {"mistral", "MistralDecoderLayer"}, {"mixtral", "MixtralDecoderLayer"},
      {"qwen2", "Qwen2DecoderLayer"}, {"gemma", "GemmaDecoderLayer"},     {"gemma2", "Gemma2DecoderLayer"},
      {"phi3", "Phi3DecoderLayer"},   {"gpt_neox", "GPTNeoXLayer"},       {"falcon", "FalconDecoderLayer"},
  };
  auto it = classes.find(model_type);
  return it == classes.end() ? std::string() : it->second;
}

AttentionKind resolve_attention(const HfDecoderConfig& c, const BuildConfig& cfg, const std::string& model) {
  AttentionKind a = cfg.attention == AttentionKind::Default ? default_attention(c) : cfg.attention;
  if (a == AttentionKind::Flash && cfg.dtype == DType::F32) {
    throw InputError(model + ": flash attention runs in fp16 or bf16 only (flash_attn_func); use --precision bf16 or --attention sdpa");
  }
  return a;
}

void check_weights(const BuildConfig& cfg, const std::string& model) {
  if (cfg.weights == WeightFormat::Default) return;
  if (cfg.dtype != DType::F16 && cfg.dtype != DType::BF16) {
    throw InputError(model + ": --weights quantizes a model run in fp16 or bf16 (--precision fp16|bf16)");
  }
  if (cfg.weights == WeightFormat::Int4) {
    if (cfg.dtype != DType::F16) throw InputError(model + ": --weights int4 (GPTQ, exllamav2 kernels) runs in fp16: add --precision fp16");
    if (!cfg.inference) throw InputError(model + ": --weights int4 (GPTQ, exllamav2 kernels) is inference only");
  }
  if (cfg.weights == WeightFormat::Fp8) {
    // FbgemmFp8HfQuantizer refuses float16; f8f8bf16_rowwise returns bf16 and has no backward.
    if (cfg.dtype != DType::BF16) throw InputError(model + ": --weights fp8 (FbgemmFp8Linear) runs in bf16: add --precision bf16");
    if (!cfg.inference) throw InputError(model + ": --weights fp8 (FbgemmFp8Linear, fbgemm kernels without backward) is inference only");
  }
}

void check_lora_targets(const std::optional<LoraConfig>& lora, const std::set<std::string>& used, const std::string& model) {
  if (!lora) return;
  for (const std::string& t : lora->targets) {
    if (!used.count(t)) throw InputError("--lora targets: " + model + " has no nn.Linear named '" + t + "'");
  }
}

// peft's mark_only_lora_as_trainable: requires_grad=False on everything but lora_ parameters.
void freeze_all_but_adapters(Graph& g) {
  for (Tensor& t : g.tensors) {
    if (t.role == TensorRole::Parameter && t.name.find(".lora_") == std::string::npos) t.frozen = true;
  }
}

// One forward with use_cache=False: all logits; training adds ForCausalLMLoss.
Graph build_single(const HfDecoderConfig& c, const std::string& model, const BuildConfig& cfg) {
  const int64_t seq = sequence_length(cfg, 128, c.max_positions, model, "max_position_embeddings");
  GraphBuilder b(model, cfg.dtype);
  b.set_dim("batch", cfg.batch);
  b.set_dim("seq", seq);
  set_transformer_dims(b, c.hidden, c.layers);
  std::set<std::string> lora_used;
  check_weights(cfg, model);
  Params p = declare(b, c, names_of(c), cfg, lora_used);
  check_lora_targets(cfg.lora, lora_used, model);
  TensorId ids = b.input("input_ids", {cfg.batch, seq}, DType::I64);
  Forward fw(b, c, p, resolve_attention(c, cfg, model), cfg.inference, cfg);
  if (cfg.logits_to_keep > seq) throw InputError(model + ": more logits to keep than positions");
  TensorId logits = fw.logits("", fw.model("", ids, 0, nullptr), cfg.inference ? cfg.logits_to_keep : 0);
  b.mark_output(logits);
  if (!cfg.inference) {
    b.begin_loss();
    // ForCausalLMLoss: logits = logits.float(), then the shifted cross-entropy.
    TensorId lf = b.tensor(logits).dtype == DType::F32 ? logits : b.cast("loss.logits.float", logits, DType::F32);
    b.set_loss(add_loss(b, lf, LossKind::NextToken, cfg));
  }
  Graph g = b.finish();
  if (cfg.lora) freeze_all_but_adapters(g);
  g.block_class = decoder_layer_class(c.model_type);
  return g;
}

std::string forward_prefix(int64_t f) { return f == 0 ? "prefill." : "decode" + std::to_string(f) + "."; }

// A Python name rebound in a later iteration: its old tensor is dropped once op `until` (the one
// making the new value) has run. Carried-in tensors are graph inputs the caller releases.
void drop_after(GraphBuilder& b, TensorId t, OpId until) {
  if (t == kNone) return;
  if (b.tensor(t).role == TensorRole::Input) b.release_input_after(t, until);
  else b.keep_until(t, until);
}

// What generate()'s loop keeps between iterations besides the cache and the token ids: Python
// locals that live until the next iteration rebinds them.
struct LoopState {
  // Greedy (_sample) and beam search: next_token_logits [R, V] fp32.
  TensorId logits = kNone;
  TensorId next_tokens = kNone;  // greedy: argmax [B]; beams: next_tokens % vocab [B, 2K]
  // Beam search (_beam_search) only.
  TensorId processed = kNone;    // next_token_scores_processed: the log_softmax [R, V] fp32
  TensorId top_scores = kNone;   // next_token_scores after topk [B, 2K] fp32
  TensorId top_beams = kNone;    // next_indices [B, 2K] int64
  TensorId beam_scores = kNone;  // [R] fp32 (beam_outputs["next_beam_scores"])
  TensorId beam_tokens = kNone;  // beam_next_tokens [R] int64
  TensorId beam_idx = kNone;     // [R] int64

  std::vector<TensorId> all() const {
    std::vector<TensorId> v;
    for (TensorId t : {logits, next_tokens, processed, top_scores, top_beams, beam_scores, beam_tokens, beam_idx}) {
      if (t != kNone) v.push_back(t);
    }
    return v;
  }
};

// Forwards first..last of generate()'s loop: greedy (GenerationMixin._sample) with one beam,
// beam search (GenerationMixin._beam_search) with more; rows R = batch x beams run in every
// forward (generate() repeat_interleave's the prompt before the loop). Python rebinds a name
// after its new value exists, so the previous iteration's values live until their replacements
// are made.
class GenerationLoop {
 public:
  GenerationLoop(GraphBuilder& b, const HfDecoderConfig& c, const BuildConfig& cfg)
      : b_(b), c_(c), w_(*cfg.generation), dtype_(cfg.dtype), batch_(cfg.batch),
        rows_(checked_mul(cfg.batch, cfg.generation->beams, "batch x beams")) {}

  void run(Forward& fw) {
    TensorId prompt = b_.input("input_ids", {batch_, w_.prompt}, DType::I64);  // the caller keeps it
    prompt_ = prompt;
    cache_.k.assign(static_cast<size_t>(c_.layers), kNone);
    cache_.v.assign(static_cast<size_t>(c_.layers), kNone);
    // StaticCache: generate() sizes it max_batch_size = batch x beams, max_cache_len = max_length
    // (prompt + new tokens) and StaticCache.__init__ allocates torch.zeros per layer, key then value.
    if (w_.static_cache) cache_.max_len = checked_add(w_.prompt, w_.new_tokens, "prompt + new tokens");
    if (w_.first == 0 && w_.static_cache) {
      for (int64_t i = 0; i < c_.layers; ++i) {
        const std::string m = "static_cache." + std::to_string(i);
        const size_t li = static_cast<size_t>(i);
        cache_.k[li] = b_.factory(m + ".key_cache.zeros", {rows_, c_.kv_heads, cache_.max_len, c_.head_dim}, dtype_);
        b_.mark_kv_cache(cache_.k[li]);
        cache_.v[li] = b_.factory(m + ".value_cache.zeros", {rows_, c_.kv_heads, cache_.max_len, c_.head_dim}, dtype_);
        b_.mark_kv_cache(cache_.v[li]);
      }
    }
    if (w_.first == 0) start(prompt);
    else carry_in();
    for (int64_t f = w_.first; f <= w_.last; ++f) iteration(fw, f);
    // What is alive when the window ends: the cache, the ids and the loop's locals.
    for (size_t i = 0; i < cache_.k.size(); ++i) {
      b_.mark_output(cache_.k[i]);
      b_.mark_output(cache_.v[i]);
    }
    b_.mark_output(input_ids_);
    if (previous_ids_ != kNone) b_.mark_output(previous_ids_);
    for (TensorId t : s_.all()) b_.mark_output(t);
  }

 private:
  bool beams() const { return w_.beams > 1; }

  // Before the loop: _expand_inputs_for_generation (input_ids.repeat_interleave(num_beams, 0));
  // _beam_search: beam_scores = zeros(B, K); beam_scores[:, 1:] = -1e9 (in place); .view(B * K).
  void start(TensorId prompt) {
    input_ids_ = prompt;
    if (!beams()) return;
    input_ids_ = b_.opaque("repeat_interleave", {prompt}, {{{rows_, w_.prompt}, DType::I64}})[0];
    TensorId scores = b_.factory("beam_scores.zeros", {batch_, w_.beams}, DType::F32);
    s_.beam_scores = b_.view("beam_scores.view", scores, {rows_});
  }

  // A window that starts after the prefill takes what the loop carries as inputs.
  void carry_in() {
    const int64_t past = w_.static_cache ? cache_.max_len : w_.prompt + w_.first - 1;
    for (int64_t i = 0; i < c_.layers; ++i) {
      const std::string m = "past_key_values." + std::to_string(i);
      const size_t li = static_cast<size_t>(i);
      cache_.k[li] = b_.input(m + ".key", {rows_, c_.kv_heads, past, c_.head_dim}, dtype_);
      b_.mark_kv_cache(cache_.k[li]);
      cache_.v[li] = b_.input(m + ".value", {rows_, c_.kv_heads, past, c_.head_dim}, dtype_);
      b_.mark_kv_cache(cache_.v[li]);
    }
    input_ids_ = b_.input("generated_ids", {rows_, w_.prompt + w_.first}, DType::I64);
    // The ids before the last torch.cat, still viewed by the previous forward's model input
    // (after the prefill that is the caller's prompt itself, unless beams expanded it).
    if (w_.first >= 2 || beams()) {
      previous_ids_ = b_.input("previous_generated_ids", {rows_, w_.prompt + w_.first - 1}, DType::I64);
    }
    s_.logits = b_.input("next_token_logits", {rows_, c_.vocab}, DType::F32);
    if (!beams()) {
      s_.next_tokens = b_.input("next_tokens", {batch_}, DType::I64);
      return;
    }
    const int64_t top = 2 * w_.beams;
    s_.processed = b_.input("next_token_scores_processed", {rows_, c_.vocab}, DType::F32);
    s_.top_scores = b_.input("next_token_scores", {batch_, top}, DType::F32);
    s_.next_tokens = b_.input("next_tokens", {batch_, top}, DType::I64);
    s_.top_beams = b_.input("next_indices", {batch_, top}, DType::I64);
    s_.beam_scores = b_.input("beam_scores", {rows_}, DType::F32);
    s_.beam_tokens = b_.input("beam_next_tokens", {rows_}, DType::I64);
    s_.beam_idx = b_.input("beam_idx", {rows_}, DType::I64);
  }

  void iteration(Forward& fw, int64_t f) {
    const std::string pre = forward_prefix(f);
    const int64_t past = f == 0 ? 0 : w_.prompt + f - 1;
    TensorId ids = input_ids_;
    if (f > 0) {  // the tokens not in the cache: model_input = input_ids[:, -1:] (a view)
      const int64_t len = b_.shape(input_ids_)[1];
      ids = b_.slice(pre + "input_ids.slice", input_ids_, 0, 0, rows_);
      ids = b_.slice(pre + "input_ids.slice", ids, 1, len - 1, len);
      // Rebinding model_input drops the view of the ids before the last cat.
      drop_after(b_, previous_ids_, b_.last_op());
    }
    std::vector<TensorId> old_k = cache_.k, old_v = cache_.v;
    TensorId hidden = fw.model(pre, ids, past, &cache_);
    // The cache slot's old tensor goes when torch.cat has replaced it (a StaticCache keeps its own).
    for (size_t i = 0; f > 0 && !w_.static_cache && i < cache_.k.size(); ++i) {
      for (auto [old, now] : {std::pair{old_k[i], cache_.k[i]}, std::pair{old_v[i], cache_.v[i]}}) {
        drop_after(b_, old, b_.tensor(now).producer);
      }
    }
    TensorId logits = fw.logits(pre, hidden, 1);  // num_logits_to_keep=1
    // next_token_logits = outputs.logits[:, -1, :].clone().float()
    const int64_t kept = b_.shape(logits)[1];
    TensorId row = b_.slice(pre + "logits.slice", logits, 0, 0, rows_);
    row = b_.select(pre + "logits.select", row, 1, kept - 1);
    row = b_.slice(pre + "logits.slice", row, 1, 0, c_.vocab);
    TensorId next_logits = b_.opaque(pre + "logits.clone", {row}, {{{rows_, c_.vocab}, b_.tensor(logits).dtype}})[0];
    if (b_.tensor(next_logits).dtype != DType::F32) next_logits = b_.cast(pre + "logits.float", next_logits, DType::F32);
    drop_after(b_, s_.logits, b_.last_op());
    s_.logits = next_logits;
    TensorId longer = beams() ? beam_step(pre, next_logits) : greedy_step(pre, next_logits);
    // `del outputs` (the logits), before _beam_search reorders the cache.
    b_.keep_until(logits, b_.last_op());
    if (beams()) reorder_cache(pre);
    // The old input_ids lives on in the model input's view until the next forward slices the
    // new one (the caller keeps the prompt itself).
    previous_ids_ = input_ids_ == prompt_ ? kNone : input_ids_;
    input_ids_ = longer;
  }

  // next_tokens = argmax(next_token_logits, -1); input_ids = cat([input_ids, next_tokens[:, None]], -1)
  TensorId greedy_step(const std::string& pre, TensorId next_logits) {
    TensorId next_tokens = b_.opaque(pre + "argmax", {next_logits}, {{{batch_}, DType::I64}})[0];
    drop_after(b_, s_.next_tokens, b_.last_op());
    s_.next_tokens = next_tokens;
    TensorId col = b_.unsqueeze(pre + "next_tokens.unsqueeze", next_tokens, 1);
    return b_.cat(pre + "input_ids.cat", {input_ids_, col}, -1);
  }

  // _beam_search after the forward (transformers v4.46 generation/utils.py), without logits
  // processors or an eos token:
  //   next_token_scores = log_softmax(next_token_logits, -1)            [R, V] fp32
  //   next_token_scores_processed = logits_processor(...)               the same tensor
  //   next_token_scores = processed + beam_scores[:, None].expand_as()  [R, V] fp32
  //   next_token_scores, next_tokens = topk(view(B, K * V), 2K)          [B, 2K]
  //   next_indices = div(next_tokens, V, floor); next_tokens = next_tokens % V
  //   beam_outputs = beam_scorer.process(...)   zeros (B, K) x 3 (BeamSearchScorer.process)
  //   input_ids = cat([input_ids[beam_idx, :], beam_next_tokens.unsqueeze(-1)], -1)
  TensorId beam_step(const std::string& pre, TensorId next_logits) {
    const int64_t k = w_.beams, top = 2 * w_.beams;
    TensorId lsm = b_.log_softmax(pre + "log_softmax", next_logits, -1);
    drop_after(b_, s_.top_scores, b_.last_op());  // next_token_scores rebound
    drop_after(b_, s_.processed, b_.last_op());   // next_token_scores_processed rebound
    s_.processed = lsm;
    TensorId bs = b_.unsqueeze(pre + "beam_scores.unsqueeze", s_.beam_scores, 1);
    bs = b_.expand(pre + "beam_scores.expand_as", bs, {rows_, c_.vocab});
    TensorId total = b_.add(pre + "beam_scores.add", lsm, bs);
    TensorId flat = b_.view(pre + "next_token_scores.view", total, {batch_, checked_mul(k, c_.vocab, "beams x vocab")});
    auto topk = b_.opaque(pre + "topk", {flat}, {{{batch_, top}, DType::F32}, {{batch_, top}, DType::I64}});
    s_.top_scores = topk[0];
    drop_after(b_, s_.next_tokens, b_.last_op());  // next_tokens rebound by the topk
    TensorId beam_of = b_.opaque(pre + "div", {topk[1]}, {{{batch_, top}, DType::I64}})[0];
    drop_after(b_, s_.top_beams, b_.last_op());
    s_.top_beams = beam_of;
    s_.next_tokens = b_.opaque(pre + "remainder", {topk[1]}, {{{batch_, top}, DType::I64}})[0];
    TensorId scores = b_.factory(pre + "process.next_beam_scores", {batch_, k}, DType::F32);
    TensorId tokens = b_.factory(pre + "process.next_beam_tokens", {batch_, k}, DType::I64);
    TensorId idx = b_.factory(pre + "process.next_beam_indices", {batch_, k}, DType::I64);
    for (TensorId old : {s_.beam_scores, s_.beam_tokens, s_.beam_idx}) drop_after(b_, old, b_.last_op());
    s_.beam_scores = b_.view(pre + "next_beam_scores.view", scores, {rows_});
    s_.beam_tokens = b_.view(pre + "next_beam_tokens.view", tokens, {rows_});
    s_.beam_idx = b_.view(pre + "next_beam_indices.view", idx, {rows_});
    TensorId gathered = b_.index(pre + "input_ids.index", input_ids_, s_.beam_idx);
    TensorId col = b_.unsqueeze(pre + "beam_next_tokens.unsqueeze", s_.beam_tokens, -1);
    return b_.cat(pre + "input_ids.cat", {gathered, col}, -1);
  }

  // DynamicCache.reorder_cache: per layer, key_cache[i] = key_cache[i].index_select(0, beam_idx),
  // then the value: each new tensor is made while the old one is still in the slot.
  void reorder_cache(const std::string& pre) {
    for (size_t i = 0; i < cache_.k.size(); ++i) {
      const std::string m = pre + "past_key_values." + std::to_string(i);
      for (auto [slot, name] : {std::pair{&cache_.k[i], ".key"}, std::pair{&cache_.v[i], ".value"}}) {
        TensorId old = *slot;
        TensorId now = b_.opaque(m + name + ".index_select", {old, s_.beam_idx}, {{b_.shape(old), dtype_}})[0];
        b_.mark_kv_cache(now);
        drop_after(b_, old, b_.last_op());
        *slot = now;
      }
    }
  }

  GraphBuilder& b_;
  const HfDecoderConfig& c_;
  const GenerationWindow& w_;
  DType dtype_;
  int64_t batch_, rows_;
  Cache cache_;
  TensorId prompt_ = kNone, input_ids_ = kNone, previous_ids_ = kNone;
  LoopState s_;
};

Graph build_generation(const HfDecoderConfig& c, const std::string& model, const BuildConfig& cfg) {
  const GenerationWindow& w = *cfg.generation;
  if (w.prompt <= 0 || w.new_tokens <= 0 || w.beams <= 0 || w.first < 0 || w.last < w.first || w.last >= w.new_tokens) {
    throw InputError(model + ": invalid generation window");
  }
  const int64_t total = checked_add(w.prompt, w.new_tokens - 1, "prompt + new tokens");
  if (total > c.max_positions) {
    throw InputError(model + ": prompt " + std::to_string(w.prompt) + " + " + std::to_string(w.new_tokens) +
                     " new tokens is longer than max_position_embeddings " + std::to_string(c.max_positions));
  }
  GraphBuilder b(model, cfg.dtype);
  b.set_dim("batch", cfg.batch);
  b.set_dim("seq", w.prompt);
  std::set<std::string> lora_used;
  check_weights(cfg, model);
  Params p = declare(b, c, names_of(c), cfg, lora_used);
  check_lora_targets(cfg.lora, lora_used, model);
  const AttentionKind attention = resolve_attention(c, cfg, model);
  if (w.static_cache && attention == AttentionKind::Flash) {
    // LlamaFlashAttention2.forward raises for a StaticCache (transformers v4.46).
    throw InputError(model + ": --cache static does not run with --attention flash (flash_attention_2 rejects a StaticCache); use sdpa or eager");
  }
  Forward fw(b, c, p, attention, /*inference=*/true, cfg);
  GenerationLoop(b, c, cfg).run(fw);
  Graph g = b.finish();
  if (cfg.lora) freeze_all_but_adapters(g);
  g.block_class = decoder_layer_class(c.model_type);
  return g;
}

}  // namespace

AttentionKind default_attention(const HfDecoderConfig&) { return AttentionKind::Sdpa; }

Graph build_hf_decoder(const HfDecoderConfig& c, const std::string& model_name, const BuildConfig& cfg) {
  if (cfg.generation && cfg.tensor_parallel == 1) return build_generation(c, model_name, cfg);
  // Under tensor parallelism the graph is one Megatron rank's: the same forward at its sizes.
  check_tensor_parallel_options(cfg, model_name);
  if (cfg.sequence_parallel && c.experts > 0) {
    // Megatron's MoE layers dispatch tokens with their own all-gathers / all-to-alls
    // (megatron/core/transformer/moe/token_dispatcher.py), which headroom does not model.
    throw InputError("--sequence-parallel with " + model_name + ": a mixture-of-experts model's token dispatch under sequence parallelism is not modelled");
  }
  return build_single(megatron_rank_config(c, cfg.tensor_parallel, model_name), model_name, cfg);
}

}  // namespace headroom
