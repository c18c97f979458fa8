// If nodes whose condition folds once the symbolic dimensions are bound (onnx_control_flow.h):
// torch.onnx's `x.squeeze(d)` of a dimension it cannot prove is 1, If(Shape(x)[d] == 1, Squeeze,
// Identity), takes the branch PyTorch would run; a condition on runtime values is one line.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "estimate/estimate.h"
#include "frontends/onnx/onnx_import.h"
#include "onnx_test_models.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using onnx::TensorProto;
using testing::batch_options;
using testing::OnnxModel;

// then: Squeeze(x, axes=[1]) (opset 13: axes is an input); else: Identity(x).
onnx::GraphProto squeeze_branch() {
  OnnxModel b;
  b.constant("axes1", OnnxModel::int64s({1}));
  b.node("Squeeze", {"x", "axes1"}, {"sq"}, "/branch/Squeeze");
  b.output("sq");
  return b.proto().graph();
}
onnx::GraphProto identity_branch() {
  OnnxModel b;
  b.node("Identity", {"x"}, {"id"}, "/branch/Identity");
  b.output("id");
  return b.proto().graph();
}

// x [batch, d1, 8]; c = Shape(x)[1] == 1; s = If(c, squeeze, identity); y = Relu(s).
OnnxModel squeeze_if(const std::vector<testing::Dim>& x_dims) {
  OnnxModel m;
  m.input("x", x_dims);
  m.node("Shape", {"x"}, {"shape"});
  m.constant("one_idx", OnnxModel::int64s({1}, true));
  m.node("Gather", {"shape", "one_idx"}, {"d1"}).i("axis", 0);
  m.constant("one", OnnxModel::int64s({1}, true));
  m.node("Equal", {"d1", "one"}, {"cond"});
  m.node("If", {"cond"}, {"s"}, "/attn/If")
      .graph("then_branch", squeeze_branch())
      .graph("else_branch", identity_branch());
  m.node("Relu", {"s"}, {"y"});
  m.output("y");
  return m;
}

Result<Graph> import_bytes(const OnnxModel& m, int64_t batch,
                           std::map<std::string, int64_t> dims = {}) {
  OnnxImportOptions o = batch_options(batch);
  o.dims = std::move(dims);
  return import_onnx_bytes(m.bytes(), o, "m.onnx");
}

std::vector<int64_t> output_shape(const Graph& g) { return g.tensor(g.outputs[0]).shape; }

SimResult run(const Graph& g, RunMode mode) {
  EstimateOptions o;
  o.mode = mode;
  o.optimizer = OptimizerKind::Sgd;
  o.device = "cpu";
  return simulate(build_program(g, schedule_options(o)));
}

TEST(OnnxControlFlow, SqueezeIfTakesThenBranchWhenTheDimensionIsOne) {
  Result<Graph> r = import_bytes(squeeze_if({"batch", 1, 8}), 3);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(output_shape(r.value()), (std::vector<int64_t>{3, 8}));
}

TEST(OnnxControlFlow, SqueezeIfTakesElseBranchForABoundDimensionAboveOne) {
  // d1 is symbolic: the condition folds only once --dim d1=4 binds it.
  Result<Graph> r = import_bytes(squeeze_if({"batch", "d1", 8}), 3, {{"d1", 4}});
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(output_shape(r.value()), (std::vector<int64_t>{3, 4, 8}));
  Result<Graph> one = import_bytes(squeeze_if({"batch", "d1", 8}), 3, {{"d1", 1}});
  ASSERT_TRUE(one.ok()) << one.error();
  EXPECT_EQ(output_shape(one.value()), (std::vector<int64_t>{3, 8}));
}

// The taken branch simulates exactly as the file written without the If.
TEST(OnnxControlFlow, SameSimulationAsTheBranchWrittenOut) {
  OnnxModel plain;
  plain.input("x", {"batch", 1, 8});
  plain.constant("axes1", OnnxModel::int64s({1}));
  plain.node("Squeeze", {"x", "axes1"}, {"s"});
  plain.node("Relu", {"s"}, {"y"});
  plain.output("y");
  Result<Graph> with_if = import_bytes(squeeze_if({"batch", 1, 8}), 5);
  Result<Graph> without = import_bytes(plain, 5);
  ASSERT_TRUE(with_if.ok()) << with_if.error();
  ASSERT_TRUE(without.ok()) << without.error();
  ASSERT_EQ(with_if.value().ops.size(), without.value().ops.size());
  for (size_t i = 0; i < without.value().ops.size(); ++i)
    EXPECT_EQ(with_if.value().ops[i].kind, without.value().ops[i].kind) << i;
  SimResult a = run(with_if.value(), RunMode::Inference);
  SimResult b = run(without.value(), RunMode::Inference);
  // x [5,1,8] float = 5*1*8*4 = 160 bytes; the squeeze is a view of it; relu's output [5,8] =
  // 160 bytes; both live at the relu: 320 bytes (the CPU profile adds nothing at these sizes),
  // the same for both files.
  EXPECT_EQ(a.peak.bytes, b.peak.bytes);
  EXPECT_EQ(a.peak.bytes, 320);
}

TEST(OnnxControlFlow, ConditionOnTheBatchFollowsTheBoundBatch) {
  // c = Shape(x)[0] == 1 (a branch on the batch size): batch 1 takes the squeeze of axis 1,
  // batch 2 the identity.
  OnnxModel m;
  m.input("x", {"batch", 1, 8});
  m.node("Shape", {"x"}, {"shape"});
  m.constant("zero_idx", OnnxModel::int64s({0}, true));
  m.node("Gather", {"shape", "zero_idx"}, {"b"}).i("axis", 0);
  m.constant("one", OnnxModel::int64s({1}, true));
  m.node("Equal", {"b", "one"}, {"cond"});
  m.node("If", {"cond"}, {"y"}, "/If")
      .graph("then_branch", squeeze_branch())
      .graph("else_branch", identity_branch());
  m.output("y");
  Result<Graph> b1 = import_bytes(m, 1);
  Result<Graph> b2 = import_bytes(m, 2);
  ASSERT_TRUE(b1.ok()) << b1.error();
  ASSERT_TRUE(b2.ok()) << b2.error();
  EXPECT_EQ(output_shape(b1.value()), (std::vector<int64_t>{1, 8}));
  EXPECT_EQ(output_shape(b2.value()), (std::vector<int64_t>{2, 1, 8}));
}

TEST(OnnxControlFlow, NestedIfInTheTakenBranchIsResolvedToo) {
  // then: If(cond, squeeze, identity) again (the outer scope's cond and x are visible inside).
  OnnxModel inner;
  inner.node("If", {"cond"}, {"inner_out"}, "/inner/If")
      .graph("then_branch", squeeze_branch())
      .graph("else_branch", identity_branch());
  inner.output("inner_out");
  OnnxModel m = squeeze_if({"batch", 1, 8});
  for (onnx::NodeProto& n : *m.proto().mutable_graph()->mutable_node()) {
    if (n.op_type() != "If") continue;
    *n.mutable_attribute(0)->mutable_g() = inner.proto().graph();
  }
  Result<Graph> r = import_bytes(m, 2);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(output_shape(r.value()), (std::vector<int64_t>{2, 8}));
}

TEST(OnnxControlFlow, BranchPassingAnOuterTensorThroughBecomesIdentity) {
  // else: no node, its output is x itself; then: a branch initializer.
  OnnxModel through;
  through.output("x");
  OnnxModel init;
  init.initializer("branch_w", {2, 1, 8});
  init.output("branch_w");
  OnnxModel m = squeeze_if({"batch", "d1", 8});
  for (onnx::NodeProto& n : *m.proto().mutable_graph()->mutable_node()) {
    if (n.op_type() != "If") continue;
    *n.mutable_attribute(0)->mutable_g() = init.proto().graph();
    *n.mutable_attribute(1)->mutable_g() = through.proto().graph();
  }
  Result<Graph> other = import_bytes(m, 2, {{"d1", 3}});
  ASSERT_TRUE(other.ok()) << other.error();
  EXPECT_EQ(output_shape(other.value()), (std::vector<int64_t>{2, 3, 8}));
  Result<Graph> one = import_bytes(m, 2, {{"d1", 1}});
  ASSERT_TRUE(one.ok()) << one.error();
  EXPECT_EQ(output_shape(one.value()), (std::vector<int64_t>{2, 1, 8}));  // the initializer
}

// `if x.sum() > 0:` scripted into the graph: an If on a value known only at run time.
OnnxModel runtime_condition_model() {
  OnnxModel m;
  m.input("x", {"batch", 1, 8});
  m.node("ReduceSum", {"x"}, {"sum"}).i("keepdims", 0);
  m.constant("zero", OnnxModel::float_scalar(0.0f));
  m.node("Greater", {"sum", "zero"}, {"cond"});
  m.node("If", {"cond"}, {"y"}, "/gate/If")
      .graph("then_branch", squeeze_branch())
      .graph("else_branch", identity_branch());
  m.output("y");
  return m;
}

TEST(OnnxControlFlow, RuntimeConditionIsOneLineNamingTheNode) {
  OnnxModel m = runtime_condition_model();
  Result<Graph> r = import_bytes(m, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(),
            "m.onnx: node '/gate/If' (If): its condition 'cond' depends on runtime values and "
            "does not fold at import time (an If is imported only when its condition is shape "
            "arithmetic or constants)");
}

TEST(OnnxControlFlow, BadBranchesAreOneLine) {
  struct Case {
    const char* what;
    std::function<void(onnx::NodeProto&)> edit;
    const char* expect;
  };
  std::vector<Case> cases = {
      {"two outputs for one",
       [](onnx::NodeProto& n) {
         n.mutable_attribute(0)->mutable_g()->add_output()->set_name("sq");
       },
       "its then branch has 2 outputs for the If's 1"},
      {"unsupported op in the taken branch",
       [](onnx::NodeProto& n) {
         n.mutable_attribute(0)->mutable_g()->mutable_node(1)->set_op_type("NoSuchOp");
       },
       "unsupported ONNX op: NoSuchOp x1"},
      {"another op with a subgraph inside a branch",
       [](onnx::NodeProto& n) {
         onnx::NodeProto* op = n.mutable_attribute(1)->mutable_g()->add_node();
         op->set_op_type("WithBody");
         op->set_domain("custom");
         op->add_output("unused");
         onnx::AttributeProto* body = op->add_attribute();
         body->set_name("body");
         body->set_type(onnx::AttributeProto::GRAPH);
         body->mutable_g()->set_name("body");
       },
       "has a subgraph (control flow other than If, Loop and Scan is not supported)"},
      {"a branch reading an undefined tensor",
       [](onnx::NodeProto& n) {
         n.mutable_attribute(0)->mutable_g()->mutable_node(1)->set_input(0, "nowhere");
       },
       "reads 'nowhere'"},
  };
  for (const Case& c : cases) {
    OnnxModel m = squeeze_if({"batch", 1, 8});
    for (onnx::NodeProto& n : *m.proto().mutable_graph()->mutable_node()) {
      if (n.op_type() == "If") c.edit(n);
    }
    Result<Graph> r = import_bytes(m, 2);
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_NE(r.error().find(c.expect), std::string::npos) << c.what << ": " << r.error();
    EXPECT_EQ(r.error().find('\n'), std::string::npos) << c.what;
  }
}

// Loop(M, "", x) with body (i, cond, v) -> (cond, v + v, Relu(v)): `for _ in range(M): outs.append(
// relu(v)); v = v + v`, the scan output stacked.
OnnxModel loop_model(const std::vector<testing::Dim>& x_dims, bool trips_from_shape,
                     int64_t trips = 3) {
  OnnxModel body;
  body.input("i", {}, TensorProto::INT64);
  body.input("cond_in", {}, TensorProto::BOOL);
  body.input_without_shape("v_in");
  body.node("Identity", {"cond_in"}, {"cond_out"});
  body.node("Add", {"v_in", "v_in"}, {"v_out"}, "/loop/Add");
  body.node("Relu", {"v_in"}, {"scan"}, "/loop/Relu");
  body.output("cond_out", TensorProto::BOOL);
  body.output("v_out");
  body.output("scan");
  OnnxModel m;
  m.input("x", x_dims);
  if (trips_from_shape) {
    m.node("Shape", {"x"}, {"shape"});
    m.constant("one_idx", OnnxModel::int64s({1}, true));
    m.node("Gather", {"shape", "one_idx"}, {"trips"}).i("axis", 0);
  } else {
    m.constant("trips", OnnxModel::int64s({trips}, true));
  }
  m.node("Loop", {"trips", "", "x"}, {"v_final", "stacked"}, "/Loop")
      .graph("body", body.proto().graph());
  m.node("Relu", {"v_final"}, {"y"});
  m.output("y");
  m.output("stacked");
  return m;
}

int count_ops(const Graph& g, OpKind kind) {
  int n = 0;
  for (const Op& op : g.ops) n += op.kind == kind;
  return n;
}

TEST(OnnxControlFlow, LoopWithAConstantTripCountUnrolls) {
  Result<Graph> r = import_bytes(loop_model({"batch", 8}, false), 2);
  ASSERT_TRUE(r.ok()) << r.error();
  const Graph& g = r.value();
  // Three iterations: three adds and three relus in the body, one relu after the loop.
  EXPECT_EQ(count_ops(g, OpKind::Add), 3);
  EXPECT_EQ(count_ops(g, OpKind::Relu), 4);
  EXPECT_EQ(g.tensor(g.outputs[0]).shape, (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(g.tensor(g.outputs[1]).shape, (std::vector<int64_t>{3, 2, 8}));  // stacked
}

// A loop body holding an If whose taken branch has its own initializer (a bias `w` [8]): every
// unrolled copy of the If brings the same `w`, which becomes one graph initializer (before the
// fix, the second copy was "defined twice").
TEST(OnnxControlFlow, LoopBodyWithANestedInitializerUnrolls) {
  OnnxModel then_b;
  then_b.initializer("w", {8});
  then_b.node("Add", {"v_in", "w"}, {"biased"}, "/loop/branch/Add");
  then_b.output("biased");
  OnnxModel else_b;
  else_b.node("Identity", {"v_in"}, {"same"}, "/loop/branch/Identity");
  else_b.output("same");
  OnnxModel body;
  body.input("i", {}, TensorProto::INT64);
  body.input("cond_in", {}, TensorProto::BOOL);
  body.input_without_shape("v_in");
  body.node("Identity", {"cond_in"}, {"cond_out"});
  body.constant("yes", OnnxModel::int64s({1}, true));
  body.node("Cast", {"yes"}, {"take"}).i("to", TensorProto::BOOL);
  body.node("If", {"take"}, {"v_out"}, "/loop/If")
      .graph("then_branch", then_b.proto().graph())
      .graph("else_branch", else_b.proto().graph());
  body.output("cond_out", TensorProto::BOOL);
  body.output("v_out");
  OnnxModel m;
  m.input("x", {"batch", 8});
  m.constant("trips", OnnxModel::int64s({3}, true));
  m.node("Loop", {"trips", "", "x"}, {"v_final"}, "/Loop").graph("body", body.proto().graph());
  m.output("v_final");
  Result<Graph> r = import_bytes(m, 2);
  ASSERT_TRUE(r.ok()) << r.error();
  const Graph& g = r.value();
  // Three iterations, each x + w; w is one [8] fp32 parameter (8 values), not three.
  EXPECT_EQ(count_ops(g, OpKind::Add), 3);
  EXPECT_EQ(g.parameter_count(), 8);
  EXPECT_EQ(g.tensor(g.outputs[0]).shape, (std::vector<int64_t>{2, 8}));
}

// torchvision's scripted mask pasting (Mask and Keypoint R-CNN): the Loop's condition input is an
// outer constant true, and the body's continue condition is Identity of that same outer tensor,
// not of its own condition input: a `for` all the same, unrolled.
TEST(OnnxControlFlow, LoopWhoseBodyPassesOnTheLoopsOwnTrueConditionUnrolls) {
  OnnxModel body;
  body.input("i", {}, TensorProto::INT64);
  body.input("cond_in", {}, TensorProto::BOOL);
  body.input_without_shape("v_in");
  body.node("Identity", {"go"}, {"cond_out"});
  body.node("Relu", {"v_in"}, {"v_out"}, "/loop/Relu");
  body.output("cond_out", TensorProto::BOOL);
  body.output("v_out");
  OnnxModel m;
  m.input("x", {"batch", 8});
  m.constant("trips", OnnxModel::int64s({4}, true));
  m.constant("one", OnnxModel::int64s({1}, true));
  m.node("Cast", {"one"}, {"go"}).i("to", TensorProto::BOOL);
  m.node("Loop", {"trips", "go", "x"}, {"v_final"}, "/Loop").graph("body", body.proto().graph());
  m.output("v_final");
  Result<Graph> r = import_bytes(m, 2);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(count_ops(r.value(), OpKind::Relu), 4);
}

TEST(OnnxControlFlow, LoopTripCountFoldsFromABoundDimension) {
  Result<Graph> r = import_bytes(loop_model({"batch", "n"}, true), 2, {{"n", 5}});
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(count_ops(r.value(), OpKind::Add), 5);
  EXPECT_EQ(r.value().tensor(r.value().outputs[1]).shape, (std::vector<int64_t>{5, 2, 5}));
}

TEST(OnnxControlFlow, LoopsThatCannotUnrollAreOneLine) {
  OnnxModel runtime = loop_model({"batch", 8}, false);
  for (onnx::NodeProto& n : *runtime.proto().mutable_graph()->mutable_node()) {
    if (n.op_type() == "Loop") n.set_input(0, "x");  // a float tensor as the trip count
  }
  Result<Graph> r = import_bytes(runtime, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("'/Loop' (Loop): its trip count 'x' does not fold at import time"),
            std::string::npos)
      << r.error();
  Result<Graph> huge = import_bytes(loop_model({"batch", 8}, false, 60000), 2);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.error().find("goes past the bound of 100000 unrolled nodes"), std::string::npos)
      << huge.error();
  Result<Graph> negative = import_bytes(loop_model({"batch", 8}, false, -1), 2);
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.error().find("its trip count 'trips' is outside [0, 100000]"),
            std::string::npos)
      << negative.error();
  OnnxModel gated = loop_model({"batch", 8}, false);
  for (onnx::NodeProto& n : *gated.proto().mutable_graph()->mutable_node()) {
    if (n.op_type() != "Loop") continue;
    onnx::NodeProto* id = n.mutable_attribute(0)->mutable_g()->mutable_node(0);
    id->set_op_type("Not");  // the body decides when to stop
  }
  Result<Graph> g = import_bytes(gated, 2);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().find("continue condition 'cond_out' depends on runtime values"),
            std::string::npos)
      << g.error();
  for (const Result<Graph>* e : {&r, &huge, &negative, &g})
    EXPECT_EQ(e->error().find('\n'), std::string::npos);
}

// Scan(h, x) over x's axis 1 with body (h, x_t) -> (h + x_t, relu(h + x_t)), the scan output
// stacked on axis 1: an RNN-style cell over a sequence of length T.
OnnxModel scan_model(const std::vector<testing::Dim>& x_dims) {
  OnnxModel body;
  body.input_without_shape("h_in");
  body.input_without_shape("x_t");
  body.node("Add", {"h_in", "x_t"}, {"h_out"}, "/cell/Add");
  body.node("Relu", {"h_out"}, {"y_t"}, "/cell/Relu");
  body.output("h_out");
  body.output("y_t");
  OnnxModel m;
  m.input("h", {"batch", 8});
  m.input("x", x_dims);
  m.node("Scan", {"h", "x"}, {"h_final", "ys"}, "/Scan")
      .graph("body", body.proto().graph())
      .i("num_scan_inputs", 1)
      .ints("scan_input_axes", {1})
      .ints("scan_output_axes", {1});
  m.output("h_final");
  m.output("ys");
  return m;
}

TEST(OnnxControlFlow, ScanOverAStaticLengthUnrolls) {
  Result<Graph> r = import_bytes(scan_model({"batch", "T", 8}), 2, {{"T", 5}});
  ASSERT_TRUE(r.ok()) << r.error();
  const Graph& g = r.value();
  EXPECT_EQ(count_ops(g, OpKind::Add), 5);
  EXPECT_EQ(count_ops(g, OpKind::Relu), 5);
  EXPECT_EQ(g.tensor(g.outputs[0]).shape, (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(g.tensor(g.outputs[1]).shape, (std::vector<int64_t>{2, 5, 8}));  // stacked on axis 1
}

TEST(OnnxControlFlow, ScansThatCannotUnrollAreOneLine) {
  OnnxModel bad_axis = scan_model({"batch", 4, 8});
  for (onnx::NodeProto& n : *bad_axis.proto().mutable_graph()->mutable_node()) {
    for (onnx::AttributeProto& a : *n.mutable_attribute()) {
      if (a.name() == "scan_input_axes") a.set_ints(0, 3);
    }
  }
  Result<Graph> r = import_bytes(bad_axis, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("'/Scan' (Scan): scan_input_axes out of range"), std::string::npos)
      << r.error();
  EXPECT_EQ(r.error().find('\n'), std::string::npos);
}

// The fuzz seeds of fuzz/corpus/gen_control_flow_seeds.py as the fuzzer runs them (batch 2): each
// imports, except the runtime condition, which is one line.
TEST(OnnxControlFlow, FuzzSeedsImportOrFailInOneLine) {
  const std::filesystem::path dir = std::filesystem::path(HEADROOM_SOURCE_DIR) / "fuzz/corpus/onnx";
  int seen = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("if_", 0) != 0 && name.rfind("loop_", 0) != 0 && name.rfind("scan_", 0) != 0)
      continue;
    ++seen;
    Result<Graph> r = import_onnx(e.path().string(), batch_options(2));
    if (name == "if_runtime_cond.onnx") {
      ASSERT_FALSE(r.ok()) << name;
      EXPECT_NE(r.error().find("depends on runtime values"), std::string::npos) << r.error();
      EXPECT_EQ(r.error().find('\n'), std::string::npos) << name;
    } else {
      EXPECT_TRUE(r.ok()) << name << ": " << r.error();
    }
  }
  EXPECT_EQ(seen, 7);
}

// validation/models.py's Llama exported in training mode (tests/data/onnx/gen_llama.py): its
// rotary embedding's cos.squeeze(1).squeeze(0) are four If nodes on Shape arithmetic.
TEST(OnnxControlFlow, ValidationLlamaExportImports) {
  const std::string path =
      std::string(HEADROOM_SOURCE_DIR) + "/tests/data/onnx/llama_if_training.onnx";
  OnnxImportOptions o = batch_options(2);
  o.dims = {{"seq", 32}};
  Result<Graph> r = import_onnx(path, o);
  ASSERT_TRUE(r.ok()) << r.error();
  // logits [batch, seq, vocab].
  EXPECT_EQ(output_shape(r.value()), (std::vector<int64_t>{2, 32, 256}));
  // Parameters: 2 x vocab x hidden (embedding, lm_head) + layers x (attention + MLP + 2 norms)
  // + the final norm, with hidden 64, 4 heads of 16, 2 kv heads, ffn 172, vocab 256:
  // attention 64*64 + 2*64*32 + 64*64 = 12288, MLP 3*64*172 = 33024, norms 2*64 = 128;
  // 2*256*64 + 2*(12288+33024+128) + 64 = 32768 + 90880 + 64 = 123712.
  EXPECT_EQ(r.value().parameter_count(), 123712);
  o.dims = {{"seq", 16}};
  Result<Graph> shorter = import_onnx(path, o);
  ASSERT_TRUE(shorter.ok()) << shorter.error();
  EXPECT_EQ(output_shape(shorter.value()), (std::vector<int64_t>{2, 16, 256}));
}

// Through the CLI: a runtime condition is a usage error (exit 2, one line, nothing on stdout);
// the Llama export estimates in both modes.
TEST(OnnxControlFlow, CliRefusesARuntimeConditionAndEstimatesTheLlama) {
  OnnxModel m = runtime_condition_model();
  const std::string path = ::testing::TempDir() + "/if_runtime_cond.onnx";
  m.save(path);
  testing::expect_usage_error("estimate " + path + " --mode infer",
                              "node '/gate/If' (If): its condition 'cond' depends on runtime");
  const std::string llama =
      std::string(HEADROOM_SOURCE_DIR) + "/tests/data/onnx/llama_if_training.onnx";
  for (const char* mode : {"infer", "train"}) {
    testing::CliRun r =
        testing::run_cli("estimate " + llama + " --dim seq=32 --mode " + mode + " --json");
    EXPECT_EQ(r.code, 0) << mode << ": " << r.err;
    EXPECT_NE(r.out.find("\"peak"), std::string::npos) << mode;
  }
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
