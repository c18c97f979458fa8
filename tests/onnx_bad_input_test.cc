// Bad ONNX input: every case is a failed Result with one line that names the file and the
// tensor, node, input or dimension at fault; none crashes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "frontends/onnx/onnx_import.h"
#include "onnx_test_models.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using onnx::TensorProto;
using testing::OnnxModel;
using testing::Weights;

OnnxImportOptions opts() {
  OnnxImportOptions o;
  o.batch = 2;
  return o;
}

// The error of importing `m`, checked to be one line that starts with the source name.
std::string error_of(const OnnxModel& m, const OnnxImportOptions& o = opts()) {
  Result<Graph> r = import_onnx_bytes(m.bytes(), o, "bad.onnx");
  if (r.ok()) return "(imported)";
  EXPECT_EQ(r.error().find('\n'), std::string::npos) << r.error();
  EXPECT_EQ(r.error().rfind("bad.onnx: ", 0), 0u) << r.error();
  return r.error();
}

#define EXPECT_ERROR_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

OnnxModel relu_model() {
  OnnxModel m;
  m.input("x", {std::string("batch"), int64_t{4}});
  m.node("Relu", {"x"}, {"y"}, "relu");
  m.output("y");
  return m;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("headroom_onnx_" + name)).string();
}

TEST(OnnxBadInput, NotAFile) {
  Result<Graph> r = import_onnx("/nonexistent/model.onnx", opts());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "/nonexistent/model.onnx: no such file");
  std::string dir = std::filesystem::temp_directory_path().string();
  r = import_onnx(dir, opts());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), dir + ": is a directory, not an ONNX file");
}

TEST(OnnxBadInput, NotProtobufOrEmpty) {
  std::string path = temp_path("text.onnx");
  std::ofstream(path) << "this is not an onnx model\n";
  Result<Graph> r = import_onnx(path, opts());
  ASSERT_FALSE(r.ok());
  EXPECT_ERROR_HAS(r.error(), "not an ONNX model");
  std::ofstream(path, std::ios::trunc).close();
  r = import_onnx(path, opts());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), path + ": the file is empty, not an ONNX model");
  std::filesystem::remove(path);
}

// Every prefix of a valid model is rejected with one line (a cut inside the graph does not parse;
// a cut between top-level fields loses the graph or the opset).
TEST(OnnxBadInput, EveryTruncationIsAnError) {
  OnnxModel m = relu_model();
  std::string bytes = m.bytes();
  ASSERT_TRUE(import_onnx_bytes(bytes, opts()).ok());
  for (size_t n = 0; n < bytes.size(); ++n) {
    Result<Graph> r = import_onnx_bytes(std::string_view(bytes).substr(0, n), opts(), "cut.onnx");
    ASSERT_FALSE(r.ok()) << "prefix of " << n << " bytes imported";
    EXPECT_EQ(r.error().find('\n'), std::string::npos) << r.error();
  }
}

TEST(OnnxBadInput, Cycle) {
  OnnxModel m;
  m.input("x", {std::string("batch"), int64_t{4}});
  m.node("Add", {"x", "b"}, {"a"}, "A");
  m.node("Relu", {"a"}, {"b"}, "B");
  m.output("b");
  EXPECT_EQ(error_of(m), "bad.onnx: the graph has a cycle through nodes 'A', 'B'");
}

TEST(OnnxBadInput, TensorUsedBeforeProduced) {
  OnnxModel m;
  m.input("x", {std::string("batch"), int64_t{4}});
  m.node("Sigmoid", {"y"}, {"z"}, "sig");
  m.node("Relu", {"x"}, {"y"}, "relu");
  m.output("z");
  EXPECT_EQ(error_of(m),
            "bad.onnx: node 'sig' (Sigmoid) reads 'y' before node 'relu' (Relu) produces it (nodes "
            "must be in "
            "topological order)");
}

TEST(OnnxBadInput, MissingGraphInput) {
  OnnxModel m;
  m.input("x", {std::string("batch"), int64_t{4}});
  m.node("Add", {"x", "ghost"}, {"y"}, "add");
  m.output("y");
  EXPECT_EQ(error_of(m),
            "bad.onnx: node 'add' (Add) reads 'ghost', which is not a graph input, an initializer "
            "or any node's "
            "output (a missing graph input?)");
  OnnxModel out = relu_model();
  out.output("nowhere");
  EXPECT_EQ(error_of(out),
            "bad.onnx: graph output 'nowhere' is not produced by any node, input or initializer");
}

TEST(OnnxBadInput, DefinedTwice) {
  OnnxModel m = relu_model();
  m.node("Sigmoid", {"x"}, {"y"}, "sig");
  EXPECT_EQ(
      error_of(m),
      "bad.onnx: tensor 'y' is defined twice: by node 'relu' (Relu) and by node 'sig' (Sigmoid)");
}

TEST(OnnxBadInput, MissingShape) {
  OnnxModel m;
  m.input_without_shape("x");
  m.node("Relu", {"x"}, {"y"}, "relu");
  m.output("y");
  EXPECT_EQ(error_of(m),
            "bad.onnx: graph input 'x' has no shape (export with input shapes, or add them with "
            "onnx tools)");
}

TEST(OnnxBadInput, ContradictoryShapes) {
  OnnxModel m = relu_model();
  m.value_info("y", {int64_t{2}, int64_t{5}});
  EXPECT_EQ(error_of(m), "bad.onnx: contradictory shapes for 'y': [2,5] and [2,4]");
  // A declared output shape that disagrees with the computation.
  OnnxModel o;
  o.input("x", {std::string("batch"), int64_t{4}});
  o.node("Relu", {"x"}, {"y"}, "relu");
  auto* out = o.proto().mutable_graph()->add_output();
  out->set_name("y");
  OnnxModel::set_dims(out->mutable_type(), TensorProto::FLOAT, {int64_t{2}, int64_t{3}});
  EXPECT_ERROR_HAS(error_of(o), "contradictory shapes");
}

TEST(OnnxBadInput, NegativeDims) {
  OnnxModel m;
  m.input("x", {std::string("batch"), int64_t{-3}});
  m.node("Relu", {"x"}, {"y"});
  m.output("y");
  EXPECT_EQ(error_of(m), "bad.onnx: graph input 'x' dimension 1 is negative (-3)");
  OnnxModel w;
  w.input("x", {std::string("batch"), int64_t{4}});
  w.initializer("w", {4, -2}, Weights::ExternalMissing);
  w.node("MatMul", {"x", "w"}, {"y"});
  w.output("y");
  EXPECT_EQ(error_of(w), "bad.onnx: initializer 'w' has a negative dimension [4,-2]");
}

TEST(OnnxBadInput, OverflowingDims) {
  OnnxModel m;
  m.input("x", {std::string("batch"), int64_t{4}});
  m.initializer("w", {4, int64_t{1} << 40, int64_t{1} << 40}, Weights::ExternalMissing);
  m.node("MatMul", {"x", "w"}, {"y"});
  m.output("y");
  EXPECT_ERROR_HAS(error_of(m), "size overflows 64 bits");
  OnnxModel big = relu_model();
  OnnxImportOptions o = opts();
  o.batch = int64_t{1} << 62;
  EXPECT_ERROR_HAS(error_of(big, o), "size overflows 64 bits");
}

TEST(OnnxBadInput, UnsupportedOpsAreListedWithCounts) {
  OnnxModel m;
  m.input("x", {std::string("batch"), int64_t{4}});
  m.node("Det", {"x"}, {"a"});
  m.node("Det", {"x"}, {"b"});
  m.node("Unique", {"x"}, {"c"});
  m.output("a");
  EXPECT_EQ(error_of(m),
            "bad.onnx: unsupported ONNX ops: Det x2, Unique x1 (allow unknown ops to treat them "
            "as elementwise)");
}

TEST(OnnxBadInput, SchemaAndAttributes) {
  OnnxModel m;
  m.input("x", {std::string("batch"), int64_t{4}});
  m.node("Relu", {"x", "x"}, {"y"}, "relu");
  m.output("y");
  EXPECT_ERROR_HAS(error_of(m),
                   "bad.onnx: node 'relu' (Relu) does not match its ONNX schema (opset 13)");
  OnnxModel c;
  c.input("x", {std::string("batch"), int64_t{3}, int64_t{8}, int64_t{8}});
  c.initializer("w", {4, 3, 3, 3});
  c.node("Conv", {"x", "w"}, {"y"}, "conv").i("pads", 1);
  c.output("y");
  EXPECT_ERROR_HAS(error_of(c), "bad.onnx: node 'conv' (Conv) does not match its ONNX schema");
}

TEST(OnnxBadInput, NoOpsetOrNoNodes) {
  OnnxModel m = relu_model();
  m.proto().clear_opset_import();
  EXPECT_EQ(error_of(m),
            "bad.onnx: the model imports no opset of the default ONNX domain (opset_import)");
  OnnxModel e;
  e.input("x", {int64_t{2}});
  e.output("x");
  EXPECT_EQ(error_of(e), "bad.onnx: the graph has no nodes");
}

TEST(OnnxBadInput, WrongLayerGeometry) {
  OnnxModel m;
  m.input("x", {std::string("batch"), int64_t{3}, int64_t{2}, int64_t{2}});
  m.initializer("w", {4, 3, 5, 5});
  m.node("Conv", {"x", "w"}, {"y"}, "conv");
  m.output("y");
  EXPECT_ERROR_HAS(error_of(m), "bad.onnx: node 'conv' (Conv): ");
  OnnxModel g;
  g.input("x", {std::string("batch"), int64_t{3}});
  g.initializer("fc.weight", {5, 4}).initializer("fc.bias", {5});
  g.node("Gemm", {"x", "fc.weight", "fc.bias"}, {"y"}, "fc").i("transB", 1);
  g.output("y");
  EXPECT_ERROR_HAS(error_of(g), "bad.onnx: node 'fc' (Gemm): ");
}

TEST(OnnxBadInput, ShapeFromData) {
  OnnxModel m;
  m.input("x", {std::string("batch"), int64_t{4}});
  m.input("shape", {int64_t{2}}, TensorProto::INT64);
  m.node("Reshape", {"x", "shape"}, {"y"}, "view");
  m.output("y");
  EXPECT_EQ(
      error_of(m),
      "bad.onnx: node 'view' (Reshape): input 'shape' ('shape') is not a compile-time constant");
}

TEST(OnnxBadInput, InlineDataContradictsDims) {
  OnnxModel m;
  m.input("x", {std::string("batch"), int64_t{4}});
  m.initializer("w", {4, 4});
  m.proto().mutable_graph()->mutable_initializer(0)->mutable_raw_data()->resize(10);
  m.node("MatMul", {"x", "w"}, {"y"});
  m.output("y");
  EXPECT_EQ(error_of(m),
            "bad.onnx: initializer 'w' declares [4,4] FLOAT (64 bytes) but holds 10 bytes");
}

// Found by fuzz/onnx_import_fuzz.cc: ONNX 1.12's shape inference reads a constant input's values
// without checking the tensor holds them (Range dereferenced an empty INT64 Constant whose value
// sat in double_data), so every Constant must hold all of its values.
TEST(OnnxBadInput, ConstantWithoutItsValues) {
  OnnxModel m;
  m.input("x", {std::string("batch"), int64_t{4}});
  TensorProto bad;
  bad.set_data_type(TensorProto::INT64);
  bad.add_double_data(1.0);
  m.constant("start", OnnxModel::int64s({0}, true));
  m.constant("limit", OnnxModel::int64s({3}, true));
  m.constant("delta", bad);
  m.node("Range", {"start", "limit", "delta"}, {"r"}, "range");
  m.node("Relu", {"x"}, {"y"});
  m.output("y");
  EXPECT_EQ(error_of(m),
            "bad.onnx: node 'Constant_3' (Constant) attribute 'value' does not hold its 1 values");
}

// Names are arbitrary bytes: a NUL is rejected (it would cut the message short), other control
// characters are escaped so the message stays one line.
TEST(OnnxBadInput, NamesWithControlBytes) {
  OnnxModel m = relu_model();
  m.proto().mutable_graph()->mutable_node(0)->set_output(0, std::string("y\0z", 3));
  m.proto().mutable_graph()->mutable_output(0)->set_name(std::string("y\0z", 3));
  EXPECT_EQ(error_of(m), "bad.onnx: a tensor name contains a NUL byte");
  OnnxModel c = relu_model();
  c.proto().mutable_graph()->mutable_node(0)->set_op_type("Re\nlu");
  EXPECT_EQ(error_of(c),
            "bad.onnx: unsupported ONNX op: Re\\x0alu x1 (allow unknown ops to treat them as "
            "elementwise)");
}

// Found by the fuzzer: constants of kinds ONNX forbids together (an int64 Concat of a float, a
// complex tensor) fold without reading past their values.
TEST(OnnxBadInput, MixedConstantKinds) {
  OnnxModel m;
  m.input("x", {std::string("batch"), int64_t{2}, int64_t{3}});
  m.constant("a", OnnxModel::int64s({2}));
  TensorProto f;
  f.set_data_type(TensorProto::FLOAT);
  f.add_dims(1);
  f.add_float_data(3.0f);
  m.constant("b", f);
  m.node("Concat", {"a", "b"}, {"shape"}).i("axis", 0);
  m.node("Reshape", {"x", "shape"}, {"y"}, "view");
  m.output("y");
  Result<Graph> r = import_onnx_bytes(m.bytes(), opts(), "bad.onnx");
  if (!r.ok()) {
    EXPECT_EQ(r.error().find('\n'), std::string::npos);
  }
  TensorProto c;
  c.set_data_type(TensorProto::COMPLEX64);
  c.add_dims(1);
  c.set_raw_data(std::string(8, '\0'));
  OnnxModel z;
  z.input("x", {std::string("batch"), int64_t{6}});
  z.constant("s", c);
  z.node("Reshape", {"x", "s"}, {"y"}, "view");
  z.output("y");
  EXPECT_ERROR_HAS(error_of(z), "bad.onnx: node 'view' (Reshape): ");
}

// Found by the fuzzer: ONNX 1.12's convolution shape inference indexed past its attributes when
// the weight's kernel rank and the input's rank disagree.
TEST(OnnxBadInput, ConvolutionRanksDisagree) {
  OnnxModel m;
  m.input("x", {std::string("batch"), int64_t{8}});
  m.initializer("w", {4, 3, 3, 3});
  m.node("Conv", {"x", "w"}, {"y"}, "conv").ints("pads", {1, 1, 1, 1});
  m.output("y");
  EXPECT_ERROR_HAS(error_of(m), "bad.onnx: node 'conv' (Conv): ");
  OnnxModel r;  // a computed weight: inference skips the node
  r.input("x", {std::string("batch"), int64_t{8}});
  r.input("w", {int64_t{4}, int64_t{3}, int64_t{3}, int64_t{3}});
  r.node("Relu", {"w"}, {"w2"});
  r.node("Conv", {"x", "w2"}, {"y"}, "conv");
  r.output("y");
  EXPECT_ERROR_HAS(error_of(r), "bad.onnx: node 'conv' (Conv): ");
}

// ONNX's shape inference divides by `strides` (and DepthToSpace's `blocksize`) without checking:
// a 115-byte model with strides 0 killed the process with SIGFPE before headroom saw it. Window,
// group, block, scale and axis attributes are now checked before inference runs.
TEST(OnnxBadInput, ZeroStridesIsAnErrorNotSigfpe) {
  auto conv = [](const char* op, const std::vector<int64_t>& strides) {
    OnnxModel m;
    m.input("x", {std::string("batch"), int64_t{3}, int64_t{8}, int64_t{8}});
    m.initializer("w", {4, 3, 3, 3});
    if (std::string(op) == "Conv" || std::string(op) == "ConvTranspose") {
      m.node(op, {"x", "w"}, {"y"}, "conv").ints("strides", strides);
    } else {
      m.node(op, {"x"}, {"y"}, "conv").ints("kernel_shape", {3, 3}).ints("strides", strides);
    }
    m.output("y");
    return m;
  };
  for (const char* op : {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool"}) {
    EXPECT_EQ(error_of(conv(op, {0, 1})),
              std::string("bad.onnx: node 'conv' (") + op +
                  ") attribute 'strides' [0,1] holds 0; each value must be in [1, 2147483648]");
  }
  EXPECT_ERROR_HAS(error_of(conv("Conv", {-1, 1})), "attribute 'strides' [-1,1] holds -1");
  EXPECT_ERROR_HAS(error_of(conv("MaxPool", {1, 1, 1})),
                   "attribute 'strides' [1,1,1] has 3 values, expected 2 (one per spatial axis)");
  EXPECT_ERROR_HAS(error_of(conv("Conv", {int64_t{1} << 40, 1})), "attribute 'strides'");

  OnnxModel dz = conv("Conv", {0, 0});
  dz.proto().mutable_graph()->mutable_node(0)->mutable_attribute(0)->set_name("dilations");
  EXPECT_ERROR_HAS(error_of(dz), "bad.onnx: node 'conv' (Conv) attribute 'dilations' [0,0] holds 0");

  OnnxModel p;
  p.input("x", {std::string("batch"), int64_t{3}, int64_t{8}, int64_t{8}});
  p.node("MaxPool", {"x"}, {"y"}, "pool").ints("kernel_shape", {3, 3}).ints("pads", {1, 1});
  p.output("y");
  EXPECT_ERROR_HAS(error_of(p), "bad.onnx: node 'pool' (MaxPool) attribute 'pads' [1,1] has 2 values, expected 4");
  OnnxModel neg;
  neg.input("x", {std::string("batch"), int64_t{3}, int64_t{8}, int64_t{8}});
  neg.node("MaxPool", {"x"}, {"y"}, "pool").ints("kernel_shape", {3, 3}).ints("pads", {0, -1, 0, 0});
  neg.output("y");
  EXPECT_ERROR_HAS(error_of(neg), "attribute 'pads' [0,-1,0,0] holds -1");

  OnnxModel g;
  g.input("x", {std::string("batch"), int64_t{4}, int64_t{8}, int64_t{8}});
  g.initializer("w", {4, 4, 3, 3});
  g.node("Conv", {"x", "w"}, {"y"}, "conv").i("group", 0);
  g.output("y");
  EXPECT_EQ(error_of(g), "bad.onnx: node 'conv' (Conv) attribute 'group' is 0; it must be in [1, 2147483648]");

  OnnxModel b;
  b.input("x", {std::string("batch"), int64_t{4}, int64_t{8}, int64_t{8}});
  b.node("DepthToSpace", {"x"}, {"y"}, "d2s").i("blocksize", 0);
  b.output("y");
  EXPECT_ERROR_HAS(error_of(b), "bad.onnx: node 'd2s' (DepthToSpace) attribute 'blocksize' is 0");

  OnnxModel a;
  a.input("x", {std::string("batch"), int64_t{4}});
  a.node("ReduceMean", {"x"}, {"y"}, "sum").ints("axes", {1, 1});
  a.output("y");
  EXPECT_ERROR_HAS(error_of(a), "bad.onnx: node 'sum' (ReduceMean) attribute 'axes' [1,1] repeats axis 1");
  OnnxModel t;
  t.input("x", {std::string("batch"), int64_t{4}});
  t.node("Transpose", {"x"}, {"y"}, "t").ints("perm", {0, 1000000});
  t.output("y");
  EXPECT_ERROR_HAS(error_of(t), "bad.onnx: node 't' (Transpose) attribute 'perm' [0,1000000] holds axis 1000000, out of range");

  OnnxModel u(7);
  u.input("x", {std::string("batch"), int64_t{4}, int64_t{8}, int64_t{8}});
  auto* n = u.proto().mutable_graph()->add_node();
  n->set_op_type("Upsample");
  n->set_name("up");
  n->add_input("x");
  n->add_output("y");
  auto* sc = n->add_attribute();
  sc->set_name("scales");
  sc->set_type(onnx::AttributeProto::FLOATS);
  for (float f : {1.0f, 1.0f, 0.0f, 2.0f}) sc->add_floats(f);
  u.output("y");
  EXPECT_ERROR_HAS(error_of(u), "bad.onnx: node 'up' (Upsample) attribute 'scales' holds 0");
}

TEST(OnnxBadInput, BadOptions) {
  OnnxImportOptions o = opts();
  o.batch = 0;
  EXPECT_EQ(error_of(relu_model(), o), "bad.onnx: batch must be positive, got 0");
  o = opts();
  o.dims["batch"] = -1;
  EXPECT_EQ(error_of(relu_model(), o), "bad.onnx: --dim batch=-1 must be positive");
  o = opts();
  o.loss_output = "logits";
  EXPECT_EQ(error_of(relu_model(), o), "bad.onnx: loss output 'logits' is not a graph output");
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
