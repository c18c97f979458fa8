// The pack page (src/report/pack_html.h): the plotted numbers are the pack result's, read back
// from the markup; the trio of tests/pack_onnx_models.h gives hand-derived anchors; the CLI
// writes the page atomically; it renders in headless Chromium (test-artifacts/pack.png).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "html_test_util.h"
#include "pack/pack.h"
#include "pack/swap_sim.h"
#include "pack/workload.h"
#include "pack_onnx_models.h"
#include "report/pack_html.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

namespace fs = std::filesystem;
using testing::Attrs;
using testing::elements;
using testing::int_list;
using testing::numbers;

struct Plot {
  double x, y, w, h;
};
Plot plot_of(const Attrs& a) {
  std::vector<double> v = numbers(a.at("data-plot"));
  EXPECT_EQ(v.size(), 4u);
  return {v[0], v[1], v[2], v[3]};
}

PackReport trio_report(const std::string& name, std::optional<int64_t> gpu_memory = std::nullopt) {
  testing::Trio t = testing::write_trio(name);
  PackOptions o;
  o.models = {t.a, t.b, t.c};
  o.gpu_memory = gpu_memory;
  Result<PackReport> r = pack(o, testing::load_onnx);
  EXPECT_TRUE(r.ok()) << r.error();
  return r.value();
}

// The savings curve: one vertex per k = 0..n at (k, weights after k merges) on the drawn axes.
void check_curve(const std::string& html, const PackReport& r) {
  std::vector<Attrs> g = elements(html, "g", "savings");
  ASSERT_EQ(g.size(), 1u);
  Plot p = plot_of(g[0]);
  double y_max = std::stod(g[0].at("data-y-max"));
  size_t n = r.plan.groups.size();
  EXPECT_EQ(g[0].at("data-groups"), std::to_string(n));
  std::vector<Attrs> curve = elements(html, "path", "savings-curve");
  ASSERT_EQ(curve.size(), 1u);
  std::vector<int64_t> w = int_list(curve[0].at("data-weights"));
  ASSERT_EQ(w.size(), n + 1);
  EXPECT_EQ(w[0], r.plan.unshared_bytes);
  for (size_t k = 1; k <= n; ++k) EXPECT_EQ(w[k], r.plan.unshared_bytes - r.plan.cumulative_saved[k - 1]) << k;
  EXPECT_EQ(w[n], r.plan.shared_bytes);
  std::vector<double> d = numbers(curve[0].at("d"));
  ASSERT_EQ(d.size(), 2 * (n + 1));
  for (size_t k = 0; k <= n; ++k) {
    EXPECT_NEAR(d[2 * k], p.x + p.w * static_cast<double>(k) / static_cast<double>(std::max<size_t>(n, 1)), 0.006) << k;
    EXPECT_NEAR(d[2 * k + 1], p.y + p.h - p.h * static_cast<double>(w[k]) / y_max, 0.006) << k;
  }
  // Markers: one per reached threshold, at the plan's group counts.
  std::vector<Attrs> th = elements(html, "g", "threshold");
  ASSERT_EQ(th.size(), r.plan.saved_bytes > 0 ? 3u : 0u);
  for (size_t i = 0; i < th.size(); ++i) {
    int32_t k = r.plan.thresholds[i].groups;
    EXPECT_EQ(th[i].at("data-groups"), std::to_string(k));
    EXPECT_EQ(th[i].at("data-weights"), std::to_string(w[static_cast<size_t>(k)]));
  }
}

TEST(PackHtml, TrioCurveMarkersAndFreeLevelByHand) {
  PackReport r = trio_report("html_trio");
  std::string html = pack_html(r);
  check_curve(html, r);
  // The merge plan of the trio saves 896 (conv1 x 3), 128 (bn1 x 3), 128 (bn2 x 3), 128 (conv2 x 3)
  // and 40 (fc of a and c) bytes: the curve from 2108 bytes (a, c 696 each, b 716) is
  // 2108, 1212, 1084, 956, 828, 788.
  std::vector<Attrs> curve = elements(html, "path", "savings-curve");
  EXPECT_EQ(curve[0].at("data-weights"), "2108,1212,1084,956,828,788");
  // 50% of 1320 = 660: 896 after 1 group; 80% = 1056: 1024 after 2 < 1056 <= 1152 after 3; 95% =
  // 1254: 1280 after 4.
  std::vector<Attrs> th = elements(html, "g", "threshold");
  ASSERT_EQ(th.size(), 3u);
  EXPECT_EQ(th[0].at("data-fraction"), "0.5");
  EXPECT_EQ(th[0].at("data-groups"), "1");
  EXPECT_EQ(th[0].at("data-weights"), "1212");
  EXPECT_EQ(th[1].at("data-groups"), "3");
  EXPECT_EQ(th[1].at("data-weights"), "956");
  EXPECT_EQ(th[2].at("data-groups"), "4");
  EXPECT_EQ(th[2].at("data-weights"), "828");
  // Free sharing only: 2108 - 1320 = 788 bytes (pack_identical_test), on the same axis.
  std::vector<Attrs> free = elements(html, "line", "free-sharing");
  ASSERT_EQ(free.size(), 1u);
  EXPECT_EQ(free[0].at("data-bytes"), "788");
  Attrs g = elements(html, "g", "savings")[0];
  Plot p = plot_of(g);
  EXPECT_NEAR(std::stod(free[0].at("y1")), p.y + p.h - p.h * 788 / std::stod(g.at("data-y-max")), 0.006);
  // Free sharing and every merge: 2108 - (896 + 320 + 128 + 40) = 724 bytes, each layer once
  // (pack_residency_test derives the pools).
  std::vector<Attrs> both = elements(html, "line", "free-and-merges");
  ASSERT_EQ(both.size(), 1u);
  EXPECT_EQ(both[0].at("data-bytes"), "724");
  // No GPU: no capacity line, and the title says so.
  EXPECT_TRUE(elements(html, "line", "capacity").empty());
  EXPECT_NE(html.find("3 models · batch 1 · inference, fp32 · no GPU given"), std::string::npos);
  // Free groups listed apart: conv1 x 3 saves 896 first.
  EXPECT_NE(html.find(R"(<tr data-bytes-saved="896">)"), std::string::npos);
  EXPECT_NE(html.find(R"(<tr data-status="complete">)"), std::string::npos);
}

TEST(PackHtml, DistributionCurvesAreTheLayerBytesLargestFirst) {
  PackReport r = trio_report("html_dist");
  std::string html = pack_html(r);
  std::vector<Attrs> g = elements(html, "g", "distribution");
  ASSERT_EQ(g.size(), 1u);
  Plot p = plot_of(g[0]);
  std::vector<Attrs> paths = elements(html, "path", "model-share");
  // Models with the same layer bytes share one curve, named for all of them ("a, b"), in the
  // first one's place: every model is named by exactly one curve.
  std::vector<size_t> curve_of(r.models.size(), paths.size());
  for (size_t k = 0; k < paths.size(); ++k) {
    std::string names = paths[k].at("data-model") + ", ";
    for (size_t at = 0, comma; (comma = names.find(", ", at)) != std::string::npos; at = comma + 2) {
      const std::string label = names.substr(at, comma - at);
      for (size_t mi = 0; mi < r.models.size(); ++mi) {
        if (r.models[mi].label != label) continue;
        EXPECT_EQ(curve_of[mi], paths.size()) << label << " on two curves";
        curve_of[mi] = k;
      }
    }
  }
  for (size_t mi = 0; mi < r.models.size(); ++mi) {
    const PackModel& m = r.models[mi];
    ASSERT_LT(curve_of[mi], paths.size()) << m.label << " has no curve";
    const Attrs& path = paths[curve_of[mi]];
    std::vector<int64_t> expected;
    for (const Layer& l : m.layers.layers) expected.push_back(l.bytes);
    std::sort(expected.begin(), expected.end(), std::greater<>());
    std::vector<int64_t> got = int_list(path.at("data-bytes"));
    EXPECT_EQ(got, expected) << m.label;
    std::vector<double> d = numbers(path.at("d"));
    ASSERT_EQ(d.size(), 2 * (expected.size() + 1));
    int64_t acc = 0;
    for (size_t i = 0; i <= expected.size(); ++i) {
      if (i > 0) acc += expected[i - 1];
      double share = static_cast<double>(acc) / static_cast<double>(m.layers.layer_bytes);
      EXPECT_NEAR(d[2 * i], p.x + p.w * static_cast<double>(i) / static_cast<double>(expected.size()), 0.006);
      EXPECT_NEAR(d[2 * i + 1], p.y + p.h - p.h * share, 0.006);
    }
  }
  // a.onnx by hand: conv1 448, then bn1, bn2, conv2 64 each, fc 40 (680 in layers).
  EXPECT_EQ(paths[0].at("data-bytes"), "448,64,64,64,40");
}

TEST(PackHtml, CapacityAndRoomForWeightsWhenOnTheScale) {
  // resnet101 + resnet152 on a 900 MiB device: capacity <= 2.5 x their weights, so it is drawn;
  // room for weights = 900 MiB - 686 MiB context (the measured stack's for a CNN's inference,
  // estimate/cuda_context.h) - the larger activation peak.
  PackOptions o;
  o.models = {"resnet101", "resnet152"};
  o.gpu_memory = int64_t{900} << 20;
  Result<PackReport> rr = pack(o);
  ASSERT_TRUE(rr.ok()) << rr.error();
  const PackReport& r = rr.value();
  ASSERT_LE(static_cast<double>(*o.gpu_memory), 2.5 * static_cast<double>(r.plan.unshared_bytes));
  std::string html = pack_html(r);
  check_curve(html, r);
  Attrs g = elements(html, "g", "savings")[0];
  Plot p = plot_of(g);
  double y_max = std::stod(g.at("data-y-max"));
  std::vector<Attrs> cap = elements(html, "line", "capacity");
  ASSERT_EQ(cap.size(), 1u);
  EXPECT_EQ(cap[0].at("data-bytes"), std::to_string(900 << 20));
  EXPECT_NEAR(std::stod(cap[0].at("y1")), p.y + p.h - p.h * static_cast<double>(900 << 20) / y_max, 0.006);
  // The room is the residency rule's: capacity - context - the largest device need (reserved peak
  // alone - weights).
  int64_t act = std::max(r.models[0].device_need_bytes, r.models[1].device_need_bytes);
  int64_t room = (int64_t{900} << 20) - (int64_t{686} << 20) - act;
  ASSERT_GT(room, 0);
  std::vector<Attrs> rl = elements(html, "line", "room");
  ASSERT_EQ(rl.size(), 1u);
  EXPECT_EQ(rl[0].at("data-bytes"), std::to_string(room));
  EXPECT_NE(html.find("<title>headroom pack: resnet101, resnet152 · 2 models · batch 1 · inference, fp32 · GPU custom (900 MiB)"),
            std::string::npos);
  // Built-in models have no values: nothing is free, no free level is drawn.
  EXPECT_TRUE(elements(html, "line", "free-sharing").empty());
  EXPECT_NE(html.find("no weight values (built-in architecture): identical-weight check skipped"), std::string::npos);
  EXPECT_NE(html.find(" with free sharing and every merge, of 900 MiB"), std::string::npos);
  // --merged-groups 2: the residency card names the prefix it counts.
  o.merged_groups = 2;
  Result<PackReport> kept = pack(o);
  ASSERT_TRUE(kept.ok()) << kept.error();
  EXPECT_NE(pack_html(kept.value()).find(fmt::format(" with free sharing and the first 2 of {} merges, of 900 MiB",
                                                     r.plan.groups.size())),
            std::string::npos);
}

// Built-in models by name, no GPU, with an optional workload.
PackOptions options_of(std::vector<std::string> models, std::optional<Workload> workload = std::nullopt) {
  PackOptions o;
  o.models = std::move(models);
  o.workload = std::move(workload);
  return o;
}

TEST(PackHtml, NothingSavedIsNotGreen) {
  // Built-in models have no weight values: free sharing saves 0 B and its card is plain.
  Result<PackReport> r = pack(options_of({"resnet18", "resnet34"}));
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r.value().identical.saved_bytes, 0);
  const std::string html = pack_html(r.value());
  EXPECT_EQ(html.find(R"(<div class="card free">)"), std::string::npos);
  EXPECT_NE(html.find("no bit-identical layers found"), std::string::npos);
  // The trio shares bit-identical layers: that card is green.
  EXPECT_NE(pack_html(trio_report("html_green")).find(R"(<div class="card free">)"), std::string::npos);
}

TEST(PackHtml, DuplicateModelsAreOneCurve) {
  Result<PackReport> r = pack(options_of({"resnet18", "resnet34", "resnet18"}));
  ASSERT_TRUE(r.ok()) << r.error();
  const std::string html = pack_html(r.value());
  std::vector<Attrs> curves = elements(html, "path", "model-share");
  ASSERT_EQ(curves.size(), 2u);
  EXPECT_EQ(curves[0].at("data-model"), "resnet18, resnet18#2");
  EXPECT_EQ(curves[1].at("data-model"), "resnet34");
  EXPECT_NE(html.find("(same layers: one curve)"), std::string::npos);
}

// Two resnets that do not fit 200 MiB together, requests for both: they swap.
PackOptions workload_options() {
  const char* text = R"({"window_s": 1, "seed": 9, "weights_capacity": "200MiB",
    "load": {"bandwidth_gb_per_s": 12},
    "models": [{"model": "resnet50", "rate": 40, "latency_ms": 50, "exec_ms": 4},
               {"model": "resnet101", "rate": 30, "latency_ms": 80, "exec_ms": 7}]})";
  Result<Workload> w = parse_workload(text, "test");
  EXPECT_TRUE(w.ok()) << w.error();
  return options_of({"resnet50", "resnet101"}, w.value());
}

TEST(PackHtml, TheWorkloadSimulationIsOnThePage) {
  PackOptions o = workload_options();
  Result<PackReport> r = pack(o);
  ASSERT_TRUE(r.ok()) << r.error();
  const std::string html = pack_html(r.value());
  o.workload.reset();
  EXPECT_NE(pack_html(pack(o).value()), html);
  // One row and one lane per policy and sharing choice, with the simulation's stalls and loads.
  std::vector<Attrs> rows = elements(html, "tr", "sim-run");
  ASSERT_EQ(rows.size(), r.value().runs.size());
  ASSERT_EQ(rows.size(), 9u);
  for (size_t i = 0; i < rows.size(); ++i) {
    const SimulationRun& run = r.value().runs[i];
    EXPECT_EQ(rows[i].at("data-policy"), eviction_policy_name(run.policy));
    EXPECT_EQ(rows[i].at("data-stall-ns"), std::to_string(run.result.load_wait_ns));
    int64_t loads = 0;
    for (const SwapModelStats& m : run.result.models) loads += m.loads;
    EXPECT_EQ(rows[i].at("data-loads"), std::to_string(loads));
  }
  EXPECT_EQ(elements(html, "g", "sim-lane").size(), 9u);
  EXPECT_NE(html.find("Workload simulation: swapping weights"), std::string::npos);
}

TEST(PackHtml, DeterministicAndSelfContained) {
  PackReport r = trio_report("html_det");
  std::string a = pack_html(r), b = pack_html(r);
  EXPECT_EQ(a, b);
  for (const char* banned : {"<script", "http://", "https://", "<link", "@import", "url("}) {
    EXPECT_EQ(a.find(banned), std::string::npos) << banned;
  }
}

using testing::CliRun;
using testing::run_cli;

TEST(PackHtmlCli, WritesThePageAndPrintsTheReport) {
  testing::Trio t = testing::write_trio("html_cli");
  std::string out = t.dir + "/pack.html";
  CliRun r = run_cli("pack " + t.a + " " + t.b + " " + t.c + " --html " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("with free sharing only"), std::string::npos);
  std::ifstream f(out);
  std::string html((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find(R"(data-weights="2108,1212,1084,956,828,788")"), std::string::npos);
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  // An unwritable place: one line, exit 2, nothing on stdout, no file.
  std::string bad = t.dir + "/no/such/dir/pack.html";
  CliRun e = run_cli("pack " + t.a + " --html " + bad);
  EXPECT_EQ(e.code, 2);
  EXPECT_EQ(e.out, "");
  EXPECT_NE(e.err.find("cannot write '" + bad + "': No such file or directory"), std::string::npos) << e.err;
  EXPECT_EQ(std::count(e.err.begin(), e.err.end(), '\n'), 1);
  EXPECT_FALSE(fs::exists(bad));
}

TEST(PackHtmlBrowser, ReflowsAt390To2560) {
  testing::Trio t = testing::write_trio("html_browser");
  std::string dir = testing::artifact_dir();
  std::string html = dir + "/pack.html", sim = dir + "/pack-workload.html";
  CliRun r = run_cli("pack " + t.a + " " + t.b + " " + t.c + " --gpu t4 --html " + html);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string w = dir + "/pack-workload.json";
  {
    std::ofstream f(w);
    f << R"({"window_s": 1, "seed": 9, "weights_capacity": "200MiB", "load": {"bandwidth_gb_per_s": 12},
      "models": [{"model": "resnet50", "rate": 40, "latency_ms": 50, "exec_ms": 4},
                 {"model": "resnet101", "rate": 30, "latency_ms": 80, "exec_ms": 7}]})";
  }
  r = run_cli("pack resnet50 resnet101 resnet50 --workload " + w + " --html " + sim);
  ASSERT_EQ(r.code, 0) << r.err;
  testing::expect_clean_layout(html, "pack");
  testing::expect_clean_layout(sim, "pack-workload");
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
