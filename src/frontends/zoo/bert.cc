// Hugging Face BertForSequenceClassification (transformers 4.30 modeling_bert.py, eager attention,
// absolute positions) as validation/models.py re-implements it: bert-base and bert-large with a
// 2-label classifier, input_ids [B, S] int64 (S = --seq, 128 by default, at most max_pos = 512),
// loss CrossEntropyLoss(logits.view(-1, num_labels), labels.view(-1)).
//
// Spec keys (models.py's): hidden, layers, heads, ffn, vocab, max_pos, type_vocab, num_labels,
// dropout (embeddings, hidden outputs, classifier), attn_dropout (attention probabilities),
// mask=hf|none (hf: BertModel builds the all-ones attention mask and adds it to every layer's
// scores, as HF does when no attention_mask is passed; none: no mask at all).
//
// Python locals that outlive their last use are held until their function returns (b.hold), e.g.
// BertSelfAttention keeps mixed_query_layer, key/value layers, the masked scores and the attention
// probabilities until it returns.
#include <cmath>

#include "frontends/zoo/losses.h"
#include "frontends/zoo/registry.h"
#include "frontends/zoo/transformer_common.h"
#include "util/error.h"

namespace headroom {
namespace {

struct BertConfig {
  int64_t hidden, layers, heads, ffn, vocab, max_pos, type_vocab;
  int64_t num_labels = 2;
  double dropout = 0.1, attn_dropout = 0.1;
  bool hf_mask = true;
};

struct BertLayerParams {
  LinearParams query, key, value, attn_out;
  NormParams attn_norm;
  LinearParams intermediate, out;
  NormParams out_norm;
};

struct BertParams {
  TensorId word = kNone, position = kNone, token_type = kNone;
  NormParams emb_norm;
  TensorId position_ids = kNone, token_type_ids = kNone;  // persistent=False buffers [1, max_pos]
  std::vector<BertLayerParams> layers;
  LinearParams pooler, classifier;
};

// BertForSequenceClassification.__init__: parameters and buffers in registration order.
BertParams declare(GraphBuilder& b, const BertConfig& c) {
  BertParams p;
  const int64_t h = c.hidden;
  p.word = b.parameter("bert.embeddings.word_embeddings.weight", {c.vocab, h});
  p.position = b.parameter("bert.embeddings.position_embeddings.weight", {c.max_pos, h});
  p.token_type = b.parameter("bert.embeddings.token_type_embeddings.weight", {c.type_vocab, h});
  p.emb_norm = layer_norm_params(b, "bert.embeddings.LayerNorm", h);
  p.position_ids = b.buffer("bert.embeddings.position_ids", {1, c.max_pos}, DType::I64);
  p.token_type_ids = b.buffer("bert.embeddings.token_type_ids", {1, c.max_pos}, DType::I64);
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string l = "bert.encoder.layer." + std::to_string(i);
    BertLayerParams lp;
    lp.query = linear_params(b, l + ".attention.self.query", h, h);
    lp.key = linear_params(b, l + ".attention.self.key", h, h);
    lp.value = linear_params(b, l + ".attention.self.value", h, h);
    lp.attn_out = linear_params(b, l + ".attention.output.dense", h, h);
    lp.attn_norm = layer_norm_params(b, l + ".attention.output.LayerNorm", h);
    lp.intermediate = linear_params(b, l + ".intermediate.dense", h, c.ffn);
    lp.out = linear_params(b, l + ".output.dense", c.ffn, h);
    lp.out_norm = layer_norm_params(b, l + ".output.LayerNorm", h);
    p.layers.push_back(lp);
  }
  p.pooler = linear_params(b, "bert.pooler.dense", h, h);
  p.classifier = linear_params(b, "classifier", h, c.num_labels);
  return p;
}

class BertForward {
 public:
  BertForward(GraphBuilder& b, const BertConfig& c, const BertParams& p, double dropout_scale)
      : b_(b), c_(c), p_(p), scale_(dropout_scale) {}

  // BertForSequenceClassification.forward: logits [B, num_labels].
  TensorId run(TensorId input_ids) {
    size_t scope = b_.open_scope();
    auto [sequence_output, pooled] = bert_model(input_ids);
    b_.hold(sequence_output);  // the `outputs` tuple keeps both until forward returns
    b_.hold(pooled);
    pooled = b_.dropout("dropout", pooled, c_.dropout * scale_);
    TensorId logits = apply_linear(b_, "classifier", pooled, p_.classifier);
    b_.release_holds(scope);
    return logits;
  }

 private:
  std::pair<TensorId, TensorId> bert_model(TensorId input_ids) {
    size_t scope = b_.open_scope();
    const int64_t batch = b_.shape(input_ids)[0], seq = b_.shape(input_ids)[1];
    TensorId mask = kNone;
    if (c_.hf_mask) {
      // attention_mask = torch.ones((B, S)); get_extended_attention_mask: [:, None, None, :],
      // .to(self.dtype), (1.0 - mask) * finfo.min.
      TensorId ones = b_.factory("bert.attention_mask", {batch, seq}, DType::F32);
      b_.hold(ones);
      TensorId ext = b_.slice("bert.extended_attention_mask.slice", ones, 0, 0, batch);
      ext = b_.unsqueeze("bert.extended_attention_mask.unsqueeze", ext, 1);
      ext = b_.unsqueeze("bert.extended_attention_mask.unsqueeze", ext, 2);
      ext = b_.slice("bert.extended_attention_mask.slice", ext, 3, 0, seq);
      if (b_.activation_dtype() != DType::F32) {
        ext = b_.cast("bert.extended_attention_mask.to", ext, b_.activation_dtype());
      }
      ext = b_.rsub_scalar("bert.extended_attention_mask.rsub", ext, 1.0);
      mask = b_.mul_scalar("bert.extended_attention_mask.mul", ext, -3.4028234663852886e38);
      b_.hold(mask);
    }
    TensorId token_type_ids = b_.slice("bert.buffered_token_type_ids", p_.token_type_ids, 0, 0, 1);
    token_type_ids = b_.slice("bert.buffered_token_type_ids", token_type_ids, 1, 0, seq);
    token_type_ids = b_.expand("bert.token_type_ids", token_type_ids, {batch, seq});
    TensorId hidden = embeddings(input_ids, token_type_ids);
    for (int64_t i = 0; i < c_.layers; ++i) {
      hidden = layer("bert.encoder.layer." + std::to_string(i), p_.layers[static_cast<size_t>(i)], hidden, mask);
    }
    TensorId pooled = pooler(hidden);
    b_.release_holds(scope);
    return {hidden, pooled};
  }

  TensorId embeddings(TensorId input_ids, TensorId token_type_ids) {
    const std::string m = "bert.embeddings";
    size_t scope = b_.open_scope();
    const int64_t seq = b_.shape(input_ids)[1];
    TensorId position_ids = b_.slice(m + ".position_ids", p_.position_ids, 0, 0, 1);
    position_ids = b_.slice(m + ".position_ids", position_ids, 1, 0, seq);
    TensorId inputs_embeds = b_.embedding_with(m + ".word_embeddings", input_ids, p_.word);
    b_.hold(inputs_embeds);
    TensorId token_type_embeddings = b_.embedding_with(m + ".token_type_embeddings", token_type_ids, p_.token_type);
    b_.hold(token_type_embeddings);
    TensorId emb = b_.add(m + ".add", inputs_embeds, token_type_embeddings);
    TensorId position_embeddings = b_.embedding_with(m + ".position_embeddings", position_ids, p_.position);
    b_.hold(position_embeddings);
    emb = b_.add_(m + ".add_", emb, position_embeddings);  // embeddings += position_embeddings
    emb = apply_layer_norm(b_, m + ".LayerNorm", emb, p_.emb_norm);
    emb = b_.dropout(m + ".dropout", emb, c_.dropout * scale_);
    b_.release_holds(scope);
    return emb;
  }

  TensorId transpose_for_scores(const std::string& name, TensorId x) {
    const auto s = b_.shape(x);
    x = b_.view(name + ".view", x, {s[0], s[1], c_.heads, c_.hidden / c_.heads});
    return b_.permute(name + ".permute", x, {0, 2, 1, 3});
  }

  TensorId self_attention(const std::string& m, const BertLayerParams& lp, TensorId hidden, TensorId mask) {
    size_t scope = b_.open_scope();
    const auto s = b_.shape(hidden);
    TensorId mixed_query = apply_linear(b_, m + ".query", hidden, lp.query);
    b_.hold(mixed_query);
    TensorId key = transpose_for_scores(m + ".key", apply_linear(b_, m + ".key", hidden, lp.key));
    b_.hold(key);
    TensorId value = transpose_for_scores(m + ".value", apply_linear(b_, m + ".value", hidden, lp.value));
    b_.hold(value);
    TensorId query = transpose_for_scores(m + ".query", mixed_query);
    TensorId scores = b_.matmul(m + ".matmul_scores", query, b_.transpose(m + ".key.transpose", key, -1, -2));
    scores = b_.div_scalar(m + ".div", scores, std::sqrt(static_cast<double>(c_.hidden / c_.heads)));
    if (mask != kNone) scores = b_.add(m + ".add_mask", scores, mask);
    b_.hold(scores);
    TensorId probs = b_.softmax(m + ".softmax", scores, -1);
    probs = b_.dropout(m + ".dropout", probs, c_.attn_dropout * scale_);
    b_.hold(probs);
    TensorId context = b_.matmul(m + ".matmul_context", probs, value);
    context = b_.permute(m + ".context.permute", context, {0, 2, 1, 3});
    context = b_.contiguous(m + ".context.contiguous", context);
    context = b_.view(m + ".context.view", context, {s[0], s[1], c_.hidden});
    b_.release_holds(scope);
    return context;
  }

  // BertSelfOutput / BertOutput: dense, dropout, LayerNorm(hidden + input_tensor).
  TensorId output_block(const std::string& m, const LinearParams& dense, const NormParams& norm, TensorId hidden,
                        TensorId input_tensor) {
    hidden = apply_linear(b_, m + ".dense", hidden, dense);
    hidden = b_.dropout(m + ".dropout", hidden, c_.dropout * scale_);
    hidden = b_.add(m + ".add", hidden, input_tensor);
    return apply_layer_norm(b_, m + ".LayerNorm", hidden, norm);
  }

  TensorId layer(const std::string& m, const BertLayerParams& lp, TensorId hidden, TensorId mask) {
    size_t scope = b_.open_scope();
    b_.hold(hidden);  // the caller's hidden_states until the layer returns
    // BertAttention: self_outputs stays referenced until BertSelfOutput returns.
    size_t attn_scope = b_.open_scope();
    TensorId self_outputs = self_attention(m + ".attention.self", lp, hidden, mask);
    b_.hold(self_outputs);
    TensorId attention_output =
        output_block(m + ".attention.output", lp.attn_out, lp.attn_norm, self_outputs, hidden);
    b_.release_holds(attn_scope);
    b_.hold(attention_output);
    TensorId intermediate = apply_linear(b_, m + ".intermediate.dense", attention_output, lp.intermediate);
    intermediate = b_.gelu(m + ".intermediate.gelu", intermediate);  // GELUActivation: exact erf GELU
    b_.hold(intermediate);
    TensorId out = output_block(m + ".output", lp.out, lp.out_norm, intermediate, attention_output);
    b_.release_holds(scope);
    return out;
  }

  TensorId pooler(TensorId hidden) {
    size_t scope = b_.open_scope();
    // hidden_states[:, 0]: a full-range slice, then select (both backwards allocate [B, S, H]).
    TensorId first = b_.slice("bert.pooler.first_token.slice", hidden, 0, 0, b_.shape(hidden)[0]);
    first = b_.select("bert.pooler.first_token", first, 1, 0);
    b_.hold(first);
    TensorId pooled = apply_linear(b_, "bert.pooler.dense", first, p_.pooler);
    pooled = b_.tanh("bert.pooler.activation", pooled);
    b_.release_holds(scope);
    return pooled;
  }

  GraphBuilder& b_;
  const BertConfig& c_;
  const BertParams& p_;
  double scale_;
};

Graph build_bert(const BertConfig& preset, const ModelSpec& spec, const BuildConfig& cfg) {
  SpecReader r(spec);
  BertConfig c = preset;
  c.hidden = r.get_int("hidden", c.hidden);
  c.layers = r.get_int("layers", c.layers);
  c.heads = r.get_int("heads", c.heads);
  c.ffn = r.get_int("ffn", c.ffn);
  c.vocab = r.get_int("vocab", c.vocab);
  c.max_pos = r.get_int("max_pos", c.max_pos);
  c.type_vocab = r.get_int("type_vocab", c.type_vocab);
  c.num_labels = r.get_int("num_labels", c.num_labels);
  c.dropout = get_double(r, spec.name, "dropout", c.dropout, 0.0, 1.0);
  c.attn_dropout = get_double(r, spec.name, "attn_dropout", c.attn_dropout, 0.0, 1.0);
  std::string mask = r.get_string("mask", "hf");
  if (mask != "hf" && mask != "none") throw InputError("model '" + spec.name + "': mask=" + mask + " (hf or none)");
  c.hf_mask = mask == "hf";
  r.reject_unused();
  head_dim(spec.name, c.hidden, c.heads);
  const int64_t seq = sequence_length(cfg, 128, c.max_pos, spec.name, "max_pos");

  GraphBuilder b(spec.name, cfg.dtype);
  b.set_dim("batch", cfg.batch);
  b.set_dim("seq", seq);
  BertParams p = declare(b, c);
  TensorId input_ids = b.input("input_ids", {cfg.batch, seq}, DType::I64);
  TensorId logits = BertForward(b, c, p, cfg.dropout_scale).run(input_ids);
  b.mark_output(logits);
  b.begin_loss();
  if (cfg.loss == LossKind::Default || cfg.loss == LossKind::CrossEntropy) {
    // HF single_label_classification: CrossEntropyLoss()(logits.view(-1, num_labels), labels.view(-1)).
    TensorId labels = b.target("loss.target", {cfg.batch}, DType::I64);
    TensorId flat = b.view("loss.logits_view", logits, {-1, c.num_labels});
    TensorId flat_labels = b.view("loss.labels_view", labels, {-1});
    b.set_loss(b.cross_entropy("loss", flat, flat_labels));
  } else {
    b.set_loss(add_loss(b, logits, LossKind::CrossEntropy, cfg));
  }
  return b.finish();
}

}  // namespace

void register_bert(std::vector<ZooEntry>& out) {
  BertConfig base{768, 12, 12, 3072, 30522, 512, 2};
  BertConfig large{1024, 24, 16, 4096, 30522, 512, 2};
  for (const auto& [name, c] : {std::pair<const char*, BertConfig>{"bert-base", base}, {"bert-large", large}}) {
    BertConfig copy = c;
    out.push_back({name,
                   std::string("Hugging Face BertForSequenceClassification, ") + name +
                       "-uncased sizes, 2 labels (seq 128 by default, at most 512)",
                   "transformer", true,
                   [copy](const ModelSpec& s, const BuildConfig& cfg) { return build_bert(copy, s, cfg); }});
  }
}

}  // namespace headroom
