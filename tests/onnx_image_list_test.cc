// One image of a list (frontends/onnx/onnx_image_list.h): a detection export's rank-3 [C, H, W]
// input runs at batch 1, without a batch axis; another batch and fit's batch search are refused
// in one line. A fixed-batch export refuses fit's search too.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli_runner.h"
#include "frontends/onnx/onnx_export_kind.h"
#include "frontends/onnx/onnx_import.h"
#include "onnx_test_models.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::CliRun;
using testing::OnnxModel;
using testing::expect_usage_error;
using testing::run_cli;

const std::string kDir = std::string(HEADROOM_SOURCE_DIR) + "/tests/data/onnx/";

// GeneralizedRCNNTransform in small: (image - mean) / std, then image[None] and a convolution.
// `unsqueeze`: false feeds the normalized [3, 16, 16] to a MatMul instead (a sequence of 3
// tokens, say): no image list.
OnnxModel one_image(bool unsqueeze) {
  OnnxModel m;
  m.input("images", {int64_t{3}, int64_t{16}, int64_t{16}});
  m.constant("mean", OnnxModel::float_scalar(0.5f));
  m.constant("std", OnnxModel::float_scalar(0.25f));
  m.node("Sub", {"images", "mean"}, {"centered"}, "/transform/Sub");
  m.node("Div", {"centered", "std"}, {"normalized"}, "/transform/Div");
  if (unsqueeze) {
    m.constant("axis0", OnnxModel::int64s({0}));
    m.node("Unsqueeze", {"normalized", "axis0"}, {"batched"}, "/transform/Unsqueeze");
    m.initializer("w", {int64_t{4}, int64_t{3}, int64_t{3}, int64_t{3}});
    m.node("Conv", {"batched", "w"}, {"features"}, "/backbone/Conv").ints("pads", {1, 1, 1, 1});
    m.output("features");
  } else {
    m.initializer("w", {int64_t{16}, int64_t{8}});
    m.node("MatMul", {"normalized", "w"}, {"features"}, "/proj/MatMul");
    m.output("features");
  }
  return m;
}

TEST(OnnxImageList, AnUnsqueezedImageIsBatchOneWithoutABatchAxis) {
  std::optional<OnnxExportFacts> f = inspect_onnx_export_bytes(one_image(true).bytes());
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->fixed_batch, 1);
  EXPECT_EQ(f->fixed_batch_input, "images");
  EXPECT_EQ(f->image, (std::vector<int64_t>{3, 16, 16}));
  // Without the Unsqueeze, axis 0 is the file's fixed batch of 3, as before.
  std::optional<OnnxExportFacts> g = inspect_onnx_export_bytes(one_image(false).bytes());
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->fixed_batch, 3);
  EXPECT_TRUE(g->image.empty());
}

TEST(OnnxImageList, ImportRunsAtBatchOneAndRefusesAnother) {
  OnnxImportOptions o;
  o.batch = 1;
  Result<Graph> r = import_onnx_bytes(one_image(true).bytes(), o, "det.onnx");
  ASSERT_TRUE(r.ok()) << r.error();
  // The convolution's output: [1, 4, 16, 16] fp32 = 4 * 16 * 16 * 4 = 4,096 bytes.
  EXPECT_EQ(r.value().tensor(r.value().outputs[0]).shape, (std::vector<int64_t>{1, 4, 16, 16}));
  EXPECT_EQ(r.value().tensor(r.value().outputs[0]).bytes(), 4096);
  bool noted = false;
  for (const std::string& n : r.value().notes) {
    noted = noted || n.find("the model takes one image (input 'images' [3,16,16]") == 0;
  }
  EXPECT_TRUE(noted);
  o.batch = 2;
  Result<Graph> two = import_onnx_bytes(one_image(true).bytes(), o, "det.onnx");
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.error().find("takes one image (input 'images' [3,16,16], which the graph "
                             "unsqueezes to a batch of one"),
            std::string::npos)
      << two.error();
  EXPECT_NE(two.error().find("cannot run at batch 2; use batch 1"), std::string::npos) << two.error();
}

TEST(OnnxImageList, CliReportsBatchOneRefusesAnotherAndRefusesFit) {
  const std::string path = ::testing::TempDir() + "/one_image.onnx";
  one_image(true).save(path);
  CliRun plain = run_cli("estimate " + path + " --mode infer --device cpu");
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_NE(plain.out.find("batch 1, inference"), std::string::npos) << plain.out;
  CliRun one = run_cli("estimate " + path + " --mode infer --device cpu --batch 1");
  EXPECT_EQ(one.code, 0) << one.err;
  expect_usage_error("estimate " + path + " --mode infer --batch 2",
                     "takes one image (input 'images' [3,16,16], which the graph unsqueezes to a "
                     "batch of one: an image-list export, as torchvision's detection models are), "
                     "so it cannot run at --batch 2: leave --batch out (or give 1)");
  expect_usage_error("fit " + path + " --mode infer --gpu-memory 1GiB",
                     "fit searches the largest batch, but '" + path + "' takes one image");
  // A fixed-batch export: the same refusal of the search, naming its batch.
  expect_usage_error("fit " + kDir + "tiny_cnn_fixed_batch.onnx --mode infer --gpu-memory 1GiB",
                     "was exported with a fixed batch of 2 (input 'input'): re-export with "
                     "dynamic_axes={'input': {0: 'batch'}} to fit it");
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
