// Random tensors that model code draws by hand (tests/data/onnx/gen_random.py, torch 1.13,
// training mode, opset 13): torch.onnx spells torch.rand_like / torch.rand as RandomUniformLike,
// which the importer lowers as the factory eager runs (onnx_lower.cc, op_random_like), then the
// mask arithmetic node by node, as eager runs the Python that wrote it.
#include <gtest/gtest.h>

#include "estimate/estimate.h"
#include "frontends/onnx/onnx_import.h"
#include "frontends/zoo/losses.h"
#include "ir/builder.h"
#include "onnx_test_models.h"
#include "sgd_cuda_peak.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::sgd_cuda_peak;

const std::string kDir = std::string(HEADROOM_SOURCE_DIR) + "/tests/data/onnx/";

Graph imported(const std::string& file, int64_t batch) {
  OnnxImportOptions o;
  o.batch = batch;
  Result<Graph> g = import_onnx(kDir + file, o);
  EXPECT_TRUE(g.ok()) << g.error();
  return g.ok() ? g.value() : Graph{};
}

// Tensors of exactly `shape` that no op reads (an input never materialized leaves none).
int count_shape(const Graph& g, const std::vector<int64_t>& shape) {
  int n = 0;
  for (const Tensor& t : g.tensors) n += t.shape == shape;
  return n;
}

void finish_with_loss(GraphBuilder& b, TensorId out) {
  b.mark_output(out);
  b.begin_loss();
  b.set_loss(add_loss(b, out, LossKind::CrossEntropy, BuildConfig{}));
}

constexpr int64_t kBatch = 64;  // [64, 16] fp32: 4096 bytes, a multiple of the 512-byte rounding

// Linear(8, 16) -> h * (rand_like(h) < 0.9).to(h.dtype) / 0.9 -> Linear(16, 4), written call for
// call as eager runs it; `masked` false leaves the mask out.
Graph rand_dropout_ref(bool masked) {
  GraphBuilder b("ref");
  TensorId x = b.input("input", {kBatch, 8}, DType::F32);
  TensorId w1 = b.parameter("fc1.weight", {16, 8}), b1 = b.parameter("fc1.bias", {16});
  TensorId w2 = b.parameter("fc2.weight", {4, 16}), b2 = b.parameter("fc2.bias", {4});
  TensorId h = b.linear_with("fc1", x, w1, b1);
  if (masked) {
    TensorId r = b.factory("rand_like", {kBatch, 16}, DType::F32);
    TensorId lt = b.opaque("lt", {r}, {{{kBatch, 16}, DType::Bool}})[0];
    h = b.div_scalar("div", b.mul("mul", h, b.cast("to", lt, DType::F32)), 0.9);
  }
  finish_with_loss(b, b.linear_with("fc2", h, w2, b2));
  return b.finish();
}

TEST(OnnxRandom, RandLikeDropoutMaskIsTheEagerCalls) {
  Graph g = imported("rand_dropout.onnx", kBatch);
  // The random tensor is one [64, 16] factory; rand_like reads h's shape only.
  for (RunMode mode : {RunMode::Training, RunMode::Inference}) {
    EXPECT_EQ(sgd_cuda_peak(g, mode), sgd_cuda_peak(rand_dropout_ref(true), mode)) << static_cast<int>(mode);
  }
  // What the hand-written mask costs in inference: its peak is at the Mul, where h, the float
  // mask and h * m are live (3 x 4096 bytes; rand_like's draw and the bool mask, 4096 and 1024,
  // were freed by then); the unmasked model's is at fc2, where h and fc2's [64, 4] output are
  // (4096 + 1024). x and the parameters are the same in both: 12288 - 5120 = 7168 bytes more.
  EXPECT_EQ(sgd_cuda_peak(g, RunMode::Inference) - sgd_cuda_peak(rand_dropout_ref(false), RunMode::Inference), 7168);
}

TEST(OnnxRandom, TimmDropPathRandIsNotMaterializedTwice) {
  constexpr int64_t kB = 8;
  Graph g = imported("drop_path_rand.onnx", kB);
  // torch.rand((B, 1, 1, 1)) exports as RandomUniformLike(ConstantOfShape([B, 1, 1, 1])): the
  // zeros only carry the shape, so the one [8, 1, 1, 1] tensors are the random draw, keep + r and
  // its floor (each a 32-byte tensor in its own 512-byte block).
  EXPECT_EQ(count_shape(g, {kB, 1, 1, 1}), 3);
  EXPECT_GT(sgd_cuda_peak(g, RunMode::Training), 0);
}

TEST(OnnxRandom, RandomWithoutShapeIsOneInputError) {
  testing::OnnxModel m;
  m.input("x", {"batch", 4});
  m.node("RandomUniform", {}, {"r"});
  m.node("Add", {"x", "r"}, {"y"});
  m.output("y");
  OnnxImportOptions o;
  o.batch = 2;
  Result<Graph> r = import_onnx_bytes(m.bytes(), o, "m.onnx");
  ASSERT_FALSE(r.ok());
  // The schema check names the missing attribute before lowering (op_random's own check is a
  // second guard).
  EXPECT_NE(r.error().find("Required attribute 'shape' is missing"), std::string::npos)
      << r.error();
  EXPECT_EQ(r.error().find('\n'), std::string::npos);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
