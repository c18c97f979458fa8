// The ONNX importer on small models written with the protobuf API (tests/onnx_test_models.h) and
// on a transformer block exported by torch.onnx (tests/data/onnx/gen_models.py): shapes, parameter
// counts, op kinds, and memory equal to the same model written with GraphBuilder.
#include "frontends/onnx/onnx_import.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "estimate/estimate.h"
#include "frontends/zoo/losses.h"
#include "ir/builder.h"
#include "onnx_test_models.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using onnx::TensorProto;
using testing::Dim;
using testing::batch_options;
using testing::OnnxModel;
using testing::Weights;

Graph import_ok(const OnnxModel& m, const OnnxImportOptions& o) {
  Result<Graph> g = import_onnx_bytes(m.bytes(), o, "test.onnx");
  EXPECT_TRUE(g.ok()) << g.error();
  return g.ok() ? g.value() : Graph{};
}

int count_kind(const Graph& g, OpKind k) {
  int n = 0;
  for (const Op& op : g.ops) n += op.kind == k && op.stage == OpStage::Model;
  return n;
}

const Op* find_kind(const Graph& g, OpKind k) {
  for (const Op& op : g.ops) {
    if (op.kind == k) return &op;
  }
  return nullptr;
}

SimResult run(const Graph& g, RunMode mode, OptimizerKind opt = OptimizerKind::Adam) {
  EstimateOptions o;
  o.mode = mode;
  o.optimizer = opt;
  o.device = "cuda";
  return simulate(build_program(g, schedule_options(o)));
}

// Conv(3->4, 3x3, pad 1, no bias) - BatchNormalization (training export: 5 outputs) - Relu -
// GlobalAveragePool - Flatten - Gemm(transB=1) to 5 classes, input [batch, 3, 8, 8].
OnnxModel conv_net(Weights w = Weights::Inline) {
  OnnxModel m;
  m.input("input", {std::string("batch"), int64_t{3}, int64_t{8}, int64_t{8}});
  m.initializer("conv.weight", {4, 3, 3, 3}, w);
  m.initializer("bn.weight", {4}, w).initializer("bn.bias", {4}, w);
  m.initializer("bn.running_mean", {4}, w).initializer("bn.running_var", {4}, w);
  m.initializer("fc.weight", {5, 4}, w).initializer("fc.bias", {5}, w);
  m.node("Conv", {"input", "conv.weight"}, {"c"}, "conv")
      .ints("kernel_shape", {3, 3})
      .ints("pads", {1, 1, 1, 1})
      .ints("strides", {1, 1});
  m.node("BatchNormalization", {"c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"},
         {"b", "rm", "rv", "sm", "sv"}, "bn")
      .f("epsilon", 1e-5f)
      .f("momentum", 0.9f);
  m.node("Relu", {"b"}, {"r"}, "relu");
  m.node("GlobalAveragePool", {"r"}, {"p"}, "avgpool");
  m.node("Flatten", {"p"}, {"f"}, "flatten").i("axis", 1);
  m.node("Gemm", {"f", "fc.weight", "fc.bias"}, {"logits"}, "fc").i("transB", 1);
  m.output("logits");
  return m;
}

// The same network as conv_net(), written the way eager PyTorch runs it.
Graph conv_net_reference(int64_t batch) {
  GraphBuilder b("ref");
  b.set_dim("batch", batch);
  TensorId x = b.input("input", {batch, 3, 8, 8}, DType::F32);
  x = b.conv2d("conv", x, 4, Conv2dSpec::square(3, 1, 1, false));
  x = b.batch_norm2d("bn", x);
  x = b.relu("relu", x, false);
  x = b.adaptive_avg_pool2d("avgpool", x, 1, 1);
  x = b.flatten("flatten", x, 1);
  x = b.linear("fc", x, 5);
  b.mark_output(x);
  b.begin_loss();
  BuildConfig cfg;
  b.set_loss(add_loss(b, x, LossKind::CrossEntropy, cfg));
  return b.finish();
}

TEST(OnnxImport, ConvNetShapesAndParameters) {
  Graph g = import_ok(conv_net(), batch_options(2));
  // conv 4*3*3*3 = 108, bn 4 + 4, fc 5*4 + 5 = 25.
  EXPECT_EQ(g.parameter_count(), 108 + 8 + 25);
  ASSERT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(g.tensor(g.inputs[0]).shape, (std::vector<int64_t>{2, 3, 8, 8}));
  EXPECT_EQ(g.tensor(g.inputs[0]).batch_axis, 0);
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(g.tensor(g.outputs[0]).shape, (std::vector<int64_t>{2, 5}));
  const Op* conv = find_kind(g, OpKind::Conv2d);
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->name, "conv");
  EXPECT_EQ(g.tensor(conv->outputs[0]).shape, (std::vector<int64_t>{2, 4, 8, 8}));
  EXPECT_EQ(count_kind(g, OpKind::BatchNorm2d), 1);
  EXPECT_EQ(count_kind(g, OpKind::AdaptiveAvgPool2d), 1);
  EXPECT_EQ(count_kind(g, OpKind::Linear), 1);
  EXPECT_EQ(g.tensor(find_kind(g, OpKind::BatchNorm2d)->inputs[3]).role, TensorRole::Buffer);
  EXPECT_EQ(g.tensor(find_kind(g, OpKind::Linear)->inputs[1]).name, "fc.weight");
  ASSERT_NE(g.loss, kNone);
  EXPECT_NE(find_kind(g, OpKind::NllLoss), nullptr);  // [N,C] output: cross-entropy
  EXPECT_EQ(g.dims.at("batch"), 2);
}

// The byte-exact check: the imported network and the same network built with GraphBuilder give
// the same peaks, training (Adam, two steps) and inference, at two batch sizes.
TEST(OnnxImport, ConvNetMemoryEqualsBuilderNetwork) {
  for (int64_t batch : {1, 6}) {
    Graph g = import_ok(conv_net(), batch_options(batch));
    Graph ref = conv_net_reference(batch);
    EXPECT_EQ(g.parameter_count(), ref.parameter_count());
    EXPECT_EQ(g.weights_bytes(), ref.weights_bytes());  // with num_batches_tracked
    for (RunMode mode : {RunMode::Training, RunMode::Inference}) {
      SimResult a = run(g, mode), b = run(ref, mode);
      EXPECT_EQ(a.peak.bytes, b.peak.bytes)
          << "batch " << batch << " mode " << static_cast<int>(mode);
      EXPECT_EQ(a.end_bytes, b.end_bytes);
    }
  }
}

TEST(OnnxImport, WeightsAsExternalDataPointingAtAMissingFile) {
  Graph g = import_ok(conv_net(Weights::ExternalMissing), batch_options(3));
  EXPECT_EQ(g.parameter_count(), 141);
  EXPECT_EQ(g.tensor(g.outputs[0]).shape, (std::vector<int64_t>{3, 5}));
  Graph absent = import_ok(conv_net(Weights::Absent), batch_options(3));
  EXPECT_EQ(absent.parameter_count(), 141);
  EXPECT_EQ(run(g, RunMode::Training).peak.bytes, run(absent, RunMode::Training).peak.bytes);
}

// A model whose weights are 4 GiB (external, never read): only the small protobuf is parsed.
TEST(OnnxImport, ExternalWeightsOverTwoGigabytes) {
  OnnxModel m;
  m.input("ids", {std::string("batch"), int64_t{4}}, TensorProto::INT64);
  m.initializer("emb.weight", {int64_t{1} << 20, 1024}, Weights::ExternalMissing);
  m.node("Gather", {"emb.weight", "ids"}, {"e"}, "emb");
  m.output("e");
  Graph g = import_ok(m, batch_options(2));
  EXPECT_EQ(g.parameter_count(), int64_t{1} << 30);
  EXPECT_EQ(g.weights_bytes(), int64_t{4} << 30);
  ASSERT_NE(find_kind(g, OpKind::Embedding), nullptr);
  EXPECT_EQ(g.tensor(g.outputs[0]).shape, (std::vector<int64_t>{2, 4, 1024}));
  EXPECT_NE(find_kind(g, OpKind::MseLoss), nullptr);  // rank-3 output: MSE by default
}

// softmax(q @ k^T / sqrt(d)) @ v with q, k, v = Linear(x) spelled MatMul(x, Transpose(W)) + b,
// as torch.onnx writes nn.Linear on a 3-D input.
OnnxModel attention(int64_t d) {
  OnnxModel m;
  m.input("x", {std::string("batch"), std::string("seq"), d});
  for (const char* p : {"q", "k", "v"}) {
    std::string n = p;
    m.initializer(n + ".weight", {d, d}).initializer(n + ".bias", {d});
    m.node("Transpose", {n + ".weight"}, {n + ".wt"}).ints("perm", {1, 0});
    m.node("MatMul", {"x", n + ".wt"}, {n + ".mm"}, n);
    m.node("Add", {n + ".bias", n + ".mm"}, {n + ".out"});
  }
  m.node("Transpose", {"k.out"}, {"kt"}, "kt").ints("perm", {0, 2, 1});
  m.node("MatMul", {"q.out", "kt"}, {"scores"}, "scores");
  m.constant("scale", OnnxModel::float_scalar(std::sqrt(static_cast<float>(d))));
  m.node("Div", {"scores", "scale"}, {"scaled"}, "scaled");
  m.node("Softmax", {"scaled"}, {"attn"}, "softmax").i("axis", -1);
  m.node("MatMul", {"attn", "v.out"}, {"ctx"}, "ctx");
  m.output("ctx");
  return m;
}

TEST(OnnxImport, AttentionSnippet) {
  OnnxImportOptions o = batch_options(2);
  o.dims["seq"] = 5;
  Graph g = import_ok(attention(8), o);
  EXPECT_EQ(g.parameter_count(), 3 * (8 * 8 + 8));
  EXPECT_EQ(count_kind(g, OpKind::Linear), 3);  // MatMul + bias Add folded into linear
  EXPECT_EQ(count_kind(g, OpKind::Add), 0);
  EXPECT_EQ(count_kind(g, OpKind::MatMul), 2);
  EXPECT_EQ(count_kind(g, OpKind::DivScalar), 1);  // / sqrt(d): a Python scalar
  EXPECT_EQ(count_kind(g, OpKind::Softmax), 1);
  EXPECT_EQ(count_kind(g, OpKind::Permute), 1);  // k^T; the weight transposes are linear's own
  const Op* lin = find_kind(g, OpKind::Linear);
  EXPECT_EQ(g.tensor(lin->inputs[1]).name, "q.weight");
  EXPECT_EQ(g.tensor(lin->inputs[2]).name, "q.bias");
  EXPECT_EQ(g.tensor(g.outputs[0]).shape, (std::vector<int64_t>{2, 5, 8}));
  EXPECT_EQ(g.dims.at("seq"), 5);
  EXPECT_NE(find_kind(g, OpKind::MseLoss), nullptr);
}

TEST(OnnxImport, DynamicBatchAndNamedDims) {
  OnnxModel m;
  m.input("x", {std::string("N"), std::string("seq"), int64_t{4}});
  m.input("mask", {std::string("N"), std::string("seq")});
  m.node("Relu", {"x"}, {"y"});
  m.node("Unsqueeze", {"mask", "axes"}, {"m3"});
  m.int64_initializer("axes", {-1});
  m.node("Mul", {"y", "m3"}, {"z"});
  m.output("z");
  // The Unsqueeze reads an initializer defined after it in the file: initializers are not nodes,
  // so order does not matter for them.
  OnnxImportOptions o = batch_options(3);
  o.dims["seq"] = 7;
  Graph g = import_ok(m, o);
  EXPECT_EQ(g.tensor(g.inputs[0]).shape, (std::vector<int64_t>{3, 7, 4}));
  EXPECT_EQ(g.tensor(g.inputs[1]).shape, (std::vector<int64_t>{3, 7}));
  EXPECT_EQ(g.tensor(g.outputs[0]).shape, (std::vector<int64_t>{3, 7, 4}));
  EXPECT_EQ(g.dims.at("N"), 3);
  EXPECT_EQ(g.dims.at("batch"), 3);
  EXPECT_EQ(g.dims.at("seq"), 7);
  // dims wins over batch for the batch symbol.
  o.dims["N"] = 5;
  EXPECT_EQ(import_ok(m, o).tensor(0).shape[0], 5);

  OnnxImportOptions no_seq = batch_options(3);
  Result<Graph> r = import_onnx_bytes(m.bytes(), no_seq, "m.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(),
            "m.onnx: symbolic dimension 'seq' (used by inputs 'x', 'mask') has no value: pass "
            "--seq N or --dim seq=N");
  // --seq binds every dimension named like a sequence; --dim wins over it.
  OnnxImportOptions with_seq = batch_options(3);
  with_seq.seq = 9;
  EXPECT_EQ(import_ok(m, with_seq).tensor(0).shape, (std::vector<int64_t>{3, 9, 4}));
  with_seq.dims["seq"] = 6;
  EXPECT_EQ(import_ok(m, with_seq).tensor(0).shape, (std::vector<int64_t>{3, 6, 4}));
  OnnxImportOptions no_batch;
  no_batch.dims["seq"] = 2;
  r = import_onnx_bytes(m.bytes(), no_batch, "m.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(),
            "m.onnx: symbolic dimension 'N' (used by inputs 'x', 'mask', the batch axis) has no "
            "value: pass --batch N or --dim N=N");
  OnnxImportOptions typo = o;
  typo.dims["sequence"] = 3;
  r = import_onnx_bytes(m.bytes(), typo, "m.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("--dim 'sequence' is not a symbolic dimension"), std::string::npos)
      << r.error();
}

TEST(OnnxImport, FixedBatchModel) {
  OnnxModel m;
  m.input("x", {int64_t{2}, int64_t{4}});
  m.node("Relu", {"x"}, {"y"});
  m.output("y");
  EXPECT_EQ(import_ok(m, OnnxImportOptions{}).tensor(0).shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(import_ok(m, batch_options(2)).tensor(0).batch_axis, -1);
  Result<Graph> r = import_onnx_bytes(m.bytes(), batch_options(8), "m.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("no symbolic batch axis"), std::string::npos) << r.error();
}

// Shape arithmetic (Shape, Gather, Unsqueeze, Concat, Reshape) folds: no ops, no memory.
TEST(OnnxImport, ShapeComputationFolds) {
  OnnxModel m;
  m.input("x", {std::string("batch"), int64_t{3}, int64_t{4}});
  m.node("Shape", {"x"}, {"s"});
  m.constant("zero", OnnxModel::int64s({0}, true));
  m.node("Gather", {"s", "zero"}, {"n"}).i("axis", 0);
  m.constant("axes", OnnxModel::int64s({0}));
  m.node("Unsqueeze", {"n", "axes"}, {"n1"});
  m.constant("rest", OnnxModel::int64s({-1}));
  m.node("Concat", {"n1", "rest"}, {"target"}).i("axis", 0);
  m.node("Reshape", {"x", "target"}, {"flat"}, "view");
  m.output("flat");
  Graph g = import_ok(m, batch_options(5));
  ASSERT_EQ(g.ops.size() - static_cast<size_t>(std::count_if(
                               g.ops.begin(), g.ops.end(),
                               [](const Op& op) { return op.stage == OpStage::Loss; })),
            1u);
  EXPECT_EQ(g.ops[0].kind, OpKind::View);
  EXPECT_EQ(g.tensor(g.outputs[0]).shape, (std::vector<int64_t>{5, 12}));
}

// GELU as torch.onnx spells it (Div/Erf/Add/Mul/Mul) becomes one gelu; layer norm spelled
// ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add becomes one layer_norm.
TEST(OnnxImport, GeluAndLayerNormDecompositions) {
  OnnxModel m;
  m.input("x", {std::string("batch"), int64_t{6}});
  m.initializer("ln.weight", {6}).initializer("ln.bias", {6});
  m.node("ReduceMean", {"x"}, {"mean"}, "ln").ints("axes", {-1});
  m.node("Sub", {"x", "mean"}, {"d"});
  m.constant("two", OnnxModel::float_scalar(2.0f));
  m.node("Pow", {"d", "two"}, {"sq"});
  m.node("ReduceMean", {"sq"}, {"var"}).ints("axes", {-1});
  m.constant("eps", OnnxModel::float_scalar(1e-5f));
  m.node("Add", {"var", "eps"}, {"ve"});
  m.node("Sqrt", {"ve"}, {"std"});
  m.node("Div", {"d", "std"}, {"n"});
  m.node("Mul", {"n", "ln.weight"}, {"nw"});
  m.node("Add", {"nw", "ln.bias"}, {"h"});
  m.constant("sqrt2", OnnxModel::float_scalar(1.4142135f));
  m.node("Div", {"h", "sqrt2"}, {"hs"}, "gelu");
  m.node("Erf", {"hs"}, {"e"});
  m.constant("one", OnnxModel::float_scalar(1.0f));
  m.node("Add", {"e", "one"}, {"e1"});
  m.node("Mul", {"h", "e1"}, {"he"});
  m.constant("half", OnnxModel::float_scalar(0.5f));
  m.node("Mul", {"he", "half"}, {"y"}, "gelu_out");
  m.output("y");
  Graph g = import_ok(m, batch_options(2));
  EXPECT_EQ(count_kind(g, OpKind::LayerNorm), 1);
  EXPECT_EQ(count_kind(g, OpKind::Gelu), 1);
  EXPECT_EQ(count_kind(g, OpKind::Opaque), 0);
  int model_ops = 0;
  for (const Op& op : g.ops) model_ops += op.stage == OpStage::Model;
  EXPECT_EQ(model_ops, 2);
  EXPECT_EQ(g.parameter_count(), 12);
}

// The exporter's own output for a small pre-LN transformer (embedding, attention, GELU MLP,
// dropout, head) against the same model written with GraphBuilder, call for call as eager PyTorch
// makes them.
Graph tiny_transformer_reference(int64_t batch, double dropout = 0.1) {
  const int64_t s = 8, d = 16, h = 2, v = 50;
  GraphBuilder b("ref");
  TensorId ids = b.input("ids", {batch, s}, DType::I64);
  TensorId emb_w = b.parameter("emb.weight", {v, d});
  TensorId pos_w = b.parameter("pos.weight", {s, d});
  TensorId ln_w = b.parameter("ln.weight", {d}), ln_b = b.parameter("ln.bias", {d});
  TensorId qkv_w = b.parameter("qkv.weight", {3 * d, d}), qkv_b = b.parameter("qkv.bias", {3 * d});
  TensorId proj_w = b.parameter("proj.weight", {d, d}), proj_b = b.parameter("proj.bias", {d});
  TensorId ln2_w = b.parameter("ln2.weight", {d}), ln2_b = b.parameter("ln2.bias", {d});
  TensorId fc1_w = b.parameter("fc1.weight", {4 * d, d}), fc1_b = b.parameter("fc1.bias", {4 * d});
  TensorId fc2_w = b.parameter("fc2.weight", {d, 4 * d}), fc2_b = b.parameter("fc2.bias", {d});
  TensorId head_w = b.parameter("head.weight", {v, d}), head_b = b.parameter("head.bias", {v});
  TensorId x = b.embedding_with("emb", ids, emb_w);
  TensorId pos = b.embedding_with("pos", b.factory("arange", {s}, DType::I64), pos_w);
  x = b.add("add", x, pos);
  TensorId qkv = b.linear_with("qkv", b.layer_norm_with("ln", x, ln_w, ln_b), qkv_w, qkv_b);
  std::vector<TensorId> parts = b.chunk("split", qkv, 3, -1);
  auto heads = [&](TensorId t, const std::string& n) {
    return b.transpose(n + ".t", b.unflatten(n, t, 2, {h, -1}), 1, 2);
  };
  TensorId q = heads(parts[0], "q"), k = heads(parts[1], "k"), val = heads(parts[2], "v");
  TensorId scores =
      b.div_scalar("scale", b.matmul("qk", q, b.transpose("kt", k, -2, -1)), std::sqrt(8.0));
  TensorId a = b.dropout("drop", b.softmax("softmax", scores, -1), dropout);
  TensorId ctx =
      b.reshape("merge", b.transpose("ctx.t", b.matmul("av", a, val), 1, 2), {batch, s, d});
  x = b.add("res1", x, b.linear_with("proj", ctx, proj_w, proj_b));
  TensorId f = b.linear_with("fc1", b.layer_norm_with("ln2", x, ln2_w, ln2_b), fc1_w, fc1_b);
  x = b.add("res2", x, b.linear_with("fc2", b.gelu("act", f), fc2_w, fc2_b));
  TensorId out = b.linear_with("head", x, head_w, head_b);
  b.mark_output(out);
  b.begin_loss();
  b.set_loss(add_loss(b, out, LossKind::Mse, BuildConfig{}));
  return b.finish();
}

TEST(OnnxImport, TorchExportedTransformerMatchesBuilderModel) {
  const std::string path =
      std::string(HEADROOM_SOURCE_DIR) + "/tests/data/onnx/tiny_transformer_training.onnx";
  for (int64_t batch : {2, 5}) {
    Result<Graph> r = import_onnx(path, batch_options(batch));
    ASSERT_TRUE(r.ok()) << r.error();
    const Graph& g = r.value();
    Graph ref = tiny_transformer_reference(batch);
    EXPECT_EQ(g.parameter_count(), 5058);  // sum(p.numel() for p in TinyTransformer().parameters())
    EXPECT_EQ(count_kind(g, OpKind::Linear), 5);
    EXPECT_EQ(count_kind(g, OpKind::LayerNorm), 2);
    EXPECT_EQ(count_kind(g, OpKind::Gelu), 1);
    EXPECT_EQ(count_kind(g, OpKind::Embedding), 2);
    EXPECT_EQ(count_kind(g, OpKind::Dropout), 1);
    EXPECT_EQ(count_kind(g, OpKind::Opaque), 1);  // torch.arange's ids, a factory
    for (RunMode mode : {RunMode::Training, RunMode::Inference}) {
      EXPECT_EQ(run(g, mode).peak.bytes, run(ref, mode).peak.bytes)
          << "batch " << batch << " mode " << static_cast<int>(mode);
    }
    // With in-place inference (as the CLI imports) the peaks stay the same: the residual
    // `x + proj(...)` must not be written into x, which layer_norm (a pattern of 10 nodes, one
    // call) also reads and keeps for backward; writing into proj's fresh output costs the same
    // as PyTorch's new tensor.
    OnnxImportOptions inplace = batch_options(batch);
    inplace.infer_inplace = true;
    Result<Graph> ri = import_onnx(path, inplace);
    ASSERT_TRUE(ri.ok()) << ri.error();
    for (RunMode mode : {RunMode::Training, RunMode::Inference}) {
      EXPECT_EQ(run(ri.value(), mode).peak.bytes, run(ref, mode).peak.bytes)
          << "in place, batch " << batch << " mode " << static_cast<int>(mode);
    }
  }
}

// --dropout off on an ONNX file: every Dropout's probability is scaled by 0, as for the built-in
// models, and the attention-probability mask and copy (2 x 1,024 bytes at batch 2) are gone.
TEST(OnnxImport, DropoutScaleZeroMakesDropoutIdentity) {
  const std::string path =
      std::string(HEADROOM_SOURCE_DIR) + "/tests/data/onnx/tiny_transformer_training.onnx";
  OnnxImportOptions o = batch_options(2);
  o.dropout_scale = 0.0;
  Result<Graph> r = import_onnx(path, o);
  ASSERT_TRUE(r.ok()) << r.error();
  const Op* drop = find_kind(r.value(), OpKind::Dropout);
  ASSERT_NE(drop, nullptr);
  EXPECT_EQ(drop->attrs.p, 0.0);
  for (RunMode mode : {RunMode::Training, RunMode::Inference})
    EXPECT_EQ(run(r.value(), mode).peak.bytes,
              run(tiny_transformer_reference(2, 0.0), mode).peak.bytes);
  // SGD's training peak is in the backward, with dropout's mask (1 byte an element on CUDA) and
  // output alive: [2 batch, 2 heads, 8, 8] is 256 elements, 256 + 1,024 bytes.
  EXPECT_EQ(
      run(tiny_transformer_reference(2, 0.1), RunMode::Training, OptimizerKind::Sgd).peak.bytes -
          run(r.value(), RunMode::Training, OptimizerKind::Sgd).peak.bytes,
      256 + 256 * 4);
}

// F.avg_pool2d(x, k, s, padding=p) with count_include_pad=True, as torch.onnx (opsets 11-18)
// writes it: Pad (constant zeros on H and W, even when p is 0) then AveragePool without pads.
// PyTorch pads inside the kernel, so the import is one avg_pool2d with the padding and no padded
// copy: the peak of Pad -> AveragePool equals the peak of the one-op model.
OnnxModel padded_pool(const std::vector<int64_t>& pads, int64_t k, int64_t stride,
                      bool pad_is_output) {
  OnnxModel m(14);
  m.input("x", {std::string("batch"), int64_t{4}, int64_t{8}, int64_t{8}});
  m.constant("pads", OnnxModel::int64s(pads));
  m.node("Pad", {"x", "pads"}, {"p"}, "/pool/Pad").s("mode", "constant");
  m.node("AveragePool", {"p"}, {"y"}, "/pool/AveragePool")
      .ints("kernel_shape", {k, k})
      .ints("strides", {stride, stride})
      .ints("pads", {0, 0, 0, 0});
  m.output("y");
  if (pad_is_output) m.output("p");
  return m;
}

TEST(OnnxImport, PadThenAveragePoolIsOneAvgPool) {
  OnnxImportOptions o = batch_options(2);
  o.with_loss = false;
  // padding=1, kernel 3, stride 1 (Inception's branch pools): [2,4,8,8] -> [2,4,8,8].
  Graph g = import_ok(padded_pool({0, 0, 1, 1, 0, 0, 1, 1}, 3, 1, false), o);
  EXPECT_EQ(count_kind(g, OpKind::Opaque), 0);
  ASSERT_EQ(count_kind(g, OpKind::AvgPool2d), 1);
  const Op* pool = find_kind(g, OpKind::AvgPool2d);
  EXPECT_EQ(g.tensor(pool->inputs[0]).name, "x");
  EXPECT_EQ(g.tensor(pool->outputs[0]).shape, (std::vector<int64_t>{2, 4, 8, 8}));
  EXPECT_EQ(pool->attrs.padding, (std::vector<int64_t>{1, 1}));
  // padding=0, kernel 2, stride 2 (DenseNet's transitions): [2,4,8,8] -> [2,4,4,4].
  Graph t = import_ok(padded_pool({0, 0, 0, 0, 0, 0, 0, 0}, 2, 2, false), o);
  EXPECT_EQ(count_kind(t, OpKind::Opaque), 0);
  ASSERT_EQ(count_kind(t, OpKind::AvgPool2d), 1);
  EXPECT_EQ(t.tensor(find_kind(t, OpKind::AvgPool2d)->outputs[0]).shape,
            (std::vector<int64_t>{2, 4, 4, 4}));
  // Not one avg_pool2d call: the padded tensor is read elsewhere (a graph output), the padding
  // is uneven, touches the channels, or exceeds half the kernel. Then the Pad is its own op.
  for (const OnnxModel& m : {padded_pool({0, 0, 1, 1, 0, 0, 1, 1}, 3, 1, true),
                             padded_pool({0, 0, 1, 1, 0, 0, 0, 0}, 3, 1, false),
                             padded_pool({0, 1, 1, 1, 0, 1, 1, 1}, 3, 1, false),
                             padded_pool({0, 0, 2, 2, 0, 0, 2, 2}, 3, 1, false)}) {
    Graph u = import_ok(m, o);
    EXPECT_EQ(count_kind(u, OpKind::Opaque), 1);
    EXPECT_EQ(count_kind(u, OpKind::AvgPool2d), 1);
  }
}

// Module scopes: a Concat made by a module call's own code (torch.onnx names it
// "/block/layer/Concat") whose result a child module ("/block/layer/norm/...") reads is a named
// Python local (`concated_features = torch.cat(inputs, 1)`): it stays referenced until the call's
// last node. Read only by the call's own code (`torch.cat(...)` fed to a functional op), it is not
// held.
OnnxModel concat_in_scope(bool child_reads) {
  OnnxModel m;
  m.input("x", {std::string("batch"), int64_t{4}, int64_t{8}, int64_t{8}});
  m.node("Relu", {"x"}, {"a"}, "/stem/Relu");
  m.node("Concat", {"a", "a"}, {"c"}, "/block/layer/Concat").i("axis", 1);
  m.node("Relu", {"c"}, {"n"}, child_reads ? "/block/layer/norm/Relu" : "/block/layer/Relu");
  m.node("Sigmoid", {"n"}, {"s"}, "/block/layer/conv/Sigmoid");
  m.node("Sigmoid", {"s"}, {"y"}, "/block/layer/out/Sigmoid");
  m.output("y");
  return m;
}

TEST(OnnxImport, ConcatenatedLocalHeldUntilItsModuleCallReturns) {
  for (bool child_reads : {true, false}) {
    Graph g = import_ok(concat_in_scope(child_reads), batch_options(2));
    auto op_named = [&](const std::string& name) {
      for (const Op& op : g.ops) {
        if (op.name == name) return op.id;
      }
      return kNone;
    };
    TensorId c = g.op(op_named("/block/layer/Concat")).outputs[0];
    TensorId a = g.op(op_named("/stem/Relu")).outputs[0];
    OpId last = op_named("/block/layer/out/Sigmoid");
    std::map<TensorId, OpId> held;
    for (const Hold& h : g.holds) held[h.tensor] = std::max(held[h.tensor], h.until);
    EXPECT_EQ(held.at(a), last);  // the call's argument, as before
    if (child_reads) {
      EXPECT_EQ(held.at(c), last);
    } else {
      EXPECT_EQ(held.count(c), 0u);
    }
  }
}

TEST(OnnxImport, InplaceInference) {
  OnnxModel m;
  m.input("x", {std::string("batch"), int64_t{4}});
  m.initializer("fc.weight", {4, 4}).initializer("fc.bias", {4});
  m.node("Gemm", {"x", "fc.weight", "fc.bias"}, {"l"}, "fc").i("transB", 1);
  m.node("Relu", {"l"}, {"r"}, "relu");     // l read once: relu_
  m.node("Add", {"r", "x"}, {"s"}, "add");  // r is relu's saved output: not in place
  m.node("Relu", {"s"}, {"y"}, "relu2");    // s fresh: relu_
  m.output("y");
  OnnxImportOptions o = batch_options(2);
  o.infer_inplace = true;
  Graph g = import_ok(m, o);
  std::vector<bool> inplace;
  for (const Op& op : g.ops) {
    if (op.stage == OpStage::Model && op.kind != OpKind::Linear)
      inplace.push_back(op.attrs.inplace);
  }
  EXPECT_EQ(inplace, (std::vector<bool>{true, false, true}));
  o.infer_inplace = false;
  for (const Op& op : import_ok(m, o).ops) EXPECT_FALSE(op.attrs.inplace) << op.name;
}

TEST(OnnxImport, UnknownOpsAllowedAsElementwise) {
  OnnxModel m;
  m.input("x", {std::string("batch"), int64_t{4}});
  m.node("Relu", {"x"}, {"r"});
  auto n = m.node("FancyAct", {"r"}, {"f"}, "fancy");
  n.proto().set_domain("com.example");
  auto* opset = m.proto().add_opset_import();
  opset->set_domain("com.example");
  opset->set_version(1);
  m.node("Sigmoid", {"f"}, {"y"});
  m.output("y");
  OnnxImportOptions o = batch_options(2);
  Result<Graph> r = import_onnx_bytes(m.bytes(), o, "m.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(),
            "m.onnx: unsupported ONNX op: com.example.FancyAct x1 (allow unknown ops to treat them "
            "as elementwise)");
  o.allow_unknown = true;
  Graph g = import_ok(m, o);
  const Op* f = find_kind(g, OpKind::Opaque);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->name, "fancy");
  EXPECT_EQ(g.tensor(f->outputs[0]).shape, (std::vector<int64_t>{2, 4}));
  bool warned = false;
  for (const std::string& note : g.notes)
    warned = warned || note.find("com.example.FancyAct x1") != std::string::npos;
  EXPECT_TRUE(warned);
}

TEST(OnnxImport, EvalExportWithFoldedBatchNormIsNoted) {
  OnnxModel m;
  m.input("x", {std::string("batch"), int64_t{3}, int64_t{4}, int64_t{4}});
  m.initializer("conv.weight", {2, 3, 1, 1}).initializer("conv.bias", {2});
  m.node("Conv", {"x", "conv.weight", "conv.bias"}, {"y"}, "conv");
  m.output("y");
  Graph g = import_ok(m, batch_options(1));
  bool noted = false;
  for (const std::string& note : g.notes)
    noted = noted || note.find("folds batch norm") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(OnnxImport, ViewsSlicesAndScalars) {
  OnnxModel m;
  m.input("x", {std::string("batch"), int64_t{6}, int64_t{4}});
  m.constant("split", OnnxModel::int64s({2, 4}));
  m.node("Split", {"x", "split"}, {"a", "b"}, "split").i("axis", 1);
  m.constant("starts", OnnxModel::int64s({1}));
  m.constant("ends", OnnxModel::int64s({INT64_MAX}));
  m.constant("axes", OnnxModel::int64s({2}));
  m.node("Slice", {"b", "starts", "ends", "axes"}, {"c"}, "slice");
  m.constant("idx", OnnxModel::int64s({0}, true));
  m.node("Gather", {"c", "idx"}, {"d"}, "select").i("axis", 1);
  m.constant("three", OnnxModel::float_scalar(3.0f));
  m.node("Mul", {"three", "d"}, {"e"}, "scale");
  m.node("Sub", {"three", "e"}, {"f"}, "rsub");
  m.node("Transpose", {"a"}, {"at"}, "t").ints("perm", {0, 2, 1});
  m.node("Cast", {"at"}, {"ah"}, "half").i("to", TensorProto::FLOAT16);
  m.output("f");
  m.output("ah", TensorProto::FLOAT16);
  Graph g = import_ok(m, batch_options(2));
  EXPECT_EQ(count_kind(g, OpKind::Slice), 3);  // two split pieces, one slice
  EXPECT_EQ(count_kind(g, OpKind::Select), 1);
  EXPECT_EQ(count_kind(g, OpKind::MulScalar), 1);
  EXPECT_EQ(count_kind(g, OpKind::Neg), 1);
  EXPECT_EQ(count_kind(g, OpKind::Cast), 1);
  EXPECT_EQ(g.tensor(g.outputs[0]).shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(g.tensor(g.outputs[1]).shape, (std::vector<int64_t>{2, 4, 2}));
  EXPECT_EQ(g.tensor(g.outputs[1]).dtype, DType::F16);
}

// One model through most of the op table: kinds and shapes.
TEST(OnnxImport, OpCoverage) {
  OnnxModel m(17);
  m.input("x", {std::string("batch"), int64_t{3}, int64_t{9}, int64_t{9}});
  m.input("ids", {std::string("batch"), int64_t{5}}, TensorProto::INT64);
  m.initializer("conv.weight", {8, 3, 3, 3}).initializer("conv.bias", {8});
  m.node("Conv", {"x", "conv.weight", "conv.bias"}, {"c"}, "conv")
      .ints("strides", {2, 1})
      .s("auto_pad", "SAME_UPPER");
  m.constant("zero", OnnxModel::float_scalar(0.0f));
  m.constant("six", OnnxModel::float_scalar(6.0f));
  m.node("Clip", {"c", "zero", "six"}, {"r6"}, "relu6");
  m.node("HardSwish", {"r6"}, {"hs"}, "hardswish");
  m.node("MaxPool", {"hs"}, {"mp"}, "maxpool")
      .ints("kernel_shape", {3, 3})
      .ints("strides", {2, 2})
      .ints("pads", {1, 1, 1, 1});
  m.node("AveragePool", {"mp"}, {"ap"}, "avgpool").ints("kernel_shape", {2, 2});
  m.constant("pads", OnnxModel::int64s({0, 0, 1, 1, 0, 0, 1, 1}));
  m.node("Pad", {"ap", "pads"}, {"pd"}, "pad");
  m.constant("roi", OnnxModel::int64s({}));
  TensorProto scales;
  scales.set_data_type(TensorProto::FLOAT);
  scales.add_dims(4);
  for (float f : {1.f, 1.f, 2.f, 2.f}) scales.add_float_data(f);
  m.constant("scales", scales);
  m.node("Resize", {"pd", "", "scales"}, {"up"}, "upsample");
  m.node("ReduceMean", {"up"}, {"gap"}, "mean").ints("axes", {2, 3}).i("keepdims", 0);
  // A linear with a weight stored [in, out] (constant-folded exports), then layer norm (opset 17).
  m.initializer("proj.w", {8, 6}).initializer("proj.b", {6});
  m.node("Gemm", {"gap", "proj.w", "proj.b"}, {"pj"}, "proj");
  m.initializer("ln.weight", {6}).initializer("ln.bias", {6});
  m.node("LayerNormalization", {"pj", "ln.weight", "ln.bias"}, {"ln"}, "ln").i("axis", -1);
  // Embedding, einsum as a batched matmul, reductions.
  m.initializer("emb.weight", {20, 6});
  m.node("Gather", {"emb.weight", "ids"}, {"e"}, "emb");
  m.node("Einsum", {"e", "e"}, {"gram"}, "gram").s("equation", "bik,bjk->bij");
  m.node("ReduceSum", {"gram", "axes"}, {"rs"}, "rowsum").i("keepdims", 0);
  m.constant("axes", OnnxModel::int64s({-1}));
  m.initializer("fc.w", {5, 6});
  m.node("MatMul", {"rs", "fc.w"}, {"z"}, "fc_mm");  // [N,5] @ [5,6]: a linear with W [in,out]
  m.node("Add", {"z", "ln"}, {"out"}, "sum");
  m.output("out");
  // Constants may be defined after their reader only if they are initializers, so put the axes
  // Constant node first.
  auto* nodes = m.proto().mutable_graph()->mutable_node();
  for (int i = 0; i < nodes->size(); ++i) {
    if (nodes->Get(i).output(0) == "axes") {
      for (int j = i; j > 0; --j) nodes->SwapElements(j, j - 1);
    }
  }
  Graph g = import_ok(m, batch_options(2));
  auto shape_of = [&](const std::string& op) {
    for (const Op& o : g.ops) {
      if (o.name == op) return g.tensor(o.outputs[0]).shape;
    }
    ADD_FAILURE() << op;
    return std::vector<int64_t>{};
  };
  EXPECT_EQ(shape_of("conv"), (std::vector<int64_t>{2, 8, 5, 9}));  // SAME_UPPER, stride (2,1)
  EXPECT_EQ(shape_of("maxpool"), (std::vector<int64_t>{2, 8, 3, 5}));
  EXPECT_EQ(shape_of("avgpool"), (std::vector<int64_t>{2, 8, 2, 4}));
  EXPECT_EQ(shape_of("pad"), (std::vector<int64_t>{2, 8, 4, 6}));
  EXPECT_EQ(shape_of("upsample"), (std::vector<int64_t>{2, 8, 8, 12}));
  EXPECT_EQ(shape_of("mean"), (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(shape_of("gram"), (std::vector<int64_t>{2, 5, 5}));
  EXPECT_EQ(shape_of("rowsum"), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(g.tensor(g.outputs[0]).shape, (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(count_kind(g, OpKind::Conv2d), 1);
  EXPECT_EQ(count_kind(g, OpKind::Hardtanh), 1);
  EXPECT_EQ(count_kind(g, OpKind::MaxPool2d), 1);
  EXPECT_EQ(count_kind(g, OpKind::AvgPool2d), 1);
  EXPECT_EQ(count_kind(g, OpKind::Opaque), 2);      // hardswish, pad
  EXPECT_EQ(count_kind(g, OpKind::Upsample2d), 1);  // resize of H and W: F.interpolate
  EXPECT_EQ(count_kind(g, OpKind::Mean), 1);        // one call over two axes
  EXPECT_EQ(count_kind(g, OpKind::Linear), 2);      // Gemm transB=0 and MatMul by a 2-D weight
  EXPECT_EQ(count_kind(g, OpKind::LayerNorm), 1);
  EXPECT_EQ(count_kind(g, OpKind::Embedding), 1);
  EXPECT_EQ(count_kind(g, OpKind::MatMul), 1);   // the einsum
  EXPECT_EQ(count_kind(g, OpKind::Permute), 1);  // its second operand, [b,k,j]
  EXPECT_EQ(count_kind(g, OpKind::Sum), 1);
  const Op* clip = find_kind(g, OpKind::Hardtanh);
  EXPECT_EQ(clip->attrs.scalar, 0.0);
  EXPECT_EQ(clip->attrs.scalar2, 6.0);
  EXPECT_EQ(g.parameter_count(), 8 * 27 + 8 + 8 * 6 + 6 + 12 + 20 * 6 + 30);
}

// x[:, [0, 2]]: an index copy whose indices are a constant materialized as a tensor (the fuzzer
// found a dangling reference to the data's shape here once the builder grew its tensor list).
TEST(OnnxImport, GatherWithConstantIndexList) {
  OnnxModel m;
  m.input("x", {std::string("batch"), int64_t{5}, int64_t{4}});
  m.constant("idx", OnnxModel::int64s({0, 2}));
  m.node("Gather", {"x", "idx"}, {"y"}, "index").i("axis", 1);
  m.output("y");
  Graph g = import_ok(m, batch_options(3));
  const Op* op = find_kind(g, OpKind::Opaque);
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(g.tensor(g.outputs[0]).shape, (std::vector<int64_t>{3, 2, 4}));
}

TEST(OnnxImport, LooksLikeOnnxPath) {
  EXPECT_TRUE(looks_like_onnx_path("model.onnx"));
  EXPECT_TRUE(looks_like_onnx_path("dir/Model.ONNX"));
  EXPECT_FALSE(looks_like_onnx_path("resnet50"));
  EXPECT_FALSE(looks_like_onnx_path("mlp:layers=2"));
  EXPECT_FALSE(looks_like_onnx_path(".onnx"));
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
