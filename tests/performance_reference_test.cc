// The time model against published measurements (data/performance_reference.json): every case
// is estimated as headroom would be asked (the same RunArgs a user writes), its prediction put in
// the published unit, and the table of per-case errors must equal the one in
// docs/performance.md, so the document always shows what the model predicts today. Nothing is
// asserted about the size of the errors: they are reported as measured (the document gives the
// reasons where the roofline cannot follow), and no constant is fitted to them.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "estimate/estimate.h"
#include "options/run_args.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct CaseResult {
  std::string id, gpu, unit;
  double published = 0, predicted = 0;
};

// The prediction in the case's unit: samples/s = batch / step; tokens/s = tokens / step; ms = the
// whole generate() call (or one step).
double predicted_value(const Estimate& e, const std::string& unit) {
  const RunTime& t = *e.time;
  if (unit == "samples/s") return static_cast<double>(t.samples_per_step) / t.step.total_ms * 1e3;
  if (unit == "tokens/s") return static_cast<double>(t.tokens_per_step) / t.step.total_ms * 1e3;
  if (unit == "ms") return t.generation ? t.generation->total_ms : t.step.total_ms;
  ADD_FAILURE() << "unknown unit " << unit;
  return 0;
}

std::vector<CaseResult> run_cases() {
  const std::string root = HEADROOM_SOURCE_DIR;
  nlohmann::json doc = nlohmann::json::parse(read_text(root + "/data/performance_reference.json"));
  std::vector<CaseResult> out;
  for (const nlohmann::json& c : doc["cases"]) {
    for (const char* key : {"id", "model", "mode", "precision", "gpu", "unit", "conditions", "source", "date", "software"}) {
      EXPECT_TRUE(c.contains(key) && c[key].is_string() && !c[key].get<std::string>().empty()) << key << " in " << c.dump();
    }
    RunArgs a;
    std::string model = c["model"];
    a.model = model.find('/') != std::string::npos ? root + "/" + model : model;
    a.mode = c["mode"];
    a.precision = c["precision"];
    a.precision_given = true;
    a.batch = std::to_string(c["batch"].get<int64_t>());
    if (c.contains("seq")) a.seq = std::to_string(c["seq"].get<int64_t>());
    if (c.contains("prompt")) a.prompt = std::to_string(c["prompt"].get<int64_t>());
    if (c.contains("new_tokens")) a.new_tokens = std::to_string(c["new_tokens"].get<int64_t>());
    if (c.contains("optimizer")) a.optimizer = c["optimizer"];
    a.gpu = c["gpu"];
    a.top = 0;
    Result<EstimateOptions> o = to_estimate_options(a);
    EXPECT_TRUE(o.ok()) << c["id"] << ": " << o.error();
    if (!o.ok()) continue;
    Result<Estimate> e = estimate(o.value());
    EXPECT_TRUE(e.ok() && e.value().time) << c["id"];
    if (!e.ok() || !e.value().time) continue;
    CaseResult r{c["id"], c["gpu"], c["unit"], c["value"].get<double>(), 0};
    r.predicted = predicted_value(e.value(), r.unit);
    out.push_back(r);
  }
  return out;
}

// Error as (predicted - published) / published: +60 % = headroom predicts 1.6x the published
// throughput (optimistic), or a latency 1.6x as long (pessimistic).
std::string table(const std::vector<CaseResult>& rs) {
  std::string s = "| case | GPU | published | headroom | error | ratio |\n|---|---|---|---|---|---|\n";
  std::vector<double> abs_errors;
  double worst = 1;
  std::string worst_id;
  for (const CaseResult& r : rs) {
    const double ratio = r.predicted / r.published;
    const double err = ratio - 1;
    abs_errors.push_back(std::fabs(err));
    const double off = std::max(ratio, 1 / ratio);
    if (off > worst) {
      worst = off;
      worst_id = r.id;
    }
    s += fmt::format("| {} | {} | {:.4g} {} | {:.4g} {} | {:+.0f}% | {:.2f} |\n", r.id, r.gpu, r.published, r.unit, r.predicted, r.unit,
                     100 * err, ratio);
  }
  std::sort(abs_errors.begin(), abs_errors.end());
  const size_t n = abs_errors.size();
  const double median = n == 0 ? 0 : n % 2 ? abs_errors[n / 2] : (abs_errors[n / 2 - 1] + abs_errors[n / 2]) / 2;
  int within_2x = 0;
  for (const CaseResult& r : rs) {
    const double ratio = r.predicted / r.published;
    if (ratio <= 2 && ratio >= 0.5) ++within_2x;
  }
  s += fmt::format("\n{} cases; median |error| {:.0f}%; {} of {} within 2x; worst {} ({:.2f}x off).\n", n, 100 * median, within_2x, n,
                   worst_id, worst);
  return s;
}

TEST(PerformanceReference, DocsTableIsWhatTheModelPredicts) {
  std::vector<CaseResult> rs = run_cases();
  ASSERT_GE(rs.size(), 15u);
  const std::string expected = table(rs);
  const std::string doc = read_text(std::string(HEADROOM_SOURCE_DIR) + "/docs/performance.md");
  const std::string open = "<!-- calibration table: tests/performance_reference_test.cc -->\n";
  const std::string close = "<!-- /calibration table -->";
  const size_t a = doc.find(open), b = doc.find(close);
  ASSERT_NE(a, std::string::npos) << "docs/performance.md lacks the calibration table markers";
  ASSERT_NE(b, std::string::npos);
  EXPECT_EQ(doc.substr(a + open.size(), b - a - open.size()), expected) << "docs/performance.md should hold:\n" << expected;
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
