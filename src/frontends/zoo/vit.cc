// torchvision 0.14 vit_b_16 (patch 16, 12 layers, 12 heads, hidden 768, MLP 3072, dropout and
// attention_dropout 0.0), 224x224 input, 1000 classes.
//
// Stem: conv_proj (16x16, stride 16) -> reshape -> permute(0, 2, 1) -> cat([class_token.expand,
// x], 1). Encoder: + pos_embedding, Dropout, 12 EncoderBlocks, LayerNorm; head: x[:, 0] ->
// heads.head. EncoderBlock: x = ln_1(input); x = self_attention(x, x, x, need_weights=False);
// x = dropout(x); x = x + input; y = ln_2(x); y = mlp(y) (Linear, GELU, Dropout, Linear,
// Dropout); return x + y.
//
// nn.MultiheadAttention (batch_first=True) in torch 1.13 runs one of two paths:
//  - training (module.training, or grad enabled with parameters requiring grad): the Python
//    F.multi_head_attention_forward on query.transpose(1, 0). Its in-projection is linear() of a
//    non-contiguous 3-d input, which at::linear runs as clone (contiguous copy) -> mm -> add
//    (bias, out of place); then chunk(3, -1), q/k/v .contiguous() copies, q / sqrt(head_dim),
//    bmm, softmax, (no dropout call: attention_dropout is 0.0), bmm, transpose().contiguous(),
//    out_proj addmm, and the final transpose(1, 0) back to batch-first.
//  - inference (BuildConfig::inference: eval + no_grad, even head count, no mask): the fused
//    torch._native_multi_head_attention. Observed on torch 1.13 (CPU profiler): mm -> qkv
//    [B*S, 3D]; _transform_bias_rescale_qkv allocates q/k/v packed [3, B, H, S, hd] and frees
//    qkv; bmm -> scores [B*H, S, S]; softmax in place; bmm into q's storage; scores freed;
//    permute().contiguous() [B, S, D]; out_proj addmm; the packed q/k/v is freed on return.
// Both are written below with the builder's calls, with the differences noted at each step.
// PyTorch 2.x (BuildConfig::mha_sdpa; measured with 2.11 on the H100) runs both paths through
// scaled_dot_product_attention instead (attention_python_sdpa, attention_fused_sdpa below).
// The training path leaves the residual stream non-contiguous ([S, B, D] memory order after the
// first block), so every LayerNorm there also makes an internal contiguous copy; that transient
// is not modelled.
#include <cmath>

#include "frontends/zoo/losses.h"
#include "frontends/zoo/registry.h"
#include "util/error.h"

namespace headroom {
namespace {

struct VitSpec {
  int64_t patch, layers, heads, hidden, mlp;
};

// F.multi_head_attention_forward (training path). x: [B, S, D] (ln_1 output).
TensorId attention_python(GraphBuilder& b, const std::string& p, TensorId x, int64_t heads) {
  const auto s = b.shape(x);
  const int64_t B = s[0], S = s[1], D = s[2], hd = D / heads;
  TensorId w = b.parameter(p + ".in_proj_weight", {3 * D, D});
  TensorId bias = b.parameter(p + ".in_proj_bias", {3 * D});
  size_t module_scope = b.open_scope();
  b.hold(x);  // EncoderBlock's `x` until self_attention returns
  // MultiheadAttention.forward: query = key = value = x.transpose(1, 0)
  TensorId query = b.transpose(p + ".transpose", x, 1, 0);  // [S, B, D], not contiguous
  size_t function_scope = b.open_scope();
  b.hold(query);
  // _in_projection_packed: linear(q, w, b).chunk(3, dim=-1) as at::linear runs it.
  TensorId qc = b.contiguous(p + ".in_proj.contiguous", query);
  TensorId proj = b.linear_with(p + ".in_proj", b.view(p + ".in_proj.view", qc, {S * B, D}), w);
  proj = b.view(p + ".in_proj.view", proj, {S, B, 3 * D});
  proj = b.add(p + ".in_proj.add", proj, bias);
  std::vector<TensorId> qkv = b.chunk(p + ".chunk", proj, 3, -1);
  const char* names[] = {"q", "k", "v"};
  for (size_t i = 0; i < 3; ++i) {
    // q = q.contiguous().view(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    std::string n = p + "." + names[i];
    TensorId t = b.contiguous(n + ".contiguous", qkv[i]);
    t = b.view(n + ".view", t, {S, B * heads, hd});
    qkv[i] = b.transpose(n + ".transpose", t, 0, 1);  // [B*H, S, hd]
    b.hold(qkv[i]);  // the locals q, k, v live until the function returns
  }
  TensorId q_scaled = b.div_scalar(p + ".q_scaled", qkv[0], std::sqrt(static_cast<double>(hd)));
  b.hold(q_scaled);
  // torch.bmm does not copy the transposed k or v (the builder's matmul rule may assume a copy).
  TensorId scores = b.matmul(p + ".bmm", q_scaled, b.transpose(p + ".k.transpose", qkv[1], -2, -1));
  TensorId weights = b.softmax(p + ".softmax", scores, -1);
  b.hold(weights);
  TensorId out = b.matmul(p + ".bmm", weights, qkv[2]);  // [B*H, S, hd]
  out = b.contiguous(p + ".out.contiguous", b.transpose(p + ".out.transpose", out, 0, 1));
  out = b.view(p + ".out.view", out, {S * B, D});
  out = b.linear(p + ".out_proj", out, D);
  out = b.view(p + ".out_proj.view", out, {S, B, D});
  b.release_holds(function_scope);
  out = b.transpose(p + ".transpose", out, 1, 0);  // batch first again: [B, S, D], not contiguous
  b.release_holds(module_scope);
  return out;
}

// torch._native_multi_head_attention (eval + no_grad). x: [B, S, D] (ln_1 output).
TensorId attention_fused(GraphBuilder& b, const std::string& p, TensorId x, int64_t heads) {
  const auto s = b.shape(x);
  const int64_t B = s[0], S = s[1], D = s[2], hd = D / heads;
  TensorId w = b.parameter(p + ".in_proj_weight", {3 * D, D});
  TensorId bias = b.parameter(p + ".in_proj_bias", {3 * D});
  size_t module_scope = b.open_scope();
  b.hold(x);
  // qkv = mm(x, w^T) [B*S, 3D]. The kernel adds the bias in the next step; adding it here
  // allocates the same buffer.
  TensorId qkv = b.linear_with(p + ".in_proj", b.view(p + ".in_proj.view", x, {B * S, D}), w, bias);
  // _transform_bias_rescale_qkv: a new packed [3, B, H, S, hd] (q scaled); qkv dies here.
  TensorId packed = b.view(p + ".qkv.view", qkv, {B, S, 3, heads, hd});
  packed = b.permute(p + ".qkv.permute", packed, {2, 0, 3, 1, 4});
  packed = b.contiguous(p + ".transform_bias_rescale_qkv", packed);
  size_t function_scope = b.open_scope();
  b.hold(packed);  // q, k, v live until the function returns
  std::vector<TensorId> qkv3;
  const char* names[] = {"q", "k", "v"};
  for (int64_t i = 0; i < 3; ++i) {
    std::string n = p + "." + names[i];
    qkv3.push_back(b.view(n + ".view", b.select(n, packed, 0, i), {B * heads, S, hd}));
  }
  TensorId scores = b.matmul(p + ".bmm", qkv3[0], b.transpose(p + ".k.transpose", qkv3[1], 1, 2));
  // The kernel's softmax is in place and its second bmm writes into q's storage; the builder
  // allocates both (over by [B*H, S, S] during the softmax and [B, S, D] until the copy below).
  TensorId weights = b.softmax(p + ".softmax", scores, -1);
  TensorId out = b.matmul(p + ".bmm", weights, qkv3[2]);  // [B*H, S, hd]
  out = b.view(p + ".out.view", out, {B, heads, S, hd});
  out = b.contiguous(p + ".out.contiguous", b.permute(p + ".out.permute", out, {0, 2, 1, 3}));
  out = b.view(p + ".out.view", out, {B * S, D});
  out = b.linear(p + ".out_proj", out, D);
  out = b.view(p + ".out_proj.view", out, {B, S, D});
  b.release_holds(function_scope);
  b.release_holds(module_scope);
  return out;
}

// scaled_dot_product_attention on [B, H, S, hd] operands, as PyTorch 2.x dispatches it on CUDA
// (sdp_utils select_sdp_backend): the flash kernel for fp16/bf16, the memory-efficient one for
// fp32. Either returns its output in [B, S, H, hd] memory order (returned here in that shape)
// and a float32 logsumexp: flash always [B, H, S]; the memory-efficient kernel only when
// autograd records the call (compute_log_sumexp), padded to a multiple of 32 rows. The backward
// allocates a gradient per operand (_efficient_attention_backward: dq, dk, dv). Not modelled:
// the node keeps its output and logsumexp (an Opaque op keeps its inputs only), so where the
// output is copied before the out-projection (batch > 1 in training) that copy's source is
// freed too early.
TensorId sdpa(GraphBuilder& b, const std::string& name, TensorId q, TensorId k, TensorId v, int64_t B, int64_t H,
              int64_t S, int64_t hd, bool records_grad) {
  const DType dt = b.tensor(q).dtype;
  std::vector<GraphBuilder::OpaqueOutput> outs = {{{B, S, H, hd}, dt}};
  if (dt != DType::F32) {
    outs.push_back({{B, H, S}, DType::F32});
  } else if (records_grad) {
    outs.push_back({{B, H, (S + 31) / 32 * 32}, DType::F32});
  }
  return b.opaque(name, {q, k, v}, outs)[0];
}

// F.multi_head_attention_forward in PyTorch 2.x (training path, need_weights=False), x:
// [B, S, D] (ln_1 output). _in_projection_packed: proj = linear(q, w, b), then
// proj.unflatten(-1, (3, E)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous() (a packed
// [3, S, B, D] copy; proj dies) and q, k, v = proj[0], proj[1], proj[2]; views to [B, H, S, hd];
// scaled_dot_product_attention; attn_output.permute(2, 0, 1, 3).contiguous() (a copy unless
// B == 1); out_proj linear. at::linear of the [S, B, D] transpose takes addmm when it is
// contiguous (B == 1) and otherwise matmul (a contiguous copy, kept by mm for the weight's
// gradient) followed by add_(bias) in place.
TensorId attention_python_sdpa(GraphBuilder& b, const std::string& p, TensorId x, int64_t heads, bool records_grad) {
  const auto s = b.shape(x);
  const int64_t B = s[0], S = s[1], D = s[2], hd = D / heads;
  TensorId w = b.parameter(p + ".in_proj_weight", {3 * D, D});
  TensorId bias = b.parameter(p + ".in_proj_bias", {3 * D});
  size_t module_scope = b.open_scope();
  b.hold(x);  // EncoderBlock's `x` until self_attention returns
  TensorId query = b.transpose(p + ".transpose", x, 1, 0);  // [S, B, D]
  size_t function_scope = b.open_scope();
  b.hold(query);
  TensorId proj;
  if (B == 1) {
    proj = b.linear_with(p + ".in_proj", b.view(p + ".in_proj.view", query, {S * B, D}), w, bias);
  } else {
    TensorId qc = b.contiguous(p + ".in_proj.contiguous", query);
    proj = b.linear_with(p + ".in_proj", b.view(p + ".in_proj.view", qc, {S * B, D}), w);
    proj = b.add_(p + ".in_proj.add_", proj, bias);
  }
  proj = b.view(p + ".in_proj.view", proj, {S, B, 3, D});
  TensorId packed = b.contiguous(p + ".in_proj.pack", b.permute(p + ".in_proj.permute", proj, {2, 0, 1, 3}));
  std::vector<TensorId> qkv;
  const char* names[] = {"q", "k", "v"};
  for (int64_t i = 0; i < 3; ++i) {
    std::string n = p + "." + names[i];
    TensorId t = b.view(n + ".view", b.select(n, packed, 0, i), {S, B * heads, hd});
    qkv.push_back(b.transpose(n + ".transpose", t, 0, 1));  // [B*H, S, hd], viewed as [B, H, S, hd]
    b.hold(qkv.back());  // the locals q, k, v live until the function returns
  }
  TensorId out = sdpa(b, p + ".scaled_dot_product_attention", qkv[0], qkv[1], qkv[2], B, heads, S, hd, records_grad);
  out = b.contiguous(p + ".out.contiguous", b.permute(p + ".out.permute", out, {1, 0, 2, 3}));  // [S, B, H, hd]
  out = b.view(p + ".out.view", out, {S * B, D});
  out = b.linear(p + ".out_proj", out, D);
  out = b.view(p + ".out_proj.view", out, {S, B, D});
  b.release_holds(function_scope);
  out = b.transpose(p + ".transpose", out, 1, 0);  // batch first again: [B, S, D]
  b.release_holds(module_scope);
  return out;
}

// The fast path's torch._native_multi_head_attention in PyTorch 2.x on CUDA
// (native_multi_head_attention_cuda, need_weights=False): qkv = linear(x, w, b) [B, S, 3D];
// chunk(3, -1) views to [B, H, S, hd]; scaled_dot_product_attention; its output viewed back to
// [B, S, D]; linear(out_proj). qkv and the attention output are C++ locals freed on return
// (measured: qkv, output, out_proj result, then output and qkv freed).
TensorId attention_fused_sdpa(GraphBuilder& b, const std::string& p, TensorId x, int64_t heads) {
  const auto s = b.shape(x);
  const int64_t B = s[0], S = s[1], D = s[2], hd = D / heads;
  TensorId w = b.parameter(p + ".in_proj_weight", {3 * D, D});
  TensorId bias = b.parameter(p + ".in_proj_bias", {3 * D});
  size_t module_scope = b.open_scope();
  b.hold(x);
  TensorId qkv = b.linear_with(p + ".in_proj", b.view(p + ".in_proj.view", x, {B * S, D}), w, bias);
  b.hold(qkv);
  std::vector<TensorId> parts;
  const char* names[] = {"q", "k", "v"};
  for (int64_t i = 0; i < 3; ++i) {
    // qkv.chunk(3, -1)[i].view(B, S, H, hd).transpose(1, 2): a strided view of qkv
    parts.push_back(b.slice(p + "." + names[i], qkv, 1, i * D, (i + 1) * D));
  }
  TensorId out = sdpa(b, p + ".scaled_dot_product_attention", parts[0], parts[1], parts[2], B, heads, S, hd, false);
  b.hold(out);
  out = b.view(p + ".out.view", out, {B * S, D});
  out = b.linear(p + ".out_proj", out, D);
  out = b.view(p + ".out_proj.view", out, {B, S, D});
  b.release_holds(module_scope);
  return out;
}

TensorId encoder_block(GraphBuilder& b, const std::string& p, TensorId input, const VitSpec& v,
                       double dropout, bool fused_attention, bool mha_sdpa, bool records_grad) {
  size_t scope = b.open_scope();
  b.hold(input);
  TensorId x = b.layer_norm(p + ".ln_1", input);
  if (mha_sdpa) {
    x = fused_attention ? attention_fused_sdpa(b, p + ".self_attention", x, v.heads)
                        : attention_python_sdpa(b, p + ".self_attention", x, v.heads, records_grad);
  } else {
    x = fused_attention ? attention_fused(b, p + ".self_attention", x, v.heads)
                        : attention_python(b, p + ".self_attention", x, v.heads);
  }
  x = b.dropout(p + ".dropout", x, dropout);
  x = b.add(p + ".add", x, input);
  TensorId y = b.layer_norm(p + ".ln_2", x);
  size_t mlp_scope = b.open_scope();
  b.hold(y);  // EncoderBlock's `y` until the MLP returns
  TensorId h = b.linear(p + ".mlp.0", y, v.mlp);
  h = b.gelu(p + ".mlp.1", h);
  h = b.dropout(p + ".mlp.2", h, dropout);
  h = b.linear(p + ".mlp.3", h, v.hidden);
  h = b.dropout(p + ".mlp.4", h, dropout);
  b.release_holds(mlp_scope);
  TensorId out = b.add(p + ".add_1", x, h);
  b.release_holds(scope);
  return out;
}

Graph build_vit(const VitSpec& v, const ModelSpec& spec, const BuildConfig& cfg) {
  SpecReader r(spec);
  int64_t classes = r.get_int("classes", 1000);
  int64_t size = r.get_int("image", 224, v.patch);
  r.reject_unused();
  if (size % v.patch != 0) {
    throw InputError("model '" + spec.name + "': image=" + std::to_string(size) +
                     " is not a multiple of the patch size " + std::to_string(v.patch));
  }
  const int64_t n_patches = (size / v.patch) * (size / v.patch);
  const int64_t seq = n_patches + 1;
  const double dropout = 0.0 * cfg.dropout_scale;  // torchvision's default dropout=0.0
  // nn.MultiheadAttention's fast path needs eval, no grad and an even number of heads.
  const bool fused = cfg.inference && v.heads % 2 == 0;
  GraphBuilder b(spec.name, cfg.dtype);
  b.set_dim("batch", cfg.batch);
  TensorId image = b.input("input", {cfg.batch, 3, size, size}, cfg.dtype);
  TensorId class_token = b.parameter("class_token", {1, 1, v.hidden});
  // _process_input
  Conv2dSpec patchify = Conv2dSpec::square(v.patch, v.patch, 0, true);
  TensorId x = b.conv2d("conv_proj", image, v.hidden, patchify);
  x = b.view("reshape", x, {cfg.batch, v.hidden, n_patches});
  x = b.permute("permute", x, {0, 2, 1});
  TensorId cls = b.expand("class_token.expand", class_token, {cfg.batch, 1, v.hidden});
  x = b.cat("cat", {cls, x}, 1);
  // Encoder. VisionTransformer.forward's `x` keeps the cat output until the encoder returns;
  // Encoder.forward's `input` keeps the positional sum until it returns.
  size_t encoder_scope = b.open_scope();
  b.hold(x);
  TensorId pos = b.parameter("encoder.pos_embedding", {1, seq, v.hidden});
  x = b.add("encoder.add", x, pos);
  b.hold(x);
  x = b.dropout("encoder.dropout", x, dropout);
  for (int64_t i = 0; i < v.layers; ++i) {
    x = encoder_block(b, "encoder.layers.encoder_layer_" + std::to_string(i), x, v, dropout, fused, cfg.mha_sdpa,
                      !cfg.inference);
  }
  x = b.layer_norm("encoder.ln", x);
  b.release_holds(encoder_scope);
  x = b.select("select", x, 1, 0);  // x[:, 0]
  x = b.linear("heads.head", x, classes);
  b.mark_output(x);
  b.begin_loss();
  b.set_loss(add_loss(b, x, LossKind::CrossEntropy, cfg));
  return b.finish();
}

}  // namespace

void register_vit(std::vector<ZooEntry>& out) {
  const VitSpec b16{16, 12, 12, 768, 3072};
  out.push_back({"vit_b_16", "torchvision vit_b_16 (224x224, 1000 classes)", "vision", false,
                 [b16](const ModelSpec& s, const BuildConfig& c) { return build_vit(b16, s, c); }});
}

}  // namespace headroom
