// Every committed measurement of real PyTorch (validation/measured.json, made by
// validation/run.py on CPU) against headroom's prediction with --device cpu. Pinned as measured:
// every case is exact to the byte except the known misses below, each pinned to its byte
// difference (so the exact-case count and the worst error are pinned too). A new miss, or a known
// one that grows or shrinks, fails: a change to headroom's model of PyTorch that fixes a miss
// updates this table and docs/accuracy.md; one that breaks a case is a bug.
// The table is printed and written to validation_table.md in the build directory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "estimate/estimate.h"
#include "validation_cases.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

struct Row {
  std::string id;
  int64_t measured = 0;
  int64_t predicted = 0;
  double error = 0;  // (predicted - measured) / measured
  std::string note;
};

// predicted - measured, in bytes, of the cases that are not exact; causes in docs/accuracy.md
// ("Known residuals").
const std::map<std::string, int64_t> kKnownMisses = {
    // A Python scalar wrapped as an 8-byte float64 tensor and its 4-byte cast, alive at the peak.
    {"llama:hidden=256,layers=2,heads=8,kv_heads=4,ffn=688,vocab=1000/infer/b1/s128/dropout-on", -12},
    {"llama:hidden=256,layers=2,heads=8,kv_heads=4,ffn=688,vocab=1000/infer/b2/s128/dropout-on", -12},
    {"llama:hidden=256,layers=2,heads=8,kv_heads=4,ffn=688,vocab=1000/infer/b4/s128/dropout-on", -12},
    {"llama:hidden=256,layers=2,heads=8,kv_heads=8,ffn=688,vocab=1000/infer/b2/s128/dropout-on", -12},
    // Fused _native_multi_head_attention in eval: softmax in place, the second matmul into q's
    // storage; headroom allocates both (+94,560 B per sample).
    {"vit_b_16/infer/b1/dropout-on", 94560},
    {"vit_b_16/infer/b2/dropout-on", 189120},
    // The worst case, -602,112 of 704,391,152 B (-0.0855%), left after the patch embedding's
    // GEMM weights pass was modelled (training/cpu_conv.h); not yet explained, the same bytes as
    // AdamW's residual below and as the input image.
    {"vit_b_16/train/b1/sgd/no-foreach/dropout-on", -602112},
    // Peak in AdamW's update; the 602,112 B are not yet explained in docs/accuracy.md.
    {"vit_b_16/train/b1/adamw/foreach/dropout-on", -602112},
};
constexpr size_t kMeasuredCases = 191;
constexpr int kExactCases = 183;  // kMeasuredCases - kKnownMisses.size()

TEST(Validation, EveryMeasuredCaseIsPredictedAsPinned) {
  std::ifstream f(std::string(HEADROOM_SOURCE_DIR) + "/validation/measured.json");
  ASSERT_TRUE(f.good()) << "validation/measured.json is missing: run make validate";
  nlohmann::json doc = nlohmann::json::parse(f);
  const nlohmann::json& cases = doc.at("cases");
  ASSERT_FALSE(cases.empty());
  std::vector<Row> rows;
  for (const nlohmann::json& c : cases) {
    Row r;
    r.id = c.at("id").get<std::string>();
    r.measured = c.at("measured").at("peak_bytes").get<int64_t>();
    Result<Estimate> e = estimate(testing::options_for_case(c, "cpu"));
    if (!e.ok()) {
      r.note = e.error();
      r.error = 1.0;
    } else {
      r.predicted = e.value().peak_bytes;
      r.error = static_cast<double>(r.predicted - r.measured) / static_cast<double>(r.measured);
    }
    rows.push_back(r);
  }
  std::vector<double> abs_errors;
  for (const Row& r : rows) abs_errors.push_back(std::fabs(r.error));
  std::vector<double> sorted = abs_errors;
  std::sort(sorted.begin(), sorted.end());
  double median = sorted.size() % 2 ? sorted[sorted.size() / 2]
                                    : (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;
  double worst = sorted.back();
  int exact = static_cast<int>(std::count_if(rows.begin(), rows.end(), [](const Row& r) { return r.predicted == r.measured; }));

  std::ostringstream table;
  table << "| case | measured bytes | predicted bytes | error |\n|---|---:|---:|---:|\n";
  for (const Row& r : rows) {
    char err[32];
    std::snprintf(err, sizeof err, "%+.4f%%", 100.0 * r.error);
    table << "| " << r.id << " | " << r.measured << " | " << (r.note.empty() ? std::to_string(r.predicted) : r.note)
          << " | " << err << " |\n";
  }
  char summary[200];
  std::snprintf(summary, sizeof summary, "\n%zu cases, %d exact to the byte, median |error| %.4f%%, worst %.4f%%\n",
                rows.size(), exact, 100.0 * median, 100.0 * worst);
  table << summary;
  std::cout << table.str();
  std::ofstream(std::string(HEADROOM_BINARY_DIR) + "/validation_table.md") << table.str();

  EXPECT_EQ(rows.size(), kMeasuredCases);
  EXPECT_EQ(exact, kExactCases);
  std::set<std::string> seen;
  for (const Row& r : rows) {
    seen.insert(r.id);
    auto known = kKnownMisses.find(r.id);
    const int64_t expected = known == kKnownMisses.end() ? 0 : known->second;
    EXPECT_TRUE(r.note.empty()) << r.id << ": " << r.note;
    EXPECT_EQ(r.predicted - r.measured, expected) << r.id << ": measured " << r.measured << ", predicted " << r.predicted;
  }
  for (const auto& [id, diff] : kKnownMisses) EXPECT_EQ(seen.count(id), 1u) << id << " is no longer measured";
  // The worst case, as pinned above: -602,112 / 704,391,152.
  EXPECT_DOUBLE_EQ(worst, 602112.0 / 704391152.0);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
