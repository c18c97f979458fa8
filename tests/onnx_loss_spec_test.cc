// --loss for ONNX models as an expression (src/frontends/onnx_losses.h): per-pixel,
// per-token and pointwise losses on named or indexed graph outputs, weighted sums over several
// outputs, `none` for an export that computes its own loss, and the standalone
// NegativeLogLikelihoodLoss node. Each loss is the builder call the built-in models' losses make
// (the bytes of those calls are pinned in loss_rules_test.cc); these tests pin which calls, in
// which order, on which outputs, with which targets.
#include <gtest/gtest.h>

#include <utility>

#include "frontends/onnx/onnx_import.h"
#include "frontends/onnx_losses.h"
#include "onnx_test_models.h"
#include "util/error.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::batch_options;
using testing::OnnxModel;

// x [batch,3,4,4] -> 1x1 convolutions to "out" and "aux" [batch,5,4,4] (a segmentation head
// and its auxiliary head).
OnnxModel two_heads() {
  OnnxModel m;
  m.input("x", {"batch", 3, 4, 4});
  m.initializer("head.weight", {5, 3, 1, 1});
  m.initializer("aux.weight", {5, 3, 1, 1});
  m.node("Conv", {"x", "head.weight"}, {"out"});
  m.node("Conv", {"x", "aux.weight"}, {"aux"});
  m.output("out");
  m.output("aux");
  return m;
}

Result<Graph> import_with(const OnnxModel& m, const std::string& loss, int64_t batch = 2) {
  OnnxImportOptions o = batch_options(batch);
  o.loss_spec = parse_onnx_loss_spec(loss);
  return import_onnx_bytes(m.bytes(), o, "m.onnx");
}

std::vector<OpKind> loss_kinds(const Graph& g) {
  std::vector<OpKind> k;
  for (const Op& op : g.ops) {
    if (op.stage == OpStage::Loss) k.push_back(op.kind);
  }
  return k;
}

std::string one_line_error(const Result<Graph>& r) {
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  EXPECT_EQ(r.error().find('\n'), std::string::npos) << r.error();
  return r.error();
}

TEST(OnnxLossSpec, WeightedSumOverTwoOutputsIsThePythonExpression) {
  // loss = F.cross_entropy(out, t0) + 0.4 * F.cross_entropy(aux, t1): two per-pixel
  // cross-entropies (log_softmax + nll_loss2d each), the weight's mul, then the add.
  Result<Graph> r = import_with(two_heads(), "ce:out + 0.4*ce:aux");
  ASSERT_TRUE(r.ok()) << r.error();
  const Graph& g = r.value();
  EXPECT_EQ(loss_kinds(g), (std::vector<OpKind>{OpKind::LogSoftmax, OpKind::NllLoss, OpKind::LogSoftmax,
                                                OpKind::NllLoss, OpKind::MulScalar, OpKind::Add}));
  ASSERT_EQ(g.targets.size(), 2u);
  for (TensorId t : g.targets) {
    EXPECT_EQ(g.tensor(t).shape, (std::vector<int64_t>{2, 4, 4}));  // [N,H,W] class indices
    EXPECT_EQ(g.tensor(t).dtype, DType::I64);
  }
  // The second cross-entropy reads "aux" (by name), the first "out".
  std::vector<TensorId> softmax_inputs;
  for (const Op& op : g.ops) {
    if (op.kind == OpKind::LogSoftmax) softmax_inputs.push_back(op.inputs[0]);
  }
  EXPECT_EQ(softmax_inputs, (std::vector<TensorId>{g.outputs[0], g.outputs[1]}));
  const Op& mul = g.ops[g.ops.size() - 2];
  EXPECT_DOUBLE_EQ(mul.attrs.scalar, 0.4);
  EXPECT_EQ(g.loss, g.ops.back().outputs[0]);
  // By index, and the plain built-in name: the same calls.
  Result<Graph> idx = import_with(two_heads(), "cross-entropy:0+0.4*ce:1");
  ASSERT_TRUE(idx.ok()) << idx.error();
  EXPECT_EQ(loss_kinds(idx.value()), loss_kinds(g));
}

TEST(OnnxLossSpec, PerPixelCrossEntropyOnTheDefaultOutput) {
  // Plain `ce` takes the first floating-point output [2,5,4,4]: class dimension 1.
  Result<Graph> r = import_with(two_heads(), "ce");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(loss_kinds(r.value()), (std::vector<OpKind>{OpKind::LogSoftmax, OpKind::NllLoss}));
  EXPECT_EQ(r.value().ops[r.value().ops.size() - 2].inputs[0], r.value().outputs[0]);
}

TEST(OnnxLossSpec, PointwiseLossesTakeAFloatTargetLikeTheOutput) {
  const std::pair<const char*, OpKind> cases[] = {
      {"bce:aux", OpKind::BceWithLogitsLoss}, {"l1:aux", OpKind::L1Loss},
      {"smooth-l1:aux", OpKind::SmoothL1Loss}, {"mse:aux", OpKind::MseLoss}};
  for (const auto& [spec, kind] : cases) {
    Result<Graph> r = import_with(two_heads(), spec);
    ASSERT_TRUE(r.ok()) << spec << ": " << r.error();
    const Graph& g = r.value();
    EXPECT_EQ(loss_kinds(g), (std::vector<OpKind>{kind})) << spec;
    ASSERT_EQ(g.targets.size(), 1u);
    EXPECT_EQ(g.tensor(g.targets[0]).shape, (std::vector<int64_t>{2, 5, 4, 4})) << spec;
    EXPECT_EQ(g.tensor(g.targets[0]).dtype, DType::F32) << spec;
    EXPECT_EQ(g.ops.back().inputs[0], g.outputs[1]) << spec;
  }
}

// x [batch,seq,8] -> MatMul [8,6]: logits [batch,seq,6].
OnnxModel sequence_head() {
  OnnxModel m;
  m.input("x", {"batch", 7, 8});
  m.initializer("w", {8, 6});
  m.node("MatMul", {"x", "w"}, {"logits"});
  m.output("logits");
  return m;
}

TEST(OnnxLossSpec, PerTokenAndClassDimensionOneOnThreeDimensions) {
  // token-ce (and ce) on [2,7,6]: logits.view(-1, 6) against targets [2,7] viewed as [14].
  Result<Graph> tok = import_with(sequence_head(), "token-ce");
  ASSERT_TRUE(tok.ok()) << tok.error();
  const Graph& t = tok.value();
  EXPECT_EQ(loss_kinds(t), (std::vector<OpKind>{OpKind::View, OpKind::View, OpKind::LogSoftmax, OpKind::NllLoss}));
  EXPECT_EQ(t.tensor(t.targets.at(0)).shape, (std::vector<int64_t>{2, 7}));
  EXPECT_EQ(t.tensor(t.ops.back().inputs[0]).shape, (std::vector<int64_t>{14, 6}));
  Result<Graph> ce = import_with(sequence_head(), "ce");
  ASSERT_TRUE(ce.ok()) << ce.error();
  EXPECT_EQ(loss_kinds(ce.value()), loss_kinds(t));
  // pixel-ce on the same output: F.cross_entropy's class dimension 1 (6 positions of 7
  // classes... here C = 7, L = 6), nll_loss_nd's views to [2,7,1,6] and [2,1,6].
  Result<Graph> pix = import_with(sequence_head(), "pixel-ce");
  ASSERT_TRUE(pix.ok()) << pix.error();
  const Graph& p = pix.value();
  EXPECT_EQ(loss_kinds(p), (std::vector<OpKind>{OpKind::LogSoftmax, OpKind::View, OpKind::View, OpKind::NllLoss}));
  EXPECT_EQ(p.tensor(p.targets.at(0)).shape, (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(p.tensor(p.ops.back().inputs[0]).shape, (std::vector<int64_t>{2, 7, 1, 6}));
  // next-token: Hugging Face's shift (slices and copies) before the per-token loss.
  Result<Graph> next = import_with(sequence_head(), "next-token");
  ASSERT_TRUE(next.ok()) << next.error();
  EXPECT_EQ(next.value().tensor(next.value().ops.back().inputs[0]).shape, (std::vector<int64_t>{12, 6}));
}

TEST(OnnxLossSpec, NoneTakesTheGraphsScalarOutput) {
  // forward returns (out, loss) with loss = out.mean(): --loss none makes that output the loss;
  // nothing is attached after the graph.
  OnnxModel m = two_heads();
  m.node("ReduceMean", {"out"}, {"loss"}).i("keepdims", 0);
  m.output("loss");
  Result<Graph> r = import_with(m, "none");
  ASSERT_TRUE(r.ok()) << r.error();
  const Graph& g = r.value();
  EXPECT_TRUE(loss_kinds(g).empty());
  EXPECT_TRUE(g.targets.empty());
  EXPECT_EQ(g.loss, g.outputs.at(2));
  Result<Graph> named = import_with(m, "none:loss");
  ASSERT_TRUE(named.ok()) << named.error();
  EXPECT_EQ(named.value().loss, named.value().outputs.at(2));
  // No scalar output, or one that is not a scalar: one line each.
  EXPECT_NE(one_line_error(import_with(two_heads(), "none")).find("no floating-point scalar output"), std::string::npos);
  EXPECT_NE(one_line_error(import_with(m, "none:aux")).find("not a floating-point scalar"), std::string::npos);
  // Two scalar outputs: pick one.
  OnnxModel two = m;
  two.node("ReduceMean", {"aux"}, {"loss2"}).i("keepdims", 0);
  two.output("loss2");
  EXPECT_NE(one_line_error(import_with(two, "none")).find("none:OUTPUT"), std::string::npos);
  Result<Graph> picked = import_with(two, "none:loss2");
  ASSERT_TRUE(picked.ok()) << picked.error();
  EXPECT_EQ(picked.value().loss, picked.value().outputs.at(3));
}

TEST(OnnxLossSpec, NegativeLogLikelihoodLossIsTheGraphsLoss) {
  // nll_loss(log_softmax(x, 1), t) at [batch,4,3] scores: the model's log_softmax, then
  // nll_loss_nd's views and nll_loss2d, as the graph's own loss.
  OnnxModel m;
  m.input("x", {"batch", 4, 3});
  m.input("t", {"batch", 3}, onnx::TensorProto::INT64);
  m.node("LogSoftmax", {"x"}, {"logp"}).i("axis", 1);
  m.node("NegativeLogLikelihoodLoss", {"logp", "t"}, {"loss"}).s("reduction", "mean");
  m.output("loss");
  Result<Graph> r = import_onnx_bytes(m.bytes(), batch_options(2), "m.onnx");
  ASSERT_TRUE(r.ok()) << r.error();
  const Graph& g = r.value();
  std::vector<OpKind> kinds;
  for (const Op& op : g.ops) kinds.push_back(op.kind);
  EXPECT_EQ(kinds, (std::vector<OpKind>{OpKind::LogSoftmax, OpKind::View, OpKind::View, OpKind::NllLoss}));
  EXPECT_EQ(g.loss, g.outputs.at(0));
  // --loss none names the same loss; a loss to add does not apply.
  Result<Graph> none = import_with(m, "none");
  ASSERT_TRUE(none.ok()) << none.error();
  EXPECT_EQ(none.value().loss, none.value().outputs.at(0));
  EXPECT_NE(one_line_error(import_with(m, "mse")).find("computes its own loss (NegativeLogLikelihoodLoss)"),
            std::string::npos);
  // Class weights are not modelled.
  OnnxModel weighted;
  weighted.input("x", {"batch", 4});
  weighted.input("t", {"batch"}, onnx::TensorProto::INT64);
  weighted.initializer("w", {4});
  weighted.node("NegativeLogLikelihoodLoss", {"x", "t", "w"}, {"loss"});
  weighted.output("loss");
  EXPECT_NE(one_line_error(import_onnx_bytes(weighted.bytes(), batch_options(2), "m.onnx")).find("class weights"),
            std::string::npos);
}

TEST(OnnxLossSpec, MalformedSpecsAreOneLine) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "empty"},
      {"  ", "empty"},
      {"focal", "unknown loss 'focal'"},
      {"ce+", "empty term"},
      {"0*ce", "weight '0'"},
      {"-1*ce", "weight '-1'"},
      {"1e999*ce", "weight '1e999'"},
      {"x*ce", "weight 'x'"},
      {"ce:", "names no output"},
      {"none+ce", "cannot be combined"},
      {"ce+none", "cannot be combined"},
      {"none:", "names no output"},
  };
  for (const auto& [spec, fragment] : cases) {
    try {
      parse_onnx_loss_spec(spec);
      ADD_FAILURE() << "'" << spec << "' parsed";
    } catch (const InputError& e) {
      std::string what = e.what();
      EXPECT_NE(what.find(fragment), std::string::npos) << spec << ": " << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

TEST(OnnxLossSpec, OutputsAndShapesAreCheckedAgainstTheGraph) {
  EXPECT_NE(one_line_error(import_with(two_heads(), "ce:logits")).find("'logits' is not a graph output (outputs: out, aux)"),
            std::string::npos);
  EXPECT_NE(one_line_error(import_with(two_heads(), "ce:2")).find("out of range"), std::string::npos);
  EXPECT_NE(one_line_error(import_with(two_heads(), "token-ce")).find("token-ce needs logits"), std::string::npos);
  EXPECT_NE(one_line_error(import_with(sequence_head(), "next-token:0+l1:logits+ce:nope")).find("'nope'"),
            std::string::npos);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
