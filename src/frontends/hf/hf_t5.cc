#include "frontends/hf/hf_t5.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "frontends/zoo/losses.h"
#include "frontends/zoo/transformer_common.h"
#include "ir/builder.h"
#include "util/error.h"

namespace headroom {
namespace {

struct AttentionParams {
  TensorId q = kNone, k = kNone, v = kNone, o = kNone, relative_bias = kNone;
};

struct BlockParams {
  AttentionParams self_attn, cross_attn;
  TensorId self_norm = kNone, cross_norm = kNone, ff_norm = kNone;
  TensorId wi_0 = kNone, wi_1 = kNone, wo = kNone;  // wi_1 only gated; wi_0 is `wi` otherwise
};

struct StackParams {
  std::vector<BlockParams> blocks;
  TensorId final_norm = kNone;
};

struct T5Params {
  TensorId shared = kNone;
  StackParams encoder, decoder;
  TensorId lm_head = kNone;
};

// T5Attention.__init__: q, k, v, o (no biases), relative_attention_bias in the first block.
AttentionParams attention_params(GraphBuilder& b, const T5Config& c, const std::string& m, bool relative) {
  const int64_t inner = c.heads * c.d_kv;
  AttentionParams p;
  p.q = b.parameter(m + ".q.weight", {inner, c.d_model});
  p.k = b.parameter(m + ".k.weight", {inner, c.d_model});
  p.v = b.parameter(m + ".v.weight", {inner, c.d_model});
  p.o = b.parameter(m + ".o.weight", {c.d_model, inner});
  if (relative) p.relative_bias = b.parameter(m + ".relative_attention_bias.weight", {c.buckets, c.heads});
  return p;
}

StackParams stack_params(GraphBuilder& b, const T5Config& c, const std::string& s, int64_t layers, bool decoder) {
  StackParams p;
  for (int64_t i = 0; i < layers; ++i) {
    const std::string m = s + ".block." + std::to_string(i) + ".layer.";
    BlockParams bp;
    bp.self_attn = attention_params(b, c, m + "0.SelfAttention", i == 0);
    bp.self_norm = b.parameter(m + "0.layer_norm.weight", {c.d_model});
    int ff = 1;
    if (decoder) {
      bp.cross_attn = attention_params(b, c, m + "1.EncDecAttention", false);
      bp.cross_norm = b.parameter(m + "1.layer_norm.weight", {c.d_model});
      ff = 2;
    }
    const std::string f = m + std::to_string(ff);
    if (c.gated) {
      bp.wi_0 = b.parameter(f + ".DenseReluDense.wi_0.weight", {c.d_ff, c.d_model});
      bp.wi_1 = b.parameter(f + ".DenseReluDense.wi_1.weight", {c.d_ff, c.d_model});
    } else {
      bp.wi_0 = b.parameter(f + ".DenseReluDense.wi.weight", {c.d_ff, c.d_model});
    }
    bp.wo = b.parameter(f + ".DenseReluDense.wo.weight", {c.d_model, c.d_ff});
    bp.ff_norm = b.parameter(f + ".layer_norm.weight", {c.d_model});
    p.blocks.push_back(bp);
  }
  p.final_norm = b.parameter(s + ".final_layer_norm.weight", {c.d_model});
  return p;
}

// The EncoderDecoderCache of the decoder's layers: self attention keys/values (growing) and
// cross attention keys/values (fixed once made).
struct T5Cache {
  std::vector<TensorId> self_k, self_v, cross_k, cross_v;
};

class T5Forward {
 public:
  T5Forward(GraphBuilder& b, const T5Config& c, const T5Params& p, double dropout) : b_(b), c_(c), p_(p), dropout_(dropout) {}

  // T5ForConditionalGeneration.forward: logits [B, T, vocab].
  TensorId run(TensorId input_ids, TensorId decoder_input_ids) {
    size_t scope = b_.open_scope();
    TensorId encoded = stack("encoder", p_.encoder, input_ids, kNone);
    b_.hold(encoded);  // encoder_outputs, alive until the forward returns
    TensorId out = stack("decoder", p_.decoder, decoder_input_ids, encoded);
    if (c_.tie_embeddings) out = b_.mul_scalar("sequence_output.scale", out, std::pow(static_cast<double>(c_.d_model), -0.5));
    TensorId logits = b_.linear_with("lm_head", out, p_.lm_head);
    b_.release_holds(scope);
    return logits;
  }

  // The encoder alone (generate()'s _prepare_encoder_decoder_kwargs_for_generation).
  TensorId encode(const std::string& pre, TensorId input_ids) { return stack(pre + "encoder", p_.encoder, input_ids, kNone); }

  // The decoder on the one new token with an EncoderDecoderCache (see decoder_step), then the
  // lm_head on it: logits [B, 1, vocab].
  TensorId decode(const std::string& pre, TensorId ids, TensorId encoded, int64_t past, T5Cache& cache) {
    TensorId out = decoder_step(pre + "decoder", ids, encoded, past, cache);
    if (c_.tie_embeddings) out = b_.mul_scalar(pre + "sequence_output.scale", out, std::pow(static_cast<double>(c_.d_model), -0.5));
    return b_.linear_with(pre + "lm_head", out, p_.lm_head);
  }

 private:
  // T5Stack.forward of the decoder on one token [B, 1] after `past` cached tokens: the self
  // attention mask covers past + 1 keys (one query sees all of them), the cross mask the prompt.
  TensorId decoder_step(const std::string& s, TensorId ids, TensorId encoded, int64_t past, T5Cache& cache) {
    size_t scope = b_.open_scope();
    const int64_t batch = b_.shape(ids)[0], keys = past + 1, prompt = b_.shape(encoded)[1];
    TensorId embeds = b_.embedding_with(s + ".embed_tokens", ids, p_.shared);
    b_.hold(embeds);
    TensorId ones = b_.factory(s + ".attention_mask", {batch, keys}, DType::F32);
    TensorId mask = extended_mask(s + ".causal_mask", ones, false);
    b_.hold(mask);
    TensorId enc_ones = b_.factory(s + ".encoder_attention_mask", {batch, prompt}, DType::F32);
    TensorId cross_mask = extended_mask(s + ".invert_attention_mask", enc_ones, false);
    b_.hold(cross_mask);
    TensorId h = b_.dropout(s + ".dropout", embeds, dropout_);
    TensorId position_bias = kNone, cross_bias = kNone;
    for (size_t i = 0; i < p_.decoder.blocks.size(); ++i) {
      const BlockParams& bp = p_.decoder.blocks[i];
      const std::string m = s + ".block." + std::to_string(i) + ".layer.";
      size_t bs = b_.open_scope();
      b_.hold(h);
      TensorId a = cached_attention(m + "0.SelfAttention", bp.self_attn, norm(m + "0.layer_norm", h, bp.self_norm), kNone,
                                    mask, position_bias, cache.self_k[i], cache.self_v[i]);
      h = b_.add(m + "0.add", h, b_.dropout(m + "0.dropout", a, dropout_));
      b_.hold(h);
      TensorId x = cached_attention(m + "1.EncDecAttention", bp.cross_attn, norm(m + "1.layer_norm", h, bp.cross_norm),
                                    encoded, cross_mask, cross_bias, cache.cross_k[i], cache.cross_v[i]);
      h = b_.add(m + "1.add", h, b_.dropout(m + "1.dropout", x, dropout_));
      b_.hold(h);
      x = norm(m + "2.layer_norm", h, bp.ff_norm);
      x = feed_forward(m + "2.DenseReluDense", bp, x);
      h = b_.add(m + "2.add", h, b_.dropout(m + "2.dropout", x, dropout_));
      b_.release_holds(bs);
      if (i == 0) {
        b_.hold(position_bias);
        b_.hold(cross_bias);
      }
    }
    h = norm(s + ".final_layer_norm", h, p_.decoder.final_norm);
    h = b_.dropout(s + ".dropout_final", h, dropout_);
    b_.release_holds(scope);
    return h;
  }

  // T5Attention.forward with an EncoderDecoderCache (transformers v4.46): self attention
  // projects the new token and DynamicCache.update concatenates it onto the layer's keys and
  // values (torch.cat along the sequence: a new [B, heads, past + 1, d_kv] tensor each);
  // cross attention projects the encoder output once, at the first decode step, and reuses
  // the cached [B, heads, prompt, d_kv] afterwards (is_updated). The bias is the query's row
  // only: compute_bias at cache_position, [1, heads, 1, keys].
  TensorId cached_attention(const std::string& m, const AttentionParams& ap, TensorId x, TensorId encoded, TensorId mask,
                            TensorId& position_bias, TensorId& k_slot, TensorId& v_slot) {
    size_t scope = b_.open_scope();
    b_.hold(x);
    const int64_t batch = b_.shape(x)[0], seq = b_.shape(x)[1];
    auto shape = [&](const std::string& n, TensorId t, int64_t len) { return split_heads(n, t, batch, len); };
    TensorId q = shape(m + ".q", b_.linear_with(m + ".q", x, ap.q), seq);
    b_.hold(q);
    if (encoded == kNone) {
      TensorId k = shape(m + ".k", b_.linear_with(m + ".k", x, ap.k), seq);
      TensorId v = shape(m + ".v", b_.linear_with(m + ".v", x, ap.v), seq);
      if (k_slot != kNone) {
        k = b_.cat(m + ".key_cache.cat", {k_slot, k}, 2);
        v = b_.cat(m + ".value_cache.cat", {v_slot, v}, 2);
      }
      k_slot = k;
      v_slot = v;
      b_.mark_kv_cache(k);
      b_.mark_kv_cache(v);
    } else if (k_slot == kNone) {
      const int64_t prompt = b_.shape(encoded)[1];
      k_slot = shape(m + ".k", b_.linear_with(m + ".k", encoded, ap.k), prompt);
      v_slot = shape(m + ".v", b_.linear_with(m + ".v", encoded, ap.v), prompt);
      b_.mark_kv_cache(k_slot);
      b_.mark_kv_cache(v_slot);
    }
    const int64_t keys = b_.shape(k_slot)[2];
    TensorId out = attend(m, ap, q, k_slot, v_slot, mask, position_bias, batch, seq, keys);
    b_.release_holds(scope);
    return out;
  }

  // T5LayerNorm: variance in float32, hidden * rsqrt(variance + eps), weight * hidden.
  TensorId norm(const std::string& m, TensorId x, TensorId w) {
    size_t scope = b_.open_scope();
    b_.hold(x);
    TensorId h = x;
    if (b_.tensor(x).dtype != DType::F32) h = b_.cast(m + ".to_float32", h, DType::F32);
    TensorId var = b_.mean(m + ".mean", b_.pow_scalar(m + ".pow", h, 2.0), -1, true);
    b_.hold(var);
    TensorId r = b_.rsqrt(m + ".rsqrt", b_.add_scalar(m + ".add_eps", var, 1e-6));
    TensorId y = b_.mul(m + ".mul", x, r);
    if (b_.tensor(y).dtype != b_.tensor(w).dtype) y = b_.cast(m + ".to_weight_dtype", y, b_.tensor(w).dtype);
    TensorId out = b_.mul(m + ".mul_weight", w, y);
    b_.release_holds(scope);
    return out;
  }

  // T5Stack.forward over `ids`; `encoded` is the encoder output for the decoder (kNone: encoder).
  TensorId stack(const std::string& s, const StackParams& sp, TensorId ids, TensorId encoded) {
    size_t scope = b_.open_scope();
    const int64_t batch = b_.shape(ids)[0], seq = b_.shape(ids)[1];
    TensorId embeds = b_.embedding_with(s + ".embed_tokens", ids, p_.shared);
    b_.hold(embeds);
    // attention_mask = torch.ones(B, S); get_extended_attention_mask: [B, 1, 1, S] (the decoder's
    // causal one [B, 1, S, S]), (1.0 - mask) * finfo.min in the model dtype.
    TensorId ones = b_.factory(s + ".attention_mask", {batch, seq}, DType::F32);
    TensorId mask = extended_mask(s + ".get_extended_attention_mask", ones, encoded != kNone);
    b_.hold(mask);
    TensorId cross_mask = kNone;
    if (encoded != kNone) {
      TensorId enc_ones = b_.factory(s + ".encoder_attention_mask", {batch, b_.shape(encoded)[1]}, DType::F32);
      cross_mask = extended_mask(s + ".invert_attention_mask", enc_ones, false);
      b_.hold(cross_mask);
    }
    TensorId h = b_.dropout(s + ".dropout", embeds, dropout_);
    TensorId position_bias = kNone, cross_bias = kNone;
    for (size_t i = 0; i < sp.blocks.size(); ++i) {
      const BlockParams& bp = sp.blocks[i];
      const std::string m = s + ".block." + std::to_string(i) + ".layer.";
      size_t bs = b_.open_scope();
      b_.hold(h);
      // T5LayerSelfAttention: h + dropout(SelfAttention(layer_norm(h)))
      TensorId a = attention(m + "0.SelfAttention", bp.self_attn, norm(m + "0.layer_norm", h, bp.self_norm), kNone,
                             mask, position_bias);
      h = b_.add(m + "0.add", h, b_.dropout(m + "0.dropout", a, dropout_));
      int ff = 1;
      if (encoded != kNone) {
        b_.hold(h);
        TensorId x = attention(m + "1.EncDecAttention", bp.cross_attn, norm(m + "1.layer_norm", h, bp.cross_norm),
                               encoded, cross_mask, cross_bias);
        h = b_.add(m + "1.add", h, b_.dropout(m + "1.dropout", x, dropout_));
        ff = 2;
      }
      b_.hold(h);
      const std::string f = m + std::to_string(ff);
      TensorId x = norm(f + ".layer_norm", h, bp.ff_norm);
      x = feed_forward(f + ".DenseReluDense", bp, x);
      h = b_.add(f + ".add", h, b_.dropout(f + ".dropout", x, dropout_));
      b_.release_holds(bs);
      if (i == 0) {  // the first block's position biases are passed to every later block
        b_.hold(position_bias);
        if (cross_bias != kNone) b_.hold(cross_bias);
      }
    }
    h = norm(s + ".final_layer_norm", h, sp.final_norm);
    h = b_.dropout(s + ".dropout_final", h, dropout_);
    b_.release_holds(scope);
    return h;
  }

  TensorId extended_mask(const std::string& m, TensorId ones, bool causal) {
    size_t scope = b_.open_scope();
    const int64_t batch = b_.shape(ones)[0], seq = b_.shape(ones)[1];
    TensorId e;
    if (causal) {
      // create_extended_attention_mask_for_decoder: seq_ids = arange; causal = seq_ids[None, None, :]
      // .repeat(B, S, 1) <= seq_ids[None, :, None]; .to(mask dtype); causal[:, None, :, :] * mask[:, None, None, :]
      TensorId ids = b_.factory(m + ".arange", {seq}, DType::I64);
      b_.hold(ids);
      TensorId rep = b_.opaque(m + ".repeat", {ids}, {{{batch, seq, seq}, DType::I64}})[0];
      TensorId le = b_.compare(m + ".le", rep, b_.view(m + ".seq_ids.view", ids, {1, seq, 1}));
      TensorId cm = b_.cast(m + ".to", le, DType::F32);
      cm = b_.unsqueeze(m + ".unsqueeze", cm, 1);
      TensorId om = b_.unsqueeze(m + ".mask.unsqueeze", b_.unsqueeze(m + ".mask.unsqueeze", ones, 1), 1);
      e = b_.mul(m + ".mul", cm, om);
    } else {
      e = b_.unsqueeze(m + ".unsqueeze", b_.unsqueeze(m + ".unsqueeze", ones, 1), 1);
    }
    if (b_.activation_dtype() != DType::F32) e = b_.cast(m + ".to_dtype", e, b_.activation_dtype());
    TensorId inv = b_.rsub_scalar(m + ".rsub", e, 1.0);
    TensorId out = b_.mul_scalar(m + ".mul_min", inv, kFloat32Min);
    b_.release_holds(scope);
    return out;
  }

  // T5Attention.forward: q @ k^T (no scaling) + position_bias (+ mask), softmax in float32,
  // type_as, dropout, @ v, unshape, o. The first block computes the bias: compute_bias's bucket
  // arithmetic on [S, K] int64 tensors and the embedding lookup [S, K, heads], permuted to
  // [1, heads, S, K] (recorded as one op for the integer part); later blocks reuse it.
  TensorId attention(const std::string& m, const AttentionParams& ap, TensorId x, TensorId kv, TensorId mask,
                     TensorId& position_bias) {
    size_t scope = b_.open_scope();
    b_.hold(x);
    const int64_t batch = b_.shape(x)[0], seq = b_.shape(x)[1];
    TensorId src = kv == kNone ? x : kv;
    const int64_t keys = b_.shape(src)[1];
    auto shape = [&](const std::string& n, TensorId t, int64_t len) { return split_heads(n, t, batch, len); };
    TensorId q = shape(m + ".q", b_.linear_with(m + ".q", x, ap.q), seq);
    b_.hold(q);
    TensorId k = shape(m + ".k", b_.linear_with(m + ".k", src, ap.k), keys);
    b_.hold(k);
    TensorId v = shape(m + ".v", b_.linear_with(m + ".v", src, ap.v), keys);
    b_.hold(v);
    TensorId out = attend(m, ap, q, k, v, mask, position_bias, batch, seq, keys);
    b_.release_holds(scope);
    return out;
  }

  // T5Attention's shape(): [B, len, heads * d_kv] -> [B, heads, len, d_kv] (a view, transposed).
  TensorId split_heads(const std::string& n, TensorId t, int64_t batch, int64_t len) {
    return b_.transpose(n + ".transpose", b_.view(n + ".view", t, {batch, len, c_.heads, c_.d_kv}), 1, 2);
  }

  // The rest of T5Attention.forward once q, k and v [B, heads, len, d_kv] exist (one forward's
  // or the cache's): q @ k^T + position_bias (computed here by the first block), softmax in
  // float32, type_as, dropout, @ v, unshape, o.
  TensorId attend(const std::string& m, const AttentionParams& ap, TensorId q, TensorId k, TensorId v, TensorId mask,
                  TensorId& position_bias, int64_t batch, int64_t seq, int64_t keys) {
    TensorId scores = b_.matmul(m + ".matmul_scores", q, b_.transpose(m + ".k.transpose_scores", k, 3, 2));
    if (position_bias == kNone) {
      TensorId bias;
      if (ap.relative_bias != kNone) {
        TensorId buckets = b_.factory(m + ".compute_bias.relative_position_bucket", {seq, keys}, DType::I64);
        TensorId values = b_.embedding_with(m + ".relative_attention_bias", buckets, ap.relative_bias);
        bias = b_.unsqueeze(m + ".compute_bias.unsqueeze", b_.permute(m + ".compute_bias.permute", values, {2, 0, 1}), 0);
      } else {
        bias = b_.factory(m + ".position_bias.zeros", {1, c_.heads, seq, keys}, b_.activation_dtype());
      }
      position_bias = b_.add(m + ".position_bias.add_mask", bias, mask);
    }
    scores = b_.add_(m + ".scores.add_", scores, position_bias);
    TensorId w = b_.tensor(scores).dtype == DType::F32 ? scores : b_.cast(m + ".scores.float", scores, DType::F32);
    w = b_.softmax(m + ".softmax", w, -1);
    if (b_.tensor(scores).dtype != DType::F32) w = b_.cast(m + ".type_as", w, b_.tensor(scores).dtype);
    w = b_.dropout(m + ".dropout", w, dropout_);
    b_.hold(w);
    TensorId out = b_.matmul(m + ".matmul_context", w, v);
    out = b_.contiguous(m + ".unshape.contiguous", b_.transpose(m + ".unshape.transpose", out, 1, 2));
    out = b_.view(m + ".unshape.view", out, {batch, seq, c_.heads * c_.d_kv});
    out = b_.linear_with(m + ".o", out, ap.o);
    return out;
  }

  // T5DenseActDense: wo(dropout(relu(wi(x)))); T5DenseGatedActDense:
  // wo(dropout(gelu_new(wi_0(x)) * wi_1(x))).
  TensorId feed_forward(const std::string& m, const BlockParams& bp, TensorId x) {
    size_t scope = b_.open_scope();
    b_.hold(x);
    TensorId h;
    if (c_.gated) {
      TensorId g = b_.gelu(m + ".act", b_.linear_with(m + ".wi_0", x, bp.wi_0), /*approximate_tanh=*/true);
      h = b_.mul(m + ".mul", g, b_.linear_with(m + ".wi_1", x, bp.wi_1));
    } else {
      h = b_.relu(m + ".act", b_.linear_with(m + ".wi", x, bp.wi_0), false);
    }
    h = b_.dropout(m + ".dropout", h, dropout_);
    TensorId out = b_.linear_with(m + ".wo", h, bp.wo);
    b_.release_holds(scope);
    return out;
  }

  GraphBuilder& b_;
  const T5Config& c_;
  const T5Params& p_;
  double dropout_;
};

// A Python name rebound in a later iteration: its old tensor goes once op `until` has made the
// new value. Carried-in tensors are graph inputs the caller releases.
void drop_after(GraphBuilder& b, TensorId t, OpId until) {
  if (t == kNone) return;
  if (b.tensor(t).role == TensorRole::Input) b.release_input_after(t, until);
  else b.keep_until(t, until);
}

// Forwards first..last of generate()'s greedy loop (GenerationMixin._sample, transformers
// v4.46) for T5ForConditionalGeneration. Before the loop, generate() makes the attention mask
// (torch.ones [B, P] int64), runs the encoder once (encoder_outputs, kept to the end) and makes
// decoder_input_ids = ones [B, 1] * decoder_start_token_id. Forward f feeds the last decoder
// token (decoder_input_ids[:, -1:]) after f cached ones; forward 0 ("prefill") includes the
// encoder and fills the cross-attention cache. After each forward: next_token_logits =
// logits[:, -1, :].clone().float(), argmax, torch.cat onto decoder_input_ids.
class T5Generation {
 public:
  T5Generation(GraphBuilder& b, const T5Config& c, const GenerationWindow& w, DType dtype, int64_t batch)
      : b_(b), c_(c), w_(w), dtype_(dtype), batch_(batch) {}

  void run(T5Forward& fw) {
    const size_t layers = static_cast<size_t>(c_.decoder_layers);
    for (auto* v : {&cache_.self_k, &cache_.self_v, &cache_.cross_k, &cache_.cross_v}) v->assign(layers, kNone);
    TensorId prompt = b_.input("input_ids", {batch_, w_.prompt}, DType::I64);  // the caller keeps it
    if (w_.first == 0) {
      mask_ = b_.factory("prefill.attention_mask", {batch_, w_.prompt}, DType::I64);
      encoded_ = fw.encode("prefill.", prompt);
      ids_ = b_.factory("prefill.decoder_input_ids", {batch_, 1}, DType::I64);
    } else {
      carry_in();
    }
    for (int64_t f = w_.first; f <= w_.last; ++f) iteration(fw, f);
    // What is alive when the window ends: the caches, the encoder output, the ids and locals.
    for (const auto* v : {&cache_.self_k, &cache_.self_v, &cache_.cross_k, &cache_.cross_v}) {
      for (TensorId t : *v) b_.mark_output(t);
    }
    for (TensorId t : {mask_, encoded_, ids_, previous_ids_, logits_, next_tokens_}) {
      if (t != kNone) b_.mark_output(t);
    }
  }

 private:
  // A window after the first forward takes what the loop carries as inputs.
  void carry_in() {
    mask_ = b_.input("attention_mask", {batch_, w_.prompt}, DType::I64);
    encoded_ = b_.input("encoder_outputs.last_hidden_state", {batch_, w_.prompt, c_.d_model}, dtype_);
    for (size_t i = 0; i < cache_.self_k.size(); ++i) {
      const std::string m = "past_key_values." + std::to_string(i);
      // A projection's cached keys/values are its output viewed [B, len, heads, d_kv] and
      // transposed (not contiguous: attention's matmul copies them); a cat's are contiguous.
      // The cross-attention cache is always a projection, the self-attention one after the
      // first decode step a cat.
      auto in = [&](const std::string& n, int64_t len, bool projected) {
        TensorId t = projected ? b_.transpose(m + n + ".transpose", b_.input(m + n, {batch_, len, c_.heads, c_.d_kv}, dtype_), 1, 2)
                               : b_.input(m + n, {batch_, c_.heads, len, c_.d_kv}, dtype_);
        b_.mark_kv_cache(t);
        return t;
      };
      cache_.self_k[i] = in(".self_attention.key", w_.first, w_.first == 1);
      cache_.self_v[i] = in(".self_attention.value", w_.first, w_.first == 1);
      cache_.cross_k[i] = in(".cross_attention.key", w_.prompt, true);
      cache_.cross_v[i] = in(".cross_attention.value", w_.prompt, true);
    }
    ids_ = b_.input("decoder_input_ids", {batch_, w_.first + 1}, DType::I64);
    // The ids before the last torch.cat, still viewed by the previous forward's model input.
    previous_ids_ = b_.input("previous_decoder_input_ids", {batch_, w_.first}, DType::I64);
    logits_ = b_.input("next_token_logits", {batch_, c_.vocab}, DType::F32);
    next_tokens_ = b_.input("next_tokens", {batch_}, DType::I64);
  }

  void iteration(T5Forward& fw, int64_t f) {
    const std::string pre = f == 0 ? "prefill." : "decode" + std::to_string(f) + ".";
    TensorId ids = ids_;
    if (f > 0) {  // prepare_inputs_for_generation: decoder_input_ids[:, -1:] (a view)
      const int64_t len = b_.shape(ids_)[1];
      ids = b_.slice(pre + "decoder_input_ids.slice", b_.slice(pre + "decoder_input_ids.slice", ids_, 0, 0, batch_), 1, len - 1, len);
      drop_after(b_, previous_ids_, b_.last_op());
    }
    std::vector<TensorId> old_k = cache_.self_k, old_v = cache_.self_v;
    TensorId logits = fw.decode(pre, ids, encoded_, f, cache_);
    for (size_t i = 0; f > 0 && i < old_k.size(); ++i) {  // the cat replaced the slot's tensor
      drop_after(b_, old_k[i], b_.tensor(cache_.self_k[i]).producer);
      drop_after(b_, old_v[i], b_.tensor(cache_.self_v[i]).producer);
    }
    TensorId row = b_.slice(pre + "logits.slice", logits, 0, 0, batch_);
    row = b_.select(pre + "logits.select", row, 1, 0);
    row = b_.slice(pre + "logits.slice", row, 1, 0, c_.vocab);
    TensorId next_logits = b_.opaque(pre + "logits.clone", {row}, {{{batch_, c_.vocab}, b_.tensor(logits).dtype}})[0];
    if (b_.tensor(next_logits).dtype != DType::F32) next_logits = b_.cast(pre + "logits.float", next_logits, DType::F32);
    drop_after(b_, logits_, b_.last_op());
    logits_ = next_logits;
    TensorId next_tokens = b_.opaque(pre + "argmax", {next_logits}, {{{batch_}, DType::I64}})[0];
    drop_after(b_, next_tokens_, b_.last_op());
    next_tokens_ = next_tokens;
    TensorId col = b_.unsqueeze(pre + "next_tokens.unsqueeze", next_tokens, 1);
    TensorId longer = b_.cat(pre + "decoder_input_ids.cat", {ids_, col}, -1);
    b_.keep_until(logits, b_.last_op());  // `del outputs`
    previous_ids_ = ids_;
    ids_ = longer;
  }

  GraphBuilder& b_;
  const T5Config& c_;
  const GenerationWindow& w_;
  DType dtype_;
  int64_t batch_;
  T5Cache cache_;
  TensorId mask_ = kNone, encoded_ = kNone, ids_ = kNone, previous_ids_ = kNone, logits_ = kNone, next_tokens_ = kNone;
};

Graph build_t5_generation(const T5Config& c, const T5Params& p, GraphBuilder& b, const BuildConfig& cfg) {
  T5Forward fw(b, c, p, c.dropout * cfg.dropout_scale);
  T5Generation(b, c, *cfg.generation, cfg.dtype, cfg.batch).run(fw);
  return b.finish();
}

}  // namespace

Graph build_hf_t5(const T5Config& c, const std::string& model, const BuildConfig& cfg) {
  if (cfg.generation) {
    const GenerationWindow& w = *cfg.generation;
    if (w.prompt <= 0 || w.new_tokens <= 0 || w.first < 0 || w.last < w.first || w.last >= w.new_tokens) {
      throw InputError(model + ": invalid generation window");
    }
    if (w.beams != 1) throw InputError("--beams applies to the decoder-only families, not t5 (greedy generation only)");
    if (w.static_cache) throw InputError("--cache static applies to the decoder-only families, not t5");
  }
  if (cfg.attention != AttentionKind::Default) throw InputError("--attention applies to the decoder-only families, not t5");
  if (cfg.lora) throw InputError("--lora applies to the decoder-only families, not t5");
  if (cfg.weights != WeightFormat::Default) throw InputError("--weights applies to the decoder-only families, not t5");
  const int64_t seq = cfg.generation ? cfg.generation->prompt : sequence_length(cfg, 128, INT64_MAX, model, "");
  GraphBuilder b(model, cfg.dtype);
  b.set_dim("batch", cfg.batch);
  b.set_dim("seq", seq);
  T5Params p;
  p.shared = b.parameter("shared.weight", {c.vocab, c.d_model});
  p.encoder = stack_params(b, c, "encoder", c.layers, false);
  p.decoder = stack_params(b, c, "decoder", c.decoder_layers, true);
  p.lm_head = c.tie_embeddings ? b.tied_parameter("lm_head.weight", p.shared) : b.parameter("lm_head.weight", {c.vocab, c.d_model});
  if (cfg.generation) return build_t5_generation(c, p, b, cfg);
  TensorId input_ids = b.input("input_ids", {cfg.batch, seq}, DType::I64);
  TensorId decoder_ids = b.input("decoder_input_ids", {cfg.batch, seq}, DType::I64);
  T5Forward fw(b, c, p, c.dropout * cfg.dropout_scale);
  TensorId logits = fw.run(input_ids, decoder_ids);
  b.mark_output(logits);
  if (!cfg.inference) {
    b.begin_loss();
    // CrossEntropyLoss(ignore_index=-100)(lm_logits.view(-1, V), labels.view(-1))
    BuildConfig ce = cfg;
    ce.loss = cfg.loss == LossKind::Default ? LossKind::CrossEntropy : cfg.loss;
    b.set_loss(add_loss(b, logits, LossKind::CrossEntropy, ce));
  }
  return b.finish();
}

}  // namespace headroom
