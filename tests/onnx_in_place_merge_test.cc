// The in-place merge pattern (frontends/onnx/onnx_patterns.h): a fresh ConstantOfShape filled by
// a chain of Scatters, each the sole reader of the previous one, as torchvision's
// _onnx_merge_levels exports MultiScaleRoIAlign's per-level merge, is recorded as eager's
// `result[idx] = rows` (index_put_ into one result), compared with that eager program written
// call for call with GraphBuilder; a lone Scatter, or a chain whose result is read between
// writes, stays out of place.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "frontends/onnx/onnx_import.h"
#include "ir/builder.h"
#include "onnx_test_models.h"
#include "sgd_cuda_peak.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using onnx::TensorProto;
using testing::OnnxModel;
using testing::sgd_cuda_peak;

const std::vector<int64_t> kRows = {4, 8, 4, 4};    // one level's rows, fp32: 2,048 bytes
const std::vector<int64_t> kResult = {8, 8, 4, 4};  // the merged result, fp32: 4,096 bytes

// zeros = ConstantOfShape([8, 8, 4, 4]); level l: rows_l = Relu(x_l) [4, 8, 4, 4],
// merged_l = ScatterElements(merged_{l-1} (zeros for l = 0), index_l, rows_l, axis 0).
// `levels` links; with `peek`, the first link's output is also a graph output.
OnnxModel merge_chain(int levels, bool peek) {
  OnnxModel m;
  for (int l = 0; l < levels; ++l) {
    m.input("x" + std::to_string(l), {kRows.begin(), kRows.end()});
    m.input("index" + std::to_string(l), {kRows.begin(), kRows.end()}, TensorProto::INT64);
  }
  m.constant("shape", OnnxModel::int64s(kResult));
  m.node("ConstantOfShape", {"shape"}, {"zeros"}, "/pool/ConstantOfShape");
  std::string prev = "zeros";
  for (int l = 0; l < levels; ++l) {
    const std::string s = std::to_string(l);
    m.node("Relu", {"x" + s}, {"rows" + s}, "/pool/Relu_" + s);
    m.node("ScatterElements", {prev, "index" + s, "rows" + s}, {"merged" + s}, "/pool/Scatter_" + s)
        .i("axis", 0);
    prev = "merged" + s;
  }
  m.output(prev);
  if (peek) m.output("merged0");
  return m;
}

Graph imported(const OnnxModel& m) {
  Result<Graph> g = import_onnx_bytes(m.bytes(), OnnxImportOptions{}, "merge.onnx");
  EXPECT_TRUE(g.ok()) << g.error();
  return g.ok() ? g.value() : Graph{};
}

const Op* find_op(const Graph& g, const std::string& name) {
  for (const Op& op : g.ops) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

// Eager _multiscale_roi_align's merge: result = torch.zeros(...), then per level
// result[idx_in_level] = rows (an in-place write: the output is the result's storage).
Graph eager_twin(int levels) {
  GraphBuilder b("eager");
  std::vector<TensorId> x, index;
  for (int l = 0; l < levels; ++l) {
    x.push_back(b.input("x" + std::to_string(l), kRows, DType::F32));
    index.push_back(b.input("index" + std::to_string(l), kRows, DType::I64));
  }
  TensorId result = kNone;
  for (int l = 0; l < levels; ++l) {
    const std::string s = std::to_string(l);
    TensorId rows = b.relu("rows" + s, x[static_cast<size_t>(l)], false);
    if (result == kNone) result = b.factory("zeros", kResult, DType::F32);
    OpAttrs inplace;
    inplace.inplace = true;
    result = b.opaque("index_put_" + s, {result, index[static_cast<size_t>(l)], rows},
                      {{kResult, DType::F32}}, inplace)[0];
  }
  b.mark_output(result);
  return b.finish();
}

TEST(OnnxInPlaceMerge, AChainOfScattersIntoAFreshTensorWritesOneResult) {
  Graph g = imported(merge_chain(2, false));
  const Op* s0 = find_op(g, "/pool/Scatter_0");
  const Op* s1 = find_op(g, "/pool/Scatter_1");
  ASSERT_TRUE(s0 && s1);
  EXPECT_TRUE(s0->attrs.inplace);
  EXPECT_TRUE(s1->attrs.inplace);
  EXPECT_EQ(g.tensor(s1->outputs[0]).alias_of, s0->outputs[0]);
  EXPECT_EQ(g.tensor(s0->outputs[0]).alias_of, s0->inputs[0]);
  // Inputs x0, x1 (2 x 2,048) and index0, index1 (2 x 4,096 int64) are live throughout: 12,288.
  // In place: rows0 2,048 + zeros 4,096 = 6,144, then rows0 is freed after its write and rows1
  // joins the one result: 6,144 again. Peak 12,288 + 6,144 = 18,432. The out-of-place export
  // holds merged0 (4,096), merged1 (4,096) and rows1 (2,048) at the second write: 10,240,
  // peak 22,528 (the lone-Scatter test below shows that rule).
  EXPECT_EQ(sgd_cuda_peak(g, RunMode::Inference), 18'432);
  EXPECT_EQ(sgd_cuda_peak(g, RunMode::Inference), sgd_cuda_peak(eager_twin(2), RunMode::Inference));
  EXPECT_NE(std::find_if(g.notes.begin(), g.notes.end(),
                         [](const std::string& n) {
                           return n.find("2 Scatter merges into one fresh tensor written in place") !=
                                  std::string::npos;
                         }),
            g.notes.end());
}

TEST(OnnxInPlaceMerge, ThreeLevelsStillHoldOneResult) {
  // Inputs 3 x (2,048 + 4,096) = 18,432; at each write one result (4,096) and that level's
  // rows (2,048): peak 18,432 + 6,144 = 24,576.
  Graph g = imported(merge_chain(3, false));
  EXPECT_EQ(sgd_cuda_peak(g, RunMode::Inference), 24'576);
  EXPECT_EQ(sgd_cuda_peak(g, RunMode::Inference), sgd_cuda_peak(eager_twin(3), RunMode::Inference));
}

TEST(OnnxInPlaceMerge, ALoneScatterStaysOutOfPlace) {
  // One write is no merge chain: inputs 2,048 + 4,096 = 6,144; rows0 2,048 + zeros 4,096 +
  // merged0 4,096 = 10,240 at the Scatter: peak 16,384.
  Graph g = imported(merge_chain(1, false));
  const Op* s0 = find_op(g, "/pool/Scatter_0");
  ASSERT_NE(s0, nullptr);
  EXPECT_FALSE(s0->attrs.inplace);
  EXPECT_EQ(g.tensor(s0->outputs[0]).alias_of, kNone);
  EXPECT_EQ(sgd_cuda_peak(g, RunMode::Inference), 16'384);
}

TEST(OnnxInPlaceMerge, AResultReadBetweenWritesStaysOutOfPlace) {
  // merged0 is a graph output too: writing level 1 into it would change what it holds, so the
  // chain stops there and neither link is in place (the pattern needs two).
  Graph g = imported(merge_chain(2, true));
  const Op* s0 = find_op(g, "/pool/Scatter_0");
  const Op* s1 = find_op(g, "/pool/Scatter_1");
  ASSERT_TRUE(s0 && s1);
  EXPECT_FALSE(s0->attrs.inplace);
  EXPECT_FALSE(s1->attrs.inplace);
  // Inputs 12,288; at the second write merged0 4,096 + rows1 2,048 + merged1 4,096 = 10,240
  // (zeros and rows0 are freed after the first): peak 22,528.
  EXPECT_EQ(sgd_cuda_peak(g, RunMode::Inference), 22'528);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
