// GraphBuilder methods added for the transformer zoo: layers with existing parameters, addmm,
// layout-independent views, reshape, and the untracked (Opaque) calls on masks and positions.
#include <gtest/gtest.h>

#include <stdexcept>

#include "ir/builder.h"
#include "util/error.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

TEST(BuilderTransformerOps, UnflattenViewsANonContiguousSlice) {
  GraphBuilder b("t");
  TensorId x = b.input("x", {2, 8, 12}, DType::F32);
  TensorId q = b.slice("q", x, 2, 0, 4);  // a slice of the last dimension: not contiguous
  EXPECT_FALSE(b.is_contiguous(q));
  EXPECT_THROW(b.view("v", q, {2, 8, 2, 2}), InputError);
  TensorId h = b.unflatten("h", q, -1, {2, -1});
  EXPECT_EQ(b.shape(h), (std::vector<int64_t>{2, 8, 2, 2}));
  EXPECT_FALSE(b.is_contiguous(h));
  EXPECT_EQ(b.tensor(h).alias_of, q);
  EXPECT_THROW(b.unflatten("bad", q, -1, {3, 2}), InputError);
}

TEST(BuilderTransformerOps, ReshapeCopiesOnlyNonContiguousTensors) {
  GraphBuilder b("t");
  TensorId x = b.input("x", {2, 3, 4}, DType::F32);
  TensorId v = b.reshape("r", x, {6, 4});
  EXPECT_EQ(b.tensor(v).alias_of, x);  // a view
  TensorId t = b.transpose("t", x, 1, 2);
  TensorId c = b.reshape("rt", t, {2, 12});
  Graph g = b.finish();
  const Tensor& out = g.tensor(c);
  ASSERT_NE(out.alias_of, kNone);
  EXPECT_EQ(g.op(g.tensor(out.alias_of).producer).kind, OpKind::Contiguous);  // copy, then view
}

TEST(BuilderTransformerOps, SqueezeAndUnsqueezeKeepLayout) {
  GraphBuilder b("t");
  TensorId x = b.input("x", {1, 1, 5, 4}, DType::F32);
  TensorId s = b.squeeze("s", b.squeeze("s", x, 1), 0);
  EXPECT_EQ(b.shape(s), (std::vector<int64_t>{5, 4}));
  EXPECT_EQ(b.shape(b.unsqueeze("u", s, -1)), (std::vector<int64_t>{5, 4, 1}));
  EXPECT_THROW(b.squeeze("bad", s, 0), InputError);
}

TEST(BuilderTransformerOps, AddmmUsesAnInOutWeight) {
  GraphBuilder b("t");
  TensorId x = b.input("x", {6, 4}, DType::F32);
  TensorId w = b.parameter("c.weight", {4, 10});
  TensorId bias = b.parameter("c.bias", {10});
  TensorId y = b.addmm("c", bias, x, w);
  EXPECT_EQ(b.shape(y), (std::vector<int64_t>{6, 10}));
  EXPECT_THROW(b.addmm("bad", bias, x, b.parameter("d.weight", {10, 4})), InputError);
  Graph g = b.finish();
  const Op& op = g.op(g.tensor(y).producer);
  EXPECT_EQ(op.kind, OpKind::Linear);
  EXPECT_EQ(op.inputs, (std::vector<TensorId>{x, w, bias}));
  EXPECT_EQ(op.flops, 2 * 6 * 4 * 10);
}

TEST(BuilderTransformerOps, LayersWithExistingParameters) {
  GraphBuilder b("t");
  TensorId w = b.parameter("emb.weight", {100, 8});
  TensorId ids = b.input("ids", {2, 5}, DType::I64);
  TensorId e = b.embedding_with("emb", ids, w);
  EXPECT_EQ(b.shape(e), (std::vector<int64_t>{2, 5, 8}));
  TensorId lw = b.parameter("ln.weight", {8});
  TensorId lb = b.parameter("ln.bias", {8});
  EXPECT_EQ(b.shape(b.layer_norm_with("ln", e, lw, lb)), (std::vector<int64_t>{2, 5, 8}));
  EXPECT_THROW(b.layer_norm_with("bad", e, b.parameter("x.weight", {7})), InputError);
}

TEST(BuilderTransformerOps, UntrackedCalls) {
  GraphBuilder b("t");
  TensorId ar = b.factory("arange", {5}, DType::I64);
  TensorId col = b.view("col", b.add_scalar("plus1", ar, 1), {5, 1});
  TensorId lt = b.compare("lt", ar, col);
  EXPECT_EQ(b.shape(lt), (std::vector<int64_t>{5, 5}));
  EXPECT_EQ(b.tensor(lt).dtype, DType::Bool);
  TensorId full = b.factory("full", {5, 5}, DType::F32);
  TensorId filled = b.masked_fill_("fill_", full, lt, 0.0);
  EXPECT_EQ(b.tensor(filled).alias_of, full);
  TensorId inv = b.rsub_scalar("rsub", filled, 1.0);
  TensorId m = b.masked_fill("fill", inv, b.cast("to_bool", inv, DType::Bool), -1e30);
  EXPECT_EQ(b.shape(m), (std::vector<int64_t>{5, 5}));
  TensorId table = b.factory("table", {8, 4}, DType::F32);
  TensorId idx = b.input("pos", {1, 5}, DType::I64);
  EXPECT_EQ(b.shape(b.index("gather", table, idx)), (std::vector<int64_t>{1, 5, 4}));
  Graph g = b.finish();
  EXPECT_EQ(g.op(g.tensor(m).producer).kind, OpKind::Opaque);
}

TEST(BuilderTransformerOps, UntrackedCallsRejectTensorsComputedFromParameters) {
  GraphBuilder b("t");
  TensorId x = b.input("x", {2, 4}, DType::F32);
  TensorId y = b.linear("fc", x, 4);
  EXPECT_NO_THROW(b.rsub_scalar("ok", x, 1.0));
  EXPECT_THROW(b.rsub_scalar("bad", b.relu("r", y, false), 1.0), std::logic_error);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
