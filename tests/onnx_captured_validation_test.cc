// The ONNX cross-check beyond the built-in models: torchvision models that headroom knows only
// through capture, measured on the CPU in validation/captured.json (validation/captured.py: batch
// 2, 64x64 images, squeezenet1_1 96x96, cross-entropy over 1,000 classes, the segmentation
// models' MSE against a [2, 21, 64, 64] target), exported by torch.onnx in training mode at the
// same image size (tests/data/onnx/gen_torchvision.py NAME ... SIDE, weights stripped) and read as
// the CLI reads a file (onnx_graph_loader, in-place inference on). The loss the import attaches
// by default is the measured loop's: cross-entropy on a [N, 1000] output, MSE on the 4-D one.
//
// Bar: every case within 2% of the measured peak, median absolute error at most 0.5%. The table
// (measured, ONNX prediction, error) is printed and written to onnx_captured_validation_table.md
// in the build directory; docs/accuracy.md quotes it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "estimate/estimate.h"
#include "frontends/onnx/onnx_import.h"
#include "validation_cases.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

struct Export {
  const char* file;   // in tests/data/onnx/
  const char* model;  // the captured case's model
};

const Export kExports[] = {
    {"shufflenet_v2_x0_5_64_training.onnx", "captured:shufflenet_v2_x0_5"},
    {"mnasnet0_5_64_training.onnx", "captured:mnasnet0_5"},
    {"regnet_x_400mf_64_training.onnx", "captured:regnet_x_400mf"},
    {"regnet_y_400mf_64_training.onnx", "captured:regnet_y_400mf"},
    {"mobilenet_v3_small_64_training.onnx", "captured:mobilenet_v3_small"},
    {"squeezenet1_1_96_training.onnx", "captured:squeezenet1_1"},
    {"resnext50_32x4d_64_training.onnx", "captured:resnext50_32x4d"},
    {"lraspp_mobilenet_v3_large_64_training.onnx", "captured:lraspp_mobilenet_v3_large"},
    {"deeplabv3_mobilenet_v3_large_64_training.onnx", "captured:deeplabv3_mobilenet_v3_large"},
    {"fcn_resnet50_64_training.onnx", "captured:fcn_resnet50"},
};

struct Row {
  std::string id;
  int64_t measured = 0, onnx = 0;
  double error = 0;  // (onnx - measured) / measured
};

TEST(OnnxCapturedValidation, ExportsPredictTheMeasuredCapturedCases) {
  std::ifstream f(std::string(HEADROOM_SOURCE_DIR) + "/validation/captured.json");
  ASSERT_TRUE(f.good()) << "validation/captured.json is missing";
  const nlohmann::json cases = nlohmann::json::parse(f).at("cases");
  const std::string dir = std::string(HEADROOM_SOURCE_DIR) + "/tests/data/onnx/";
  OnnxImportOptions import;  // as the CLI imports a file
  import.infer_inplace = true;

  std::vector<Row> rows;
  for (const Export& x : kExports) {
    const int before = static_cast<int>(rows.size());
    for (const nlohmann::json& c : cases) {
      if (c.at("model") != x.model) continue;
      EstimateOptions o = testing::options_for_case(c, "cpu");
      o.model = x.file;
      o.graph_loader = onnx_graph_loader(dir + x.file, import);
      Row r;
      r.id = c.at("id").get<std::string>();
      r.measured = c.at("measured").at("peak_bytes").get<int64_t>();
      Result<Estimate> e = estimate(o);
      ASSERT_TRUE(e.ok()) << r.id << " (" << x.file << "): " << e.error();
      r.onnx = e.value().peak_bytes;
      r.error = static_cast<double>(r.onnx - r.measured) / static_cast<double>(r.measured);
      rows.push_back(r);
    }
    EXPECT_GT(static_cast<int>(rows.size()), before) << x.file << ": no measured case of " << x.model;
  }
  ASSERT_FALSE(rows.empty());

  std::vector<double> abs_errors;
  for (const Row& r : rows) abs_errors.push_back(std::fabs(r.error));
  std::sort(abs_errors.begin(), abs_errors.end());
  const size_t n = abs_errors.size();
  const double median = n % 2 ? abs_errors[n / 2] : (abs_errors[n / 2 - 1] + abs_errors[n / 2]) / 2;
  const auto exact = std::count_if(rows.begin(), rows.end(), [](const Row& r) { return r.onnx == r.measured; });

  std::ostringstream table;
  table << "| case | measured (bytes) | ONNX (bytes) | ONNX error |\n|---|---:|---:|---:|\n";
  for (const Row& r : rows) {
    char err[32];
    std::snprintf(err, sizeof err, "%+.4f%%", 100.0 * r.error);
    table << "| `" << r.id << "` | " << r.measured << " | " << r.onnx << " | " << err << " |\n";
  }
  char summary[200];
  std::snprintf(summary, sizeof summary, "\n%zu cases, %ld exact to the byte, median |error| %.4f%%, worst %.4f%%\n",
                n, static_cast<long>(exact), 100.0 * median, 100.0 * abs_errors.back());
  table << summary;
  std::cout << table.str();
  std::ofstream(std::string(HEADROOM_BINARY_DIR) + "/onnx_captured_validation_table.md") << table.str();

  for (const Row& r : rows) EXPECT_LE(std::fabs(r.error), 0.02) << r.id << ": measured " << r.measured << ", ONNX " << r.onnx;
  EXPECT_LE(median, 0.005);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
