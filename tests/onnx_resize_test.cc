// Resize whose output size is Shape arithmetic on a tensor with a symbolic batch (torchvision's
// segmentation heads: F.interpolate(x, size=input.shape[-2:])), folded with the bound batch
// (onnx_lower.cc, op_resize), and ScatterND taking its data's shape (Swin's attention mask).
#include <gtest/gtest.h>

#include "estimate/estimate.h"
#include "frontends/onnx/onnx_import.h"
#include "ir/builder.h"
#include "onnx_test_models.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using onnx::TensorProto;
using testing::batch_options;
using testing::OnnxModel;

// x [batch, 3, 8, 8]; y = Resize(x, sizes = Concat(Shape(x)[0:2], Shape(x)[2:4] * 2)), linear:
// F.interpolate(x, scale_factor=2, mode="bilinear") as a model computing its size writes it.
OnnxModel resize_by_shape(const std::string& mode) {
  OnnxModel m;
  m.input("x", {"batch", 3, 8, 8});
  m.node("Shape", {"x"}, {"s"});
  m.constant("zero", OnnxModel::int64s({0}));
  m.constant("two", OnnxModel::int64s({2}));
  m.constant("four", OnnxModel::int64s({4}));
  m.node("Slice", {"s", "zero", "two"}, {"nc"});
  m.node("Slice", {"s", "two", "four"}, {"hw"});
  m.node("Mul", {"hw", "two"}, {"hw2"});
  m.node("Concat", {"nc", "hw2"}, {"sizes"}).i("axis", 0);
  m.node("Resize", {"x", "", "", "sizes"}, {"y"}).s("mode", mode);
  m.output("y");
  return m;
}

TEST(OnnxResize, SizesFromShapeArithmeticFoldWithTheBoundBatch) {
  for (const char* mode : {"linear", "nearest"}) {
    Result<Graph> r = import_onnx_bytes(resize_by_shape(mode).bytes(), batch_options(5), "m.onnx");
    ASSERT_TRUE(r.ok()) << r.error();
    const Graph& g = r.value();
    int upsamples = 0;
    for (const Op& op : g.ops) {
      if (op.kind != OpKind::Upsample2d) continue;
      ++upsamples;
      EXPECT_EQ(g.tensor(op.outputs[0]).shape, (std::vector<int64_t>{5, 3, 16, 16})) << mode;
    }
    EXPECT_EQ(upsamples, 1) << mode;
  }
}

TEST(OnnxResize, ScalesGiveTheFloorOfSizeTimesScale) {
  OnnxModel m;
  m.input("x", {"batch", 3, 8, 8});
  TensorProto scales;
  scales.set_data_type(TensorProto::FLOAT);
  scales.add_dims(4);
  for (float f : {1.0f, 1.0f, 2.5f, 0.5f}) scales.add_float_data(f);
  m.constant("scales", scales);
  m.node("Resize", {"x", "", "scales"}, {"y"}).s("mode", "nearest");
  m.output("y");
  Result<Graph> r = import_onnx_bytes(m.bytes(), batch_options(2), "m.onnx");
  ASSERT_TRUE(r.ok()) << r.error();
  // floor(8 x 2.5) = 20, floor(8 x 0.5) = 4.
  EXPECT_EQ(r.value().tensor(r.value().outputs[0]).shape, (std::vector<int64_t>{2, 3, 20, 4}));
}

TEST(OnnxResize, BadSizesAreOneLine) {
  OnnxModel m;
  m.input("x", {"batch", 3, 8, 8});
  m.constant("sizes", OnnxModel::int64s({2, 3, 16}));
  m.node("Resize", {"x", "", "", "sizes"}, {"y"}).s("mode", "nearest");
  m.output("y");
  Result<Graph> r = import_onnx_bytes(m.bytes(), batch_options(2), "m.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("changes the rank"), std::string::npos) << r.error();
  EXPECT_EQ(r.error().find('\n'), std::string::npos);
}

TEST(OnnxResize, ScatterNDTakesItsDataShape) {
  OnnxModel m;
  m.input("x", {"batch", 4});
  m.node("Shape", {"x"}, {"s"});
  m.node("ConstantOfShape", {"s"}, {"zeros"});
  m.constant("idx", OnnxModel::int64s({0}));
  m.node("Unsqueeze", {"idx", "idx"}, {"idx2"});
  m.node("Gather", {"x", "idx"}, {"row"}).i("axis", 0);
  m.node("ScatterND", {"zeros", "idx2", "row"}, {"sc"});
  m.node("Add", {"x", "sc"}, {"y"});
  m.output("y");
  Result<Graph> r = import_onnx_bytes(m.bytes(), batch_options(6), "m.onnx");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r.value().tensor(r.value().outputs[0]).shape, (std::vector<int64_t>{6, 4}));
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
