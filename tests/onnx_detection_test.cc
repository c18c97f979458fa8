// Data-dependent sizes bounded from above (onnx_detection.h): NonZero, NonMaxSuppression, the
// TopK, Gather and If that follow them in torchvision's detection postprocessing, --max-detections,
// and RoiAlign's op kind and memory rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
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
using testing::OnnxModel;

const Op* find_op(const Graph& g, const std::string& name) {
  for (const Op& op : g.ops) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

bool has_note(const Graph& g, const std::string& fragment) {
  return std::any_of(g.notes.begin(), g.notes.end(),
                     [&](const std::string& n) { return n.find(fragment) != std::string::npos; });
}

std::string all_notes(const Graph& g) {
  std::string s;
  for (const std::string& n : g.notes) s += n + "\n";
  return s;
}

onnx::GraphProto relu_branch() {
  OnnxModel b;
  b.node("Relu", {"vals"}, {"kept"}, "/post/Relu");
  b.output("kept");
  return b.proto().graph();
}
onnx::GraphProto empty_branch() {
  OnnxModel b;
  b.node("Identity", {"vals"}, {"none"}, "/post/Identity");
  b.output("none");
  return b.proto().graph();
}

// torchvision's score thresholding and top-k, in small: scores [2, 8] (fixed batch 2);
// keep = NonZero(scores > 0.5) [2, n]; k = Min(n, 5) (topk(min(5, n)), which shape inference
// cannot evaluate); vals = TopK(Reshape(scores, [-1]), k); out = vals.numel() == 0 ? vals :
// Relu(vals) (the `if boxes.numel() == 0` of torchvision's postprocessing).
OnnxModel threshold_topk() {
  OnnxModel m;
  m.input("scores", {2, 8});
  m.constant("half", OnnxModel::float_scalar(0.5f));
  m.node("Greater", {"scores", "half"}, {"mask"}, "/post/Greater");
  m.node("NonZero", {"mask"}, {"keep"}, "/post/NonZero");
  m.node("Shape", {"keep"}, {"keep_shape"}, "/post/Shape");
  m.constant("one", OnnxModel::int64s({1}));
  m.constant("two", OnnxModel::int64s({2}));
  m.node("Slice", {"keep_shape", "one", "two"}, {"n"}, "/post/Slice");
  m.constant("five", OnnxModel::int64s({5}));
  m.node("Min", {"n", "five"}, {"k"}, "/post/Min");
  m.constant("flat", OnnxModel::int64s({-1}));
  m.node("Reshape", {"scores", "flat"}, {"flat_scores"}, "/post/Reshape");
  m.node("TopK", {"flat_scores", "k"}, {"vals", "idx"}, "/post/TopK");
  m.node("Size", {"vals"}, {"count"}, "/post/Size");
  m.constant("zero", OnnxModel::int64s({0}, true));
  m.node("Equal", {"count", "zero"}, {"empty"}, "/post/Equal");
  m.node("If", {"empty"}, {"out"}, "/post/If")
      .graph("then_branch", empty_branch())
      .graph("else_branch", relu_branch());
  m.output("out");
  return m;
}

TEST(OnnxDetection, NonZeroTakesItsInputsSizeAndTheNonEmptyBranchIsTaken) {
  Result<Graph> r = import_onnx_bytes(threshold_topk().bytes(), OnnxImportOptions{}, "d.onnx");
  ASSERT_TRUE(r.ok()) << r.error();
  const Graph& g = r.value();
  // Every one of the 2 x 8 = 16 scores may pass: NonZero gives [rank 2, 16] int64, 2 * 16 * 8 =
  // 256 bytes; k = min(16, 5) = 5, so TopK's values are [5] (20 bytes) and Relu's output too.
  const Op* nz = find_op(g, "/post/NonZero");
  ASSERT_NE(nz, nullptr);
  EXPECT_EQ(g.tensor(nz->outputs[0]).shape, (std::vector<int64_t>{2, 16}));
  EXPECT_EQ(g.tensor(nz->outputs[0]).bytes(), 256);
  EXPECT_EQ(g.tensor(g.outputs[0]).shape, (std::vector<int64_t>{5}));
  EXPECT_NE(find_op(g, "/post/Relu"), nullptr) << "the non-empty (else) branch runs";
  EXPECT_TRUE(has_note(g, "this estimate is an upper bound")) << all_notes(g);
  EXPECT_TRUE(has_note(g, "NonZero bounded at 16 (every element of its [2,8] input nonzero): "
                          "node '/post/NonZero' (NonZero)"))
      << all_notes(g);
  EXPECT_TRUE(has_note(g, "/post/If") && has_note(g, "else branch is taken")) << all_notes(g);
}

TEST(OnnxDetection, MaxDetectionsCapsTheCountAndWhatFollows) {
  OnnxImportOptions o;
  o.max_detections = 3;
  Result<Graph> r = import_onnx_bytes(threshold_topk().bytes(), o, "d.onnx");
  ASSERT_TRUE(r.ok()) << r.error();
  const Graph& g = r.value();
  // NonZero [2, 3] (48 bytes); k = min(3, 5) = 3.
  const Op* nz = find_op(g, "/post/NonZero");
  ASSERT_NE(nz, nullptr);
  EXPECT_EQ(g.tensor(nz->outputs[0]).shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(g.tensor(nz->outputs[0]).bytes(), 48);
  EXPECT_EQ(g.tensor(g.outputs[0]).shape, (std::vector<int64_t>{3}));
  EXPECT_TRUE(has_note(g, "NonZero bounded at 3 (--max-detections 3 (the file allows 16"))
      << all_notes(g);
  // A cap above the file's bound changes nothing.
  o.max_detections = 1000;
  Result<Graph> loose = import_onnx_bytes(threshold_topk().bytes(), o, "d.onnx");
  ASSERT_TRUE(loose.ok()) << loose.error();
  EXPECT_EQ(loose.value().tensor(loose.value().outputs[0]).shape, (std::vector<int64_t>{5}));
}

// boxes [1, 20, 4], scores [1, 3, 20], max_output_boxes_per_class 5: at most 1 x 3 x min(20, 5)
// = 15 selected rows [15, 3]; torchvision reads column 2 (the box index): Gather -> [15]. With
// `rows_out` the [15, 3] rows are a graph output too.
OnnxModel nms_model(bool with_limit, bool rows_out = false) {
  OnnxModel m;
  m.input("boxes", {1, 20, 4});
  m.input("scores", {1, 3, 20});
  std::vector<std::string> ins = {"boxes", "scores"};
  if (with_limit) {
    m.constant("limit", OnnxModel::int64s({5}));
    m.constant("iou", OnnxModel::float_scalar(0.5f));
    ins.push_back("limit");
    ins.push_back("iou");
  }
  m.node("NonMaxSuppression", ins, {"selected"}, "/nms/NonMaxSuppression");
  m.constant("col", OnnxModel::int64s({2}, true));
  m.node("Gather", {"selected", "col"}, {"keep"}, "/nms/Gather").i("axis", 1);
  m.node("Gather", {"boxes", "keep"}, {"kept_boxes"}, "/nms/GatherBoxes").i("axis", 1);
  m.output("kept_boxes");
  if (rows_out) m.output("selected", TensorProto::INT64);
  return m;
}

TEST(OnnxDetection, NonMaxSuppressionTakesBatchTimesClassesTimesItsLimit) {
  Result<Graph> r = import_onnx_bytes(nms_model(true).bytes(), OnnxImportOptions{}, "nms.onnx");
  ASSERT_TRUE(r.ok()) << r.error();
  const Graph& g = r.value();
  const Op* nms = find_op(g, "/nms/NonMaxSuppression");
  ASSERT_NE(nms, nullptr);
  // Read only through column 2: eager nms's indices [15] int64, 15 * 8 = 120 bytes, and the
  // Gather is no op of its own; the kept boxes [1, 15, 4] fp32: 240 bytes.
  EXPECT_EQ(g.tensor(nms->outputs[0]).shape, (std::vector<int64_t>{15}));
  EXPECT_EQ(g.tensor(nms->outputs[0]).bytes(), 120);
  EXPECT_EQ(find_op(g, "/nms/Gather"), nullptr);
  EXPECT_EQ(g.tensor(g.outputs[0]).shape, (std::vector<int64_t>{1, 15, 4}));
  EXPECT_TRUE(has_note(g, "NonMaxSuppression bounded at 15 (batch 1 x classes 3 x min(boxes 20, "
                          "max_output_boxes_per_class 5))"))
      << all_notes(g);
}

TEST(OnnxDetection, NonMaxSuppressionRowsReadElsewhereStayRows) {
  // The [15, 3] rows are a graph output as well: they exist (360 bytes), and so does the
  // Gather's copy of column 2 ([15] int64, 120 bytes).
  Result<Graph> r = import_onnx_bytes(nms_model(true, true).bytes(), OnnxImportOptions{}, "nms.onnx");
  ASSERT_TRUE(r.ok()) << r.error();
  const Graph& g = r.value();
  const Op* nms = find_op(g, "/nms/NonMaxSuppression");
  const Op* gather = find_op(g, "/nms/Gather");
  ASSERT_TRUE(nms && gather);
  EXPECT_EQ(g.tensor(nms->outputs[0]).shape, (std::vector<int64_t>{15, 3}));
  EXPECT_EQ(g.tensor(nms->outputs[0]).bytes(), 360);
  EXPECT_EQ(g.tensor(gather->outputs[0]).bytes(), 120);
}

TEST(OnnxDetection, NonMaxSuppressionWithoutALimitSelectsNothing) {
  // ONNX's default max_output_boxes_per_class is 0: no box is selected.
  Result<Graph> r = import_onnx_bytes(nms_model(false).bytes(), OnnxImportOptions{}, "nms.onnx");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r.value().tensor(r.value().outputs[0]).shape, (std::vector<int64_t>{1, 0, 4}));
}

// features [2, 8, 16, 16] -> RoiAlign at 6 rois, 7x7 -> [6, 8, 7, 7].
OnnxModel roi_align_model() {
  OnnxModel m;
  m.input("features", {2, 8, 16, 16});
  m.input("rois", {6, 4});
  m.input("batch_index", {6}, TensorProto::INT64);
  m.initializer("w", {8, 8, 1, 1});
  m.node("Conv", {"features", "w"}, {"conv"}, "/head/Conv");
  m.node("RoiAlign", {"conv", "rois", "batch_index"}, {"pooled"}, "/head/RoiAlign")
      .i("output_height", 7)
      .i("output_width", 7)
      .i("sampling_ratio", 2)
      .f("spatial_scale", 0.25f);
  m.output("pooled");
  return m;
}

TEST(OnnxDetection, RoiAlignIsOneOpOfShapeRoisByChannelsByOutputSize) {
  Result<Graph> r = import_onnx_bytes(roi_align_model().bytes(), OnnxImportOptions{}, "roi.onnx");
  ASSERT_TRUE(r.ok()) << r.error();
  const Graph& g = r.value();
  const Op* roi = find_op(g, "/head/RoiAlign");
  ASSERT_NE(roi, nullptr);
  EXPECT_EQ(roi->kind, OpKind::RoiAlign);
  // 6 * 8 * 7 * 7 * 4 = 9408 bytes.
  EXPECT_EQ(g.tensor(roi->outputs[0]).shape, (std::vector<int64_t>{6, 8, 7, 7}));
  EXPECT_EQ(g.tensor(roi->outputs[0]).bytes(), 9408);
}

TEST(OnnxDetection, MaxDetectionsOnAModelWithoutDataDependentSizesIsAnError) {
  OnnxImportOptions o;
  o.max_detections = 5;
  Result<Graph> r = import_onnx_bytes(roi_align_model().bytes(), o, "roi.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("--max-detections applies to models with data-dependent sizes"),
            std::string::npos)
      << r.error();
}

TEST(OnnxDetection, CliStatesTheBoundAndRefusesTheOptionWhereItDoesNotApply) {
  const std::string path = ::testing::TempDir() + "/threshold_topk.onnx";
  threshold_topk().save(path);
  testing::CliRun r = testing::run_cli("estimate " + path + " --mode infer --max-detections 4");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("NonZero bounded at 4 (--max-detections 4"), std::string::npos) << r.out;
  testing::CliRun j = testing::run_cli("estimate " + path + " --mode infer --json");
  EXPECT_EQ(j.code, 0) << j.err;
  EXPECT_NE(j.out.find("this estimate is an upper bound"), std::string::npos) << j.out;
  testing::expect_usage_error("estimate resnet18 --max-detections 5",
                              "--max-detections applies to ONNX files");
  testing::expect_usage_error("estimate " + path + " --mode infer --max-detections 0",
                              "--max-detections");
  const std::string plain = ::testing::TempDir() + "/roi_only.onnx";
  roi_align_model().save(plain);
  testing::expect_usage_error("estimate " + plain + " --mode infer --max-detections 5",
                              "--max-detections applies to models with data-dependent sizes");
}

// torchvision's MultiScaleRoIAlign in small (poolers.py: _multiscale_roi_align): 10 rois, each
// assigned a level by `levels`; per level l: idx = NonZero(Equal(levels, l)), its rois, RoiAlign
// on that level's features (4 channels, 7x7), and the levels' results concatenated. With
// `same_level` both NonZeros compare with 0: the same set counted twice, not a partition.
OnnxModel two_level_roi_align(bool same_level) {
  OnnxModel m;
  m.input("feat0", {1, 4, 16, 16});
  m.input("feat1", {1, 4, 8, 8});
  m.input("rois", {10, 4});
  m.input("levels", {10}, TensorProto::INT64);
  m.constant("flat", OnnxModel::int64s({-1}));
  m.constant("zero", OnnxModel::int64s({0}, true));
  for (int l = 0; l < 2; ++l) {
    const std::string s = std::to_string(l);
    m.constant("level" + s, OnnxModel::int64s({same_level ? 0 : l}, true));
    m.node("Equal", {"levels", "level" + s}, {"eq" + s}, "/pool/Equal_" + s);
    m.node("NonZero", {"eq" + s}, {"nz" + s}, "/pool/NonZero_" + s);
    m.node("Reshape", {"nz" + s, "flat"}, {"idx" + s}, "/pool/Reshape_" + s);
    m.node("Gather", {"rois", "idx" + s}, {"rois" + s}, "/pool/Gather_" + s).i("axis", 0);
    m.node("Mul", {"idx" + s, "zero"}, {"batch" + s}, "/pool/Mul_" + s);
    m.node("RoiAlign", {"feat" + s, "rois" + s, "batch" + s}, {"pooled" + s}, "/pool/RoiAlign_" + s)
        .i("output_height", 7)
        .i("output_width", 7)
        .i("sampling_ratio", 2)
        .f("spatial_scale", 0.25f);
  }
  m.node("Concat", {"pooled0", "pooled1"}, {"pooled"}, "/pool/Concat").i("axis", 0);
  m.output("pooled");
  return m;
}

TEST(OnnxDetection, LevelCountsOfOneTensorAreBoundedAsAPartition) {
  Result<Graph> r = import_onnx_bytes(two_level_roi_align(false).bytes(), OnnxImportOptions{}, "pool.onnx");
  ASSERT_TRUE(r.ok()) << r.error();
  const Graph& g = r.value();
  // levels == 0 and levels == 1 select disjoint rois: n0 + n1 <= 10. The split taken puts all
  // 10 in the last level: RoiAlign_0 [0, 4, 7, 7] = 0 bytes, RoiAlign_1 [10, 4, 7, 7] fp32 =
  // 10 * 4 * 49 * 4 = 7,840 bytes, and the concatenation [10, 4, 7, 7] = 7,840 bytes (each
  // level bounded alone: 7,840 + 7,840 and a [20, 4, 7, 7] result of 15,680).
  const Op* nz0 = find_op(g, "/pool/NonZero_0");
  const Op* nz1 = find_op(g, "/pool/NonZero_1");
  const Op* roi0 = find_op(g, "/pool/RoiAlign_0");
  const Op* roi1 = find_op(g, "/pool/RoiAlign_1");
  ASSERT_TRUE(nz0 && nz1 && roi0 && roi1);
  EXPECT_EQ(g.tensor(nz0->outputs[0]).shape, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(g.tensor(nz1->outputs[0]).shape, (std::vector<int64_t>{1, 10}));
  EXPECT_EQ(g.tensor(roi0->outputs[0]).bytes(), 0);
  EXPECT_EQ(g.tensor(roi1->outputs[0]).bytes(), 7840);
  EXPECT_EQ(g.tensor(g.outputs[0]).shape, (std::vector<int64_t>{10, 4, 7, 7}));
  EXPECT_EQ(g.tensor(g.outputs[0]).bytes(), 7840);
  EXPECT_TRUE(has_note(g, "NonZero bounded at 0 ('levels' == 0, one of 2 levels whose counts sum to "
                          "at most 10; worst split: all 10 in level 1): node '/pool/NonZero_0'"))
      << all_notes(g);
  EXPECT_TRUE(has_note(g, "NonZero bounded at 10 ('levels' == 1, one of 2 levels whose counts sum to "
                          "at most 10; worst split: all 10 in level 1): node '/pool/NonZero_1'"))
      << all_notes(g);
}

TEST(OnnxDetection, TheSameLevelCountedTwiceIsNoPartition) {
  Result<Graph> r = import_onnx_bytes(two_level_roi_align(true).bytes(), OnnxImportOptions{}, "pool.onnx");
  ASSERT_TRUE(r.ok()) << r.error();
  const Graph& g = r.value();
  // Both select levels == 0: each may hold all 10 rois, the result [20, 4, 7, 7] (15,680 bytes).
  EXPECT_EQ(g.tensor(g.outputs[0]).shape, (std::vector<int64_t>{20, 4, 7, 7}));
  EXPECT_TRUE(has_note(g, "NonZero bounded at 10 (every element of its [10] input nonzero)")) << all_notes(g);
}

// fuzz/corpus/gen_detection_seeds.py's seeds: each imports at batch 2, except the If on a
// runtime value, which is one line.
TEST(OnnxDetection, FuzzSeedsImportOrFailInOneLine) {
  const std::filesystem::path dir = std::filesystem::path(HEADROOM_SOURCE_DIR) / "fuzz/corpus/onnx";
  int seen = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("detect_", 0) != 0) continue;
    ++seen;
    Result<Graph> r = import_onnx(e.path().string(), testing::batch_options(2));
    if (name == "detect_runtime_cond.onnx") {
      ASSERT_FALSE(r.ok()) << name;
      EXPECT_NE(r.error().find("depends on runtime values"), std::string::npos) << r.error();
      EXPECT_EQ(r.error().find('\n'), std::string::npos) << name;
    } else {
      EXPECT_TRUE(r.ok()) << name << ": " << r.error();
    }
  }
  EXPECT_EQ(seen, 7);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
