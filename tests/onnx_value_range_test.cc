// Sizes computed from tensor values, bounded by the ranges of those values (onnx_value_range.h,
// the "value-given sizes" rule of onnx_detection.h): torchvision's mask pasting
// (_onnx_paste_mask_in_image) in small.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <utility>
#include <string>
#include <vector>

#include "frontends/onnx/onnx_const_pass.h"
#include "frontends/onnx/onnx_import.h"
#include "frontends/onnx/onnx_model.h"
#include "frontends/onnx/onnx_value_range.h"
#include "onnx_test_models.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using onnx::TensorProto;
using testing::OnnxModel;

const Op* find_op(const Graph& g, const std::string& name) {
  for (const Op& op : g.ops) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

std::string all_notes(const Graph& g) {
  std::string s;
  for (const std::string& n : g.notes) s += n + "\n";
  return s;
}

bool has_note(const Graph& g, const std::string& fragment) {
  return all_notes(g).find(fragment) != std::string::npos;
}

// Detections of a 64x64 image: scores [4] > 0.5 select rows of boxes [4, 4] (NonZero), the
// boxes are clipped to the image as clip_boxes_to_image does (Max(b, 0), Min(b, 64)), and the
// first detection's mask [1, 1, 30, 30] is resized to its box (w = x2 - x0 + 1, h = y2 - y1 +
// 1, at least 1), then sliced from the box's top (y0) and padded with torch.zeros(y0, w).
// `clip`: false leaves the boxes unclamped (nothing bounds the size).
OnnxModel paste_mask(bool clip) {
  OnnxModel m;
  m.input("scores", {4});
  m.input("boxes", {4, 4});
  m.input("mask", {1, 1, 30, 30});
  m.constant("half", OnnxModel::float_scalar(0.5f));
  m.node("Greater", {"scores", "half"}, {"keep_mask"}, "/post/Greater");
  m.node("NonZero", {"keep_mask"}, {"keep"}, "/post/NonZero");
  m.constant("axis0", OnnxModel::int64s({0}));
  m.node("Squeeze", {"keep", "axis0"}, {"idx"}, "/post/Squeeze");
  m.node("Gather", {"boxes", "idx"}, {"kept"}, "/post/Gather").i("axis", 0);
  std::string b = "kept";
  if (clip) {
    m.constant("zero_f", OnnxModel::float_scalar(0.0f));
    m.constant("width_f", OnnxModel::float_scalar(64.0f));
    m.node("Max", {"kept", "zero_f"}, {"lo_clipped"}, "/post/Max");
    m.node("Min", {"lo_clipped", "width_f"}, {"clipped"}, "/post/Min");
    b = "clipped";
  }
  m.constant("first", OnnxModel::int64s({0}, true));
  m.node("Gather", {b, "first"}, {"box"}, "/paste/Gather").i("axis", 0);
  m.constant("c0", OnnxModel::int64s({0}, true));
  m.constant("c1", OnnxModel::int64s({1}, true));
  m.constant("c2", OnnxModel::int64s({2}, true));
  m.constant("c3", OnnxModel::int64s({3}, true));
  m.node("Gather", {"box", "c0"}, {"x0"}, "/paste/Gather_x0").i("axis", 0);
  m.node("Gather", {"box", "c1"}, {"y0"}, "/paste/Gather_y0").i("axis", 0);
  m.node("Gather", {"box", "c2"}, {"x2"}, "/paste/Gather_x2").i("axis", 0);
  m.node("Gather", {"box", "c3"}, {"y2"}, "/paste/Gather_y2").i("axis", 0);
  m.constant("one_f", OnnxModel::float_scalar(1.0f));
  m.constant("one_i", OnnxModel::int64s({1}));
  for (const std::string d : {"w", "h"}) {
    const std::string hi = d == "w" ? "x2" : "y2", lo = d == "w" ? "x0" : "y0";
    m.node("Sub", {hi, lo}, {d + "_span"}, "/paste/Sub_" + d);
    m.node("Add", {d + "_span", "one_f"}, {d + "_plus1"}, "/paste/Add_" + d);
    m.node("Cast", {d + "_plus1"}, {d + "_int"}, "/paste/Cast_" + d).i("to", TensorProto::INT64);
    m.node("Unsqueeze", {d + "_int", "axis0"}, {d + "_vec"}, "/paste/Unsqueeze_" + d);
    m.node("Concat", {d + "_vec", "one_i"}, {d + "_or_1"}, "/paste/Concat_" + d).i("axis", 0);
    m.node("ReduceMax", {d + "_or_1"}, {d + "_max"}, "/paste/ReduceMax_" + d).i("keepdims", 1);
  }
  m.constant("lead", OnnxModel::int64s({1, 1}));
  m.node("Concat", {"lead", "h_max", "w_max"}, {"sizes"}, "/paste/Concat_sizes").i("axis", 0);
  m.node("Resize", {"mask", "", "", "sizes"}, {"resized"}, "/paste/Resize").s("mode", "linear");
  m.node("Cast", {"y0"}, {"y0_int"}, "/paste/Cast_y0").i("to", TensorProto::INT64);
  m.node("Unsqueeze", {"y0_int", "axis0"}, {"y0_vec"}, "/paste/Unsqueeze_y0");
  m.constant("end", OnnxModel::int64s({1000}));
  m.constant("axis2", OnnxModel::int64s({2}));
  m.node("Slice", {"resized", "y0_vec", "end", "axis2"}, {"inside"}, "/paste/Slice");
  m.node("Concat", {"y0_vec", "w_max"}, {"zeros_shape"}, "/paste/Concat_zeros").i("axis", 0);
  m.node("ConstantOfShape", {"zeros_shape"}, {"zeros_y0"}, "/paste/ConstantOfShape");
  m.output("inside");
  m.output("zeros_y0");
  return m;
}

TEST(OnnxValueRange, MaskResizedToAClippedBoxTakesTheImageSizePlusOne) {
  Result<Graph> r = import_onnx_bytes(paste_mask(true).bytes(), OnnxImportOptions{}, "p.onnx");
  ASSERT_TRUE(r.ok()) << r.error();
  const Graph& g = r.value();
  // Coordinates in [0, 64] after the clip: w = x2 - x0 + 1 <= 64 - 0 + 1 = 65 (Cast truncates
  // 65.0 to 65), max(w, 1) <= 65; h the same. Resize to [1, 1, 65, 65] fp32: 65 * 65 * 4 =
  // 16,900 bytes.
  const Op* resize = find_op(g, "/paste/Resize");
  ASSERT_NE(resize, nullptr);
  EXPECT_EQ(g.tensor(resize->outputs[0]).shape, (std::vector<int64_t>{1, 1, 65, 65}));
  EXPECT_EQ(g.tensor(resize->outputs[0]).bytes(), 16900);
  // The Slice from y0 in [0, 64] to 1000 (clamped to 65): at most 65 - 0 = 65 rows, a view.
  EXPECT_EQ(g.tensor(g.outputs[0]).shape, (std::vector<int64_t>{1, 1, 65, 65}));
  // torch.zeros(y0, w): y0 <= 64, w <= 65: [64, 65] fp32 = 64 * 65 * 4 = 16,640 bytes.
  const Op* zeros = find_op(g, "/paste/ConstantOfShape");
  ASSERT_NE(zeros, nullptr);
  EXPECT_EQ(g.tensor(zeros->outputs[0]).shape, (std::vector<int64_t>{64, 65}));
  EXPECT_EQ(g.tensor(zeros->outputs[0]).bytes(), 16640);
  EXPECT_TRUE(has_note(g, "this estimate is an upper bound")) << all_notes(g);
  EXPECT_TRUE(has_note(g, "Resize output bounded at [1,1,65,65] (its sizes are computed from "
                          "tensor values: their upper ends): node '/paste/Resize' (Resize)"))
      << all_notes(g);
  EXPECT_TRUE(has_note(g, "ConstantOfShape output bounded at [64,65]")) << all_notes(g);
  EXPECT_TRUE(has_note(g, "Slice output bounded at [1,1,65,65]")) << all_notes(g);
}

TEST(OnnxValueRange, SizesFromUnclampedValuesStillStopInOneLine) {
  Result<Graph> r = import_onnx_bytes(paste_mask(false).bytes(), OnnxImportOptions{}, "p.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("'/paste/Resize' (Resize): shape inference gives no static shape"),
            std::string::npos)
      << r.error();
  EXPECT_EQ(r.error().find('\n'), std::string::npos);
}

// The interval rules, one tensor each, on x [4] (unbounded): clamped by Clip to [-2, 3].
TEST(OnnxValueRange, IntervalRulesOfTheOps) {
  OnnxModel m;
  m.input("x", {4});
  m.constant("lo", OnnxModel::float_scalar(-2.0f));
  m.constant("hi", OnnxModel::float_scalar(3.0f));
  m.constant("minus2", OnnxModel::float_scalar(-2.0f));
  m.constant("half", OnnxModel::float_scalar(0.5f));
  m.constant("four", OnnxModel::float_scalar(4.0f));
  m.node("Relu", {"x"}, {"relu"});
  m.node("Clip", {"x", "lo", "hi"}, {"c"});        // [-2, 3]
  m.node("Neg", {"c"}, {"neg"});                   // [-3, 2]
  m.node("Mul", {"c", "minus2"}, {"mul"});         // [-6, 4]
  m.node("Sub", {"c", "neg"}, {"sub"});            // [-2 - 2, 3 + 3] = [-4, 6]: c - (-c) forgets they are one value
  m.node("Mul", {"c", "half"}, {"halved"});        // [-1, 1.5]
  m.node("Cast", {"halved"}, {"trunc"}).i("to", TensorProto::INT64);  // truncation: [-1, 1]
  m.node("Div", {"c", "four"}, {"div"});           // [-0.5, 0.75]
  m.node("Div", {"c", "c"}, {"div0"});             // a divisor that may be 0: unbounded
  m.node("ReduceMax", {"c"}, {"rmax"}).i("keepdims", 0);  // [-2, 3]
  m.output("rmax");
  onnx::ModelProto& model = m.proto();
  onnx_import::TypeTable types = onnx_import::infer_types(model);
  onnx_import::ConstantPass consts(model.graph(), 13, types);
  onnx_import::ValueRanges ranges(model.graph(), 13, types, consts);
  consts.run_until(model.graph().node_size());
  ranges.run_until(model.graph().node_size());
  auto ends = [&](const std::string& name) {
    onnx_import::ValueRange r = ranges.range(name);
    return std::make_pair(r.min(), r.max());
  };
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(ends("x"), std::make_pair(-inf, inf));
  EXPECT_EQ(ends("relu"), std::make_pair(0.0, inf));
  EXPECT_EQ(ends("c"), std::make_pair(-2.0, 3.0));
  EXPECT_EQ(ends("neg"), std::make_pair(-3.0, 2.0));
  EXPECT_EQ(ends("mul"), std::make_pair(-6.0, 4.0));
  EXPECT_EQ(ends("sub"), std::make_pair(-4.0, 6.0));
  EXPECT_EQ(ends("halved"), std::make_pair(-1.0, 1.5));
  EXPECT_EQ(ends("trunc"), std::make_pair(-1.0, 1.0));
  EXPECT_EQ(ends("div"), std::make_pair(-0.5, 0.75));
  EXPECT_EQ(ends("div0"), std::make_pair(-inf, inf));
  EXPECT_EQ(ends("rmax"), std::make_pair(-2.0, 3.0));
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
