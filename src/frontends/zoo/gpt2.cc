// Hugging Face GPT2LMHeadModel (transformers 4.30 modeling_gpt2.py, eager attention) as
// validation/models.py re-implements it: gpt2, gpt2-medium, gpt2-large, gpt2-xl. lm_head is tied
// to transformer.wte. Input input_ids [B, S] int64; S = --seq, 128 by default (not the 1024 of
// n_positions, to keep estimates quick), at most n_positions. Loss: next-token cross-entropy.
//
// Spec keys (models.py's): hidden, layers, heads, vocab, n_positions, embd_pdrop, attn_pdrop,
// resid_pdrop.
//
// Call by call as the reference runs:
//  - Conv1D is x.view(-1, in), torch.addmm(bias, x, weight) with weight [in, out], .view(out shape);
//  - c_attn's output is split into three views of the last dimension (one autograd node whose
//    backward writes one [B, S, 3H] gradient), each viewed to heads and permuted; matmuls on
//    them copy (non-contiguous operands);
//  - scores / torch.full([], sqrt(head_dim)), torch.where on the registered causal `bias` buffer
//    sliced to [1, 1, S, S] with a torch.full([], finfo.min) mask value, softmax, dropout;
//  - gelu_new (NewGELUActivation) written out: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))).
// Locals that outlive their last use are held: GPT2Model's inputs_embeds and position_embeds for
// the whole forward, GPT2Attention's query/key/value (and so c_attn's output) and attn_weights
// until the attention returns, GPT2Block's attn_output until the block returns.
#include <cmath>

#include "frontends/zoo/losses.h"
#include "frontends/zoo/megatron_split.h"
#include "frontends/zoo/registry.h"
#include "frontends/zoo/sequence_parallel.h"
#include "frontends/zoo/transformer_common.h"
#include "util/error.h"

namespace headroom {
namespace {

struct Gpt2Config {
  int64_t hidden, layers, heads;
  int64_t vocab = 50257, n_positions = 1024;
  double embd_pdrop = 0.1, attn_pdrop = 0.1, resid_pdrop = 0.1;
  int64_t tp = 1;  // Megatron tensor-parallel ranks; the graph is one rank's
};

// Conv1D(nf, nx): weight [nx, nf], bias [nf].
struct Conv1dParams {
  TensorId weight = kNone;
  TensorId bias = kNone;
};

Conv1dParams conv1d_params(GraphBuilder& b, const std::string& module, int64_t nx, int64_t nf) {
  return {b.parameter(module + ".weight", {nx, nf}), b.parameter(module + ".bias", {nf})};
}

struct Gpt2BlockParams {
  NormParams ln_1;
  TensorId causal_bias = kNone, masked_bias = kNone;  // persistent=False buffers
  Conv1dParams c_attn, attn_proj;
  NormParams ln_2;
  Conv1dParams c_fc, mlp_proj;
};

struct Gpt2Params {
  TensorId wte = kNone, wpe = kNone;
  std::vector<Gpt2BlockParams> blocks;
  NormParams ln_f;
  TensorId lm_head = kNone;  // tied to wte
};

// GPT2LMHeadModel.__init__: parameters and buffers in registration order.
Gpt2Params declare(GraphBuilder& b, const Gpt2Config& c) {
  Gpt2Params p;
  const int64_t h = c.hidden, t = c.tp;
  // VocabParallelEmbedding: rows vocab/t of the vocabulary padded to a multiple of
  // make_vocab_size_divisible_by (128) * t (Megatron's _vocab_size_with_padding); unsplit
  // without tensor parallelism (Hugging Face's GPT-2).
  p.wte = b.parameter("transformer.wte.weight", {megatron_vocab_rows(c.vocab, t), h});
  p.wpe = b.parameter("transformer.wpe.weight", {c.n_positions, h});
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string m = "transformer.h." + std::to_string(i);
    Gpt2BlockParams bp;
    bp.ln_1 = layer_norm_params(b, m + ".ln_1", h);
    bp.causal_bias = b.buffer(m + ".attn.bias", {1, 1, c.n_positions, c.n_positions}, DType::Bool);
    bp.masked_bias = b.buffer(m + ".attn.masked_bias", {}, b.activation_dtype());
    // ColumnParallelLinear splits the outputs (and bias) of c_attn and c_fc; RowParallelLinear
    // splits the inputs of the projections and keeps their bias whole (added after the
    // all-reduce, which runs in place on the output).
    bp.c_attn = conv1d_params(b, m + ".attn.c_attn", h, 3 * h / t);
    bp.attn_proj = conv1d_params(b, m + ".attn.c_proj", h / t, h);
    bp.ln_2 = layer_norm_params(b, m + ".ln_2", h);
    bp.c_fc = conv1d_params(b, m + ".mlp.c_fc", h, 4 * h / t);
    bp.mlp_proj = conv1d_params(b, m + ".mlp.c_proj", 4 * h / t, h);
    p.blocks.push_back(bp);
  }
  p.ln_f = layer_norm_params(b, "transformer.ln_f", h);
  // lm_head = nn.Linear(hidden, vocab, bias=False), then tie_weights(): the same storage as wte.
  p.lm_head = b.tied_parameter("lm_head.weight", p.wte);
  return p;
}

class Gpt2Forward {
 public:
  Gpt2Forward(GraphBuilder& b, const Gpt2Config& c, const Gpt2Params& p, double dropout_scale, SequenceParallel sp)
      : b_(b), c_(c), p_(p), scale_(dropout_scale), sp_(sp) {}

  // GPT2LMHeadModel.forward: lm_logits [B, S, vocab].
  TensorId run(TensorId input_ids) {
    TensorId hidden = transformer(input_ids);
    return b_.linear_with("lm_head", sp_.gather_for_linear(b_, "lm_head.all_gather", hidden), p_.lm_head);
  }

 private:
  TensorId transformer(TensorId input_ids) {
    size_t scope = b_.open_scope();
    const int64_t seq = b_.shape(input_ids)[1];
    input_ids = b_.view("transformer.input_ids.view", input_ids, {-1, seq});
    TensorId position_ids = b_.factory("transformer.position_ids", {seq}, DType::I64);  // torch.arange
    position_ids = b_.unsqueeze("transformer.position_ids.unsqueeze", position_ids, 0);
    position_ids = b_.view("transformer.position_ids.view", position_ids, {-1, seq});
    b_.hold(position_ids);
    TensorId inputs_embeds = b_.embedding_with("transformer.wte", input_ids, p_.wte);
    b_.hold(inputs_embeds);
    TensorId position_embeds = b_.embedding_with("transformer.wpe", position_ids, p_.wpe);
    b_.hold(position_embeds);
    TensorId hidden = b_.add("transformer.add", inputs_embeds, position_embeds);
    hidden = sp_.scatter(b_, "transformer.scatter_to_sequence_parallel_region", hidden);
    hidden = b_.dropout("transformer.drop", hidden, c_.embd_pdrop * scale_);
    for (int64_t i = 0; i < c_.layers; ++i) {
      hidden = block("transformer.h." + std::to_string(i), p_.blocks[static_cast<size_t>(i)], hidden);
    }
    hidden = apply_layer_norm(b_, "transformer.ln_f", hidden, p_.ln_f);
    hidden = b_.view("transformer.output.view", hidden, {-1, b_.shape(hidden)[1], c_.hidden});
    b_.release_holds(scope);
    return hidden;
  }

  TensorId block(const std::string& m, const Gpt2BlockParams& bp, TensorId hidden) {
    size_t scope = b_.open_scope();
    b_.hold(hidden);  // residual, and the caller's hidden_states until the block returns
    TensorId residual = hidden;
    hidden = apply_layer_norm(b_, m + ".ln_1", hidden, bp.ln_1);
    size_t ln_scope = b_.open_scope();
    b_.hold(hidden);  // hidden_states keeps ln_1's output until it is rebound after the attention
    TensorId attn_output = attention(m + ".attn", bp, hidden);
    hidden = b_.add(m + ".add_attn", attn_output, residual);
    b_.release_holds(ln_scope);
    b_.hold(attn_output);
    residual = hidden;
    hidden = apply_layer_norm(b_, m + ".ln_2", hidden, bp.ln_2);
    b_.hold(hidden);
    TensorId ff = mlp(m + ".mlp", bp, hidden);
    hidden = b_.add(m + ".add_mlp", residual, ff);
    b_.release_holds(scope);
    return hidden;
  }

  // Conv1D.forward: addmm(bias, x.view(-1, nx), weight).view(size_out).
  TensorId conv1d(const std::string& m, TensorId x, const Conv1dParams& cp) {
    std::vector<int64_t> size_out = b_.shape(x);
    size_out.back() = b_.shape(cp.weight)[1];
    TensorId flat = b_.view(m + ".view_in", x, {-1, b_.shape(x).back()});
    TensorId y = b_.addmm(m, cp.bias, flat, cp.weight);
    return b_.view(m + ".view_out", y, size_out);
  }

  TensorId split_heads(const std::string& name, TensorId x) {
    x = b_.unflatten(name + ".view", x, -1, {c_.heads / c_.tp, c_.hidden / c_.heads});
    return b_.permute(name + ".permute", x, {0, 2, 1, 3});
  }

  TensorId attention(const std::string& m, const Gpt2BlockParams& bp, TensorId hidden) {
    size_t scope = b_.open_scope();
    b_.hold(hidden);
    const int64_t h = c_.hidden / c_.tp;  // this rank's heads
    TensorId qkv = conv1d(m + ".c_attn", sp_.gather_for_linear(b_, m + ".c_attn.all_gather", hidden), bp.c_attn);
    // .split(split_size, dim=2)
    std::vector<TensorId> parts = b_.split(m + ".split", qkv, h, 2);
    TensorId query = parts[0], key = parts[1], value = parts[2];
    query = split_heads(m + ".query", query);
    key = split_heads(m + ".key", key);
    value = split_heads(m + ".value", value);
    b_.hold(query);
    b_.hold(key);
    b_.hold(value);
    auto [out, attn_weights] = attn(m, bp, query, key, value);
    b_.hold(attn_weights);  // `attn_output, attn_weights = self._attn(...)`
    // _merge_heads: permute(0, 2, 1, 3).contiguous().view(..., hidden)
    out = b_.permute(m + ".merge_heads.permute", out, {0, 2, 1, 3});
    out = b_.contiguous(m + ".merge_heads.contiguous", out);
    const auto s = b_.shape(out);
    out = b_.view(m + ".merge_heads.view", out, {s[0], s[1], h});
    out = conv1d(m + ".c_proj", out, bp.attn_proj);
    out = sp_.scatter(b_, m + ".c_proj.reduce_scatter", out);
    out = b_.dropout(m + ".resid_dropout", out, c_.resid_pdrop * scale_);
    b_.release_holds(scope);
    return out;
  }

  // GPT2Attention._attn: returns (attn_output, attn_weights).
  std::pair<TensorId, TensorId> attn(const std::string& m, const Gpt2BlockParams& bp, TensorId query, TensorId key, TensorId value) {
    size_t scope = b_.open_scope();
    const int64_t seq = b_.shape(query)[2];
    const DType dt = b_.tensor(query).dtype;
    TensorId w = b_.matmul(m + ".matmul_scores", query, b_.transpose(m + ".key.transpose", key, -1, -2));
    TensorId scale = b_.factory(m + ".scale", {}, dt);  // torch.full([], value.size(-1) ** 0.5)
    w = b_.div(m + ".div", w, scale);
    // self.bias[:, :, key_length - query_length : key_length, :key_length]
    TensorId causal = b_.slice(m + ".causal_mask", bp.causal_bias, 0, 0, 1);
    causal = b_.slice(m + ".causal_mask", causal, 1, 0, 1);
    causal = b_.slice(m + ".causal_mask", causal, 2, 0, seq);
    causal = b_.slice(m + ".causal_mask", causal, 3, 0, seq);
    TensorId mask_value = b_.factory(m + ".mask_value", {}, dt);  // torch.full([], finfo.min)
    b_.hold(mask_value);  // a local until _attn returns
    w = b_.where(m + ".where", causal, w, mask_value);
    w = b_.softmax(m + ".softmax", w, -1);
    w = b_.dropout(m + ".attn_dropout", w, c_.attn_pdrop * scale_);
    TensorId attn_output = b_.matmul(m + ".matmul_context", w, value);
    b_.release_holds(scope);
    return {attn_output, w};
  }

  TensorId mlp(const std::string& m, const Gpt2BlockParams& bp, TensorId hidden) {
    hidden = conv1d(m + ".c_fc", sp_.gather_for_linear(b_, m + ".c_fc.all_gather", hidden), bp.c_fc);
    hidden = gelu_new(m + ".act", hidden);
    hidden = conv1d(m + ".c_proj", hidden, bp.mlp_proj);
    hidden = sp_.scatter(b_, m + ".c_proj.reduce_scatter", hidden);
    return b_.dropout(m + ".dropout", hidden, c_.resid_pdrop * scale_);
  }

  // NewGELUActivation: 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) *
  //                                    (input + 0.044715 * torch.pow(input, 3.0)))), in Python's order.
  TensorId gelu_new(const std::string& m, TensorId x) {
    size_t scope = b_.open_scope();
    b_.hold(x);
    TensorId half = b_.mul_scalar(m + ".mul_half", x, 0.5);
    TensorId cube = b_.pow_scalar(m + ".pow", x, 3.0);
    TensorId inner = b_.mul_scalar(m + ".mul_coef", cube, 0.044715);
    inner = b_.add(m + ".add", x, inner);
    inner = b_.mul_scalar(m + ".mul_sqrt", inner, std::sqrt(2.0 / M_PI));
    TensorId t = b_.tanh(m + ".tanh", inner);
    t = b_.add_scalar(m + ".add_one", t, 1.0);
    TensorId out = b_.mul(m + ".mul", half, t);
    b_.release_holds(scope);
    return out;
  }

  GraphBuilder& b_;
  const Gpt2Config& c_;
  const Gpt2Params& p_;
  double scale_;
  SequenceParallel sp_;
};

Graph build_gpt2(const Gpt2Config& preset, const ModelSpec& spec, const BuildConfig& cfg) {
  SpecReader r(spec);
  Gpt2Config c = preset;
  c.hidden = r.get_int("hidden", c.hidden);
  c.layers = r.get_int("layers", c.layers);
  c.heads = r.get_int("heads", c.heads);
  c.vocab = r.get_int("vocab", c.vocab);
  c.n_positions = r.get_int("n_positions", c.n_positions);
  c.embd_pdrop = get_double(r, spec.name, "embd_pdrop", c.embd_pdrop, 0.0, 1.0);
  c.attn_pdrop = get_double(r, spec.name, "attn_pdrop", c.attn_pdrop, 0.0, 1.0);
  c.resid_pdrop = get_double(r, spec.name, "resid_pdrop", c.resid_pdrop, 0.0, 1.0);
  r.reject_unused();
  head_dim(spec.name, c.hidden, c.heads);
  c.tp = cfg.tensor_parallel;
  check_megatron_split(c.tp, c.heads, c.heads, 4 * c.hidden, spec.name);
  const int64_t seq = sequence_length(cfg, 128, c.n_positions, spec.name, "n_positions");

  GraphBuilder b(spec.name, cfg.dtype);
  b.set_dim("batch", cfg.batch);
  b.set_dim("seq", seq);
  set_transformer_dims(b, c.hidden, c.layers);
  Gpt2Params p = declare(b, c);
  TensorId input_ids = b.input("input_ids", {cfg.batch, seq}, DType::I64);
  TensorId logits = Gpt2Forward(b, c, p, cfg.dropout_scale, SequenceParallel(cfg)).run(input_ids);
  b.mark_output(logits);
  b.begin_loss();
  b.set_loss(add_loss(b, logits, LossKind::NextToken, cfg));
  Graph g = b.finish();
  g.block_class = "GPT2Block";  // transformers' modeling_gpt2.py
  return g;
}

}  // namespace

void register_gpt2(std::vector<ZooEntry>& out) {
  const std::pair<const char*, Gpt2Config> presets[] = {
      {"gpt2", {768, 12, 12}},
      {"gpt2-medium", {1024, 24, 16}},
      {"gpt2-large", {1280, 36, 20}},
      {"gpt2-xl", {1600, 48, 25}},
  };
  for (const auto& [name, c] : presets) {
    Gpt2Config copy = c;
    out.push_back({name,
                   std::string("Hugging Face GPT2LMHeadModel ") + name +
                       " (tied lm_head; seq 128 by default, at most 1024)",
                   "transformer", true,
                   [copy](const ModelSpec& s, const BuildConfig& cfg) { return build_gpt2(copy, s, cfg); },
                   /*tensor_parallel=*/true});
  }
}

}  // namespace headroom
