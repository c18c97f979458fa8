// The HTML report (src/report/html_report.h): the numbers drawn are the simulated ones, the page is
// self-contained and deterministic, and it renders in a real browser.
//
// Layers, as for the simulator:
//  - golden checks on the markup's data: every plotted point is the live bytes per category at
//    that step's high-water mark (replayed here independently from the Program), the areas' edges
//    sit where those bytes map on the axis, the peak marker is Estimate::peak_bytes;
//  - weights per layer with the byte arithmetic in comments;
//  - the CLI (`headroom report`): atomic write, one-line errors with exit code 2;
//  - headless Chromium: the page renders without console errors (the screenshot is kept in the
//    build directory as test-artifacts/report.png). Chromium missing is a failure: CI installs it
//    (scripts/install-deps.sh browser, run by `make test`).
#include <gtest/gtest.h>

#include "cli_runner.h"
#include "html_test_util.h"
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "estimate/estimate.h"
#include "report/estimate_report.h"
#include "report/html_report.h"
#include "report/svg.h"
#include "sim/simulate.h"
#include "util/file.h"

namespace headroom {
namespace {

namespace fs = std::filesystem;
using testing::artifact_dir;
using testing::Attrs;
using testing::elements;
using testing::expect_renders_in_chromium;
using testing::int_list;
using testing::numbers;

// ---- helpers ---------------------------------------------------------------------------------

struct Rendered {
  Estimate e;
  Graph g;
  std::string html;
};

EstimateOptions options_for(const std::string& model, int64_t batch, const std::string& gpu = "") {
  EstimateOptions o;
  o.model = model;
  o.batch = batch;
  o.keep_program = true;
  if (!gpu.empty()) {
    GpuOptions g;
    g.gpu = gpu;
    o.gpu = g;
  }
  return o;
}

Rendered render(const EstimateOptions& o, HtmlReportOptions ho = {}) {
  Result<Estimate> e = estimate(o);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error());
  Rendered r{e.value(), build_graph(o, e.value().micro_batch), ""};
  r.html = html_report(r.e, r.g, ho);
  return r;
}

// Independent replay: for every step, every state of the live bytes per category during it (its
// start, then after each event).
std::vector<std::vector<CategoryBytes>> states_per_step(const Program& p) {
  std::vector<std::vector<CategoryBytes>> out(p.steps.size());
  std::vector<Category> cat(p.buffers.size());
  CategoryBytes live{};
  for (size_t si = 0; si < p.steps.size(); ++si) {
    out[si].push_back(live);
    for (int32_t ei = p.steps[si].first_event; ei < p.steps[si].end_event; ++ei) {
      const Event& ev = p.events[static_cast<size_t>(ei)];
      const Buffer& b = p.buffers[static_cast<size_t>(ev.buffer)];
      auto& c = cat[static_cast<size_t>(ev.buffer)];
      if (ev.kind == Event::Kind::Alloc) {
        c = b.category;
        live[static_cast<size_t>(c)] += b.bytes;
      } else if (ev.kind == Event::Kind::Free) {
        live[static_cast<size_t>(c)] -= b.bytes;
      } else {
        live[static_cast<size_t>(c)] -= b.bytes;
        c = ev.category;
        live[static_cast<size_t>(c)] += b.bytes;
      }
      out[si].push_back(live);
    }
  }
  return out;
}

int64_t sum(const CategoryBytes& b) { return std::accumulate(b.begin(), b.end(), int64_t{0}); }

// The step's high-water state: the most live bytes, the earliest such state.
CategoryBytes high_water(const std::vector<CategoryBytes>& states) {
  CategoryBytes best = states.front();
  for (const CategoryBytes& s : states) {
    if (sum(s) > sum(best)) best = s;
  }
  return best;
}

// Every plotted point against the replay; returns the points.
std::vector<Attrs> check_points(const Rendered& r) {
  const Program& p = r.e.program;
  auto states = states_per_step(p);
  std::vector<Attrs> pts = elements(r.html, "rect", "hover");
  EXPECT_FALSE(pts.empty());
  int32_t expect_first = 0;
  for (const Attrs& a : pts) {
    int32_t step = std::stoi(a.at("data-step")), first = std::stoi(a.at("data-first-step")),
            last = std::stoi(a.at("data-last-step"));
    // The points tile the steps in order.
    EXPECT_EQ(first, expect_first);
    EXPECT_LE(first, step);
    EXPECT_LE(step, last);
    expect_first = last + 1;
    std::vector<int64_t> bytes = int_list(a.at("data-bytes"));
    EXPECT_EQ(bytes.size(), kCategoryCount);
    CategoryBytes want = high_water(states[static_cast<size_t>(step)]);
    for (size_t c = 0; c < kCategoryCount; ++c) {
      EXPECT_EQ(bytes[c], want[c]) << "step " << step << " category " << category_name(static_cast<Category>(c));
    }
    EXPECT_EQ(std::stoll(a.at("data-total")), sum(want)) << "step " << step;
    // The point is the highest step of its run.
    for (int32_t s = first; s <= last; ++s) {
      EXPECT_LE(sum(high_water(states[static_cast<size_t>(s)])), sum(want)) << "run " << first << "-" << last;
    }
  }
  EXPECT_EQ(expect_first, static_cast<int32_t>(p.steps.size()));
  return pts;
}

// The stacked areas' upper edges sit at the cumulative bytes of the points on the drawn axis.
void check_areas(const Rendered& r, const std::vector<Attrs>& pts) {
  std::vector<Attrs> tl = elements(r.html, "g", "timeline");
  ASSERT_EQ(tl.size(), 1u);
  std::vector<double> plot = numbers(tl[0].at("data-plot"));
  ASSERT_EQ(plot.size(), 4u);
  double x0 = plot[0], y0 = plot[1], pw = plot[2], ph = plot[3];
  double y_max = std::stod(tl[0].at("data-y-max"));
  double n_steps = std::stod(tl[0].at("data-steps"));
  EXPECT_EQ(n_steps, static_cast<double>(r.e.program.steps.size()));
  // Stack order (bottom first) is the order of the paths.
  std::vector<Attrs> areas = elements(r.html, "path", "area");
  ASSERT_FALSE(areas.empty());
  std::vector<int64_t> below(pts.size(), 0);
  std::map<std::string, size_t> index;
  for (size_t c = 0; c < kCategoryCount; ++c) index[std::string(category_name(static_cast<Category>(c)))] = c;
  for (const Attrs& area : areas) {
    size_t c = index.at(area.at("data-category"));
    std::vector<double> v = numbers(area.at("d"));
    ASSERT_EQ(v.size(), pts.size() * 8) << area.at("data-category");  // 4 vertices per point, x and y
    for (size_t i = 0; i < pts.size(); ++i) {
      int64_t top = below[i] + int_list(pts[i].at("data-bytes"))[c];
      double want_y = y0 + ph - ph * static_cast<double>(top) / y_max;
      double want_x = x0 + pw * std::stod(pts[i].at("data-first-step")) / n_steps;
      EXPECT_NEAR(v[4 * i], want_x, 0.006);
      EXPECT_NEAR(v[4 * i + 1], want_y, 0.006) << area.at("data-category") << " point " << i;
      EXPECT_NEAR(v[4 * i + 3], want_y, 0.006);
      below[i] = top;
    }
  }
  // Every byte is in some area: the top of the stack is the total.
  for (size_t i = 0; i < pts.size(); ++i) EXPECT_EQ(below[i], std::stoll(pts[i].at("data-total")));
}

void check_peak(const Rendered& r, const std::vector<Attrs>& pts) {
  std::vector<Attrs> marker = elements(r.html, "g", "peak-marker");
  ASSERT_EQ(marker.size(), 1u);
  EXPECT_EQ(std::stoll(marker[0].at("data-bytes")), r.e.peak_bytes);
  SimResult sim = simulate(r.e.program);
  EXPECT_EQ(std::stoi(marker[0].at("data-step")), sim.peak.step);
  int64_t most = 0;
  for (const Attrs& a : pts) most = std::max<int64_t>(most, std::stoll(a.at("data-total")));
  EXPECT_EQ(most, r.e.peak_bytes);
}

// ---- golden checks ---------------------------------------------------------------------------

TEST(HtmlReport, PlottedPointsAreTheSimulatedBytesPerCategory) {
  Rendered r = render(options_for("mlp:layers=4,dim=256", 2));
  // 45 steps: fewer than max_points, one point per step.
  std::vector<Attrs> pts = check_points(r);
  EXPECT_EQ(pts.size(), r.e.program.steps.size());
  check_areas(r, pts);
  check_peak(r, pts);
}

TEST(HtmlReport, TrainingWithGpuHasReservedAndCapacity) {
  Rendered r = render(options_for("resnet18", 4, "A100-SXM4-40GB"));
  ASSERT_TRUE(r.e.device.has_value());
  std::vector<Attrs> pts = check_points(r);
  check_areas(r, pts);
  check_peak(r, pts);
  // The reserved line's data is the caching allocator's replay: its largest value is the reserved
  // peak device_memory() reports, and it never falls below the exact bytes it stands for.
  int64_t reserved = 0;
  for (const Attrs& a : pts) {
    int64_t v = std::stoll(a.at("data-reserved"));
    EXPECT_GE(v, std::stoll(a.at("data-total"))) << "step " << a.at("data-step");
    reserved = std::max(reserved, v);
  }
  EXPECT_EQ(reserved, r.e.device->reserved_peak_bytes);
  EXPECT_EQ(elements(r.html, "path", "reserved").size(), 1u);
  // 40 GiB is far above a resnet18 batch 4 step: capacity is named, off the scale.
  EXPECT_NE(r.html.find("off the scale"), std::string::npos);
  // Phases of both training steps are shaded.
  std::vector<Attrs> ribbons = elements(r.html, "rect", "ribbon");
  int fwd = 0, bwd = 0, opt = 0;
  for (const Attrs& a : ribbons) {
    fwd += a.at("data-phase") == "forward";
    bwd += a.at("data-phase") == "backward";
    opt += a.at("data-phase") == "optimizer";
  }
  EXPECT_EQ(fwd, 2);
  EXPECT_EQ(bwd, 2);
  EXPECT_EQ(opt, 2);
  EXPECT_NE(r.html.find("training step 1"), std::string::npos);
  EXPECT_NE(r.html.find("training step 2"), std::string::npos);
}

TEST(HtmlReport, CapacityLineWhenTheGpuIsClose) {
  // gpt2 batch 8 seq 1024 needs about 26 GiB: a T4 (15 GiB) is on the chart's scale.
  EstimateOptions o = options_for("gpt2", 8, "T4");
  o.seq = 1024;
  Rendered r = render(o);
  EXPECT_EQ(elements(r.html, "line", "capacity").size(), 1u);
  EXPECT_EQ(elements(r.html, "line", "room").size(), 1u);
  EXPECT_NE(r.html.find("does not fit"), std::string::npos);
}

TEST(HtmlReport, DownsamplingKeepsEachRunsHighestStepAndThePeak) {
  // resnet18 training: 2 x (forward + backward + optimizer) is far more than 25 steps.
  HtmlReportOptions ho;
  ho.max_points = 25;
  Rendered r = render(options_for("resnet18", 2, "A100-SXM4-40GB"), ho);
  ASSERT_GT(r.e.program.steps.size(), 100u);
  std::vector<Attrs> pts = check_points(r);  // also checks each point is the max of its run
  EXPECT_LE(pts.size(), 25u);
  check_areas(r, pts);
  check_peak(r, pts);
  int64_t reserved = 0;
  for (const Attrs& a : pts) reserved = std::max<int64_t>(reserved, std::stoll(a.at("data-reserved")));
  EXPECT_EQ(reserved, r.e.device->reserved_peak_bytes);
}

TEST(HtmlReport, InferenceHasOnePhase) {
  EstimateOptions o = options_for("resnet18", 2);
  o.mode = RunMode::Inference;
  Rendered r = render(o);
  std::vector<Attrs> pts = check_points(r);
  check_areas(r, pts);
  check_peak(r, pts);
  for (const Attrs& a : elements(r.html, "rect", "ribbon")) {
    EXPECT_TRUE(a.at("data-phase") == "inference" || a.at("data-phase") == "setup") << a.at("data-phase");
  }
  EXPECT_EQ(elements(r.html, "path", "reserved").size(), 0u);  // no GPU given
}

TEST(HtmlReport, BreakdownAndLargestBuffersAreTheEstimates) {
  Rendered r = render(options_for("resnet18", 4));
  int64_t total = 0;
  std::map<std::string, size_t> index;
  for (size_t c = 0; c < kCategoryCount; ++c) index[std::string(category_name(static_cast<Category>(c)))] = c;
  std::vector<Attrs> bars = elements(r.html, "rect", "breakdown-bar");
  for (const Attrs& a : bars) {
    int64_t v = std::stoll(a.at("data-bytes"));
    EXPECT_EQ(v, r.e.breakdown_at_peak[index.at(a.at("data-category"))]);
    total += v;
  }
  EXPECT_EQ(total, r.e.peak_bytes);
  // Sorted by bytes, largest first.
  for (size_t i = 1; i < bars.size(); ++i) EXPECT_GE(std::stoll(bars[i - 1].at("data-bytes")), std::stoll(bars[i].at("data-bytes")));
  // The largest buffers table lists Estimate::largest_at_peak in order, with the op that made each.
  std::vector<Attrs> rows;
  for (size_t pos = r.html.find("<tr data-bytes=\""); pos != std::string::npos; pos = r.html.find("<tr data-bytes=\"", pos + 1)) {
    rows.push_back({{"data-bytes", r.html.substr(pos + 16, r.html.find('"', pos + 16) - pos - 16)}});
  }
  ASSERT_EQ(rows.size(), r.e.largest_at_peak.size());
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(std::stoll(rows[i].at("data-bytes")), r.e.largest_at_peak[i].bytes);
  for (const BufferAtPeak& b : r.e.largest_at_peak) {
    if (!b.op.empty()) {
      EXPECT_NE(r.html.find(svg::escape(b.op)), std::string::npos) << b.op;
    }
  }
}

// ---- weights per layer -----------------------------------------------------------------------

TEST(HtmlReport, WeightGroupsByModule) {
  // mlp:layers=4,dim=256 is Sequential(Linear, GELU) x 4: modules "0", "2", "4", "6", each
  //   weight 256 x 256 x 4 B = 262,144 + bias 256 x 4 B = 1,024 -> 263,168 bytes, 65,792 parameters;
  //   4 x 263,168 = 1,052,672 bytes = Graph::weights_bytes.
  Rendered r = render(options_for("mlp:layers=4,dim=256", 2));
  std::vector<WeightGroup> groups = weight_groups(r.g);
  ASSERT_EQ(groups.size(), 4u);
  const char* names[] = {"0", "2", "4", "6"};  // equal bytes: natural name order
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(groups[i].module, names[i]);
    EXPECT_EQ(groups[i].bytes, 263168);
    EXPECT_EQ(groups[i].parameters, 65792);
    EXPECT_EQ(groups[i].tensors, 2);
  }
  std::vector<Attrs> bars = elements(r.html, "rect", "weight-bar");
  ASSERT_EQ(bars.size(), 4u);
  int64_t total = 0;
  for (const Attrs& a : bars) total += std::stoll(a.at("data-bytes"));
  EXPECT_EQ(total, 1052672);
  EXPECT_EQ(total, r.e.weights_bytes);
}

TEST(HtmlReport, WeightGroupsCountBuffersAndTiedParametersOnce) {
  // resnet18 "layer1.0.bn1": weight, bias, running_mean, running_var (64 x 4 B = 256 each) and
  // num_batches_tracked (one int64, 8 B) -> 4 x 256 + 8 = 1,032 bytes, 128 parameters.
  Rendered r = render(options_for("resnet18", 1));
  std::vector<WeightGroup> groups = weight_groups(r.g);
  auto bn = std::find_if(groups.begin(), groups.end(), [](const WeightGroup& w) { return w.module == "layer1.0.bn1"; });
  ASSERT_NE(bn, groups.end());
  EXPECT_EQ(bn->bytes, 1032);
  EXPECT_EQ(bn->parameters, 128);
  EXPECT_EQ(bn->tensors, 5);
  int64_t total = 0;
  for (const WeightGroup& w : groups) total += w.bytes;
  EXPECT_EQ(total, r.g.weights_bytes());
  for (size_t i = 1; i < groups.size(); ++i) EXPECT_GE(groups[i - 1].bytes, groups[i].bytes);
  // GPT-2 ties lm_head to wte: the shared storage counts once.
  Graph gpt = build_graph(options_for("gpt2", 1), 1);
  int64_t gpt_total = 0;
  for (const WeightGroup& w : weight_groups(gpt)) gpt_total += w.bytes;
  EXPECT_EQ(gpt_total, gpt.weights_bytes());
}

TEST(HtmlReport, EqualWeightGroupsInNaturalOrder) {
  // BERT's 12 encoder layers have equal-sized modules: layer 2 comes before layer 10.
  Graph g = build_graph(options_for("bert-base", 1), 1);
  std::vector<WeightGroup> groups = weight_groups(g);
  auto pos = [&](const std::string& m) {
    return std::find_if(groups.begin(), groups.end(), [&](const WeightGroup& w) { return w.module == m; }) - groups.begin();
  };
  EXPECT_LT(pos("bert.encoder.layer.2.intermediate.dense"), pos("bert.encoder.layer.10.intermediate.dense"));
  EXPECT_LT(pos("bert.encoder.layer.0.intermediate.dense"), pos("bert.encoder.layer.1.intermediate.dense"));
}

// ---- the page --------------------------------------------------------------------------------

TEST(HtmlReport, DeterministicAndSelfContained) {
  EstimateOptions o = options_for("resnet18", 4, "A100-SXM4-40GB");
  Result<std::string> a = html_report(o);
  Result<std::string> b = html_report(o);
  ASSERT_TRUE(a.ok()) << a.error();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a.value(), b.value());
  const std::string& h = a.value();
  EXPECT_EQ(h.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(h.find("</html>"), std::string::npos);
  // Nothing fetched, nothing executed.
  for (const char* banned : {"<script", "://", "@import", "url(", "<link", "<img", "<iframe", "onload", "onclick"}) {
    EXPECT_EQ(h.find(banned), std::string::npos) << banned;
  }
  // The title names model, batch, mode, precision and GPU.
  size_t t0 = h.find("<title>"), t1 = h.find("</title>");
  std::string title = h.substr(t0, t1 - t0);
  for (const char* part : {"resnet18", "batch 4", "training", "fp32", "A100-SXM4-40GB"}) {
    EXPECT_NE(title.find(part), std::string::npos) << part << " in " << title;
  }
  // Axes in binary units.
  EXPECT_NE(h.find(" MiB</text>"), std::string::npos);
}

TEST(HtmlReport, RenderingTwiceFromOneEstimateIsIdentical) {
  Rendered r = render(options_for("bert-base", 2, "L4"));
  EXPECT_EQ(html_report(r.e, r.g), r.html);
}

TEST(HtmlReport, EstimateWithoutProgramIsABug) {
  EstimateOptions o = options_for("mlp:layers=1,dim=8", 1);
  o.keep_program = false;
  Result<Estimate> e = estimate(o);
  ASSERT_TRUE(e.ok());
  EXPECT_THROW(html_report(e.value(), build_graph(o, 1)), std::logic_error);
}

TEST(HtmlReport, BadOptionsComeBackAsOneLine) {
  Result<std::string> r = html_report(options_for("nosuchmodel", 1));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("unknown model"), std::string::npos);
}

TEST(HtmlReport, WriteFileAtomically) {
  std::string dir = ::testing::TempDir() + "html_report_write";
  fs::create_directories(dir);
  std::string path = dir + "/r.html";
  Result<int64_t> w = write_file_atomically(path, "hello");
  ASSERT_TRUE(w.ok()) << w.error();
  EXPECT_EQ(w.value(), 5);
  std::ifstream f(path);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "hello");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  // A directory in the way of the rename: one line, no file left behind.
  fs::create_directories(dir + "/isdir");
  Result<int64_t> bad = write_file_atomically(dir + "/isdir", "x");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("isdir"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir + "/isdir.tmp"));
  Result<int64_t> missing = write_file_atomically(dir + "/no/such/dir/r.html", "x");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("No such file"), std::string::npos);
}

// ---- svg helpers -----------------------------------------------------------------------------

TEST(Svg, NumbersAndTicks) {
  EXPECT_EQ(svg::num(12), "12");
  EXPECT_EQ(svg::num(12.5), "12.5");
  EXPECT_EQ(svg::num(1.0 / 3), "0.33");
  EXPECT_EQ(svg::num(-0.001), "0");
  EXPECT_EQ(svg::escape("a<b & \"c\"'"), "a&lt;b &amp; &quot;c&quot;&#39;");
  // 2.89 GiB (resnet50's peak) x 1.06 = 3.06 GiB; 3.06 / 6 ticks = 0.51 -> the next nice step is
  // 1 GiB (0.5 < 0.51), the axis ends at 4 GiB.
  svg::ByteTicks t = svg::byte_ticks(3.06 * (1 << 30), 6);
  EXPECT_EQ(t.unit, "GiB");
  EXPECT_DOUBLE_EQ(t.step_units, 1);
  EXPECT_DOUBLE_EQ(t.top_bytes, 4.0 * (1 << 30));
  EXPECT_EQ(t.values.size(), 5u);
  // 2.3 GiB / 6 = 0.38 -> 0.5 GiB steps up to 2.5 GiB.
  svg::ByteTicks h = svg::byte_ticks(2.3 * (1 << 30), 6);
  EXPECT_DOUBLE_EQ(h.step_units, 0.5);
  EXPECT_DOUBLE_EQ(h.top_bytes, 2.5 * (1 << 30));
  EXPECT_EQ(svg::tick_label(t, 1.5 * (1 << 30)), "1.5 GiB");
  EXPECT_EQ(svg::tick_label(t, 0), "0");
  // 23.6 MiB / 6 = 3.9 -> 5 MiB steps up to 25 MiB.
  svg::ByteTicks m = svg::byte_ticks(23.6 * (1 << 20), 6);
  EXPECT_EQ(m.unit, "MiB");
  EXPECT_DOUBLE_EQ(m.step_units, 5);
  EXPECT_DOUBLE_EQ(m.top_bytes, 25.0 * (1 << 20));
}

// ---- the CLI ---------------------------------------------------------------------------------

using headroom::testing::CliRun;
using headroom::testing::run_cli;
using headroom::testing::expect_usage_error;


TEST(HtmlReportCli, WritesTheFileAndNothingOnStdout) {
  std::string dir = ::testing::TempDir() + "html_report_cli";
  fs::create_directories(dir);
  std::string path = dir + "/mlp.html";
  fs::remove(path);
  CliRun r = run_cli("report mlp:layers=4,dim=256 --batch 2 --gpu A100-80GB -o " + path);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("headroom: wrote " + path + " (", 0), 0u) << r.err;  // the file is named
  EXPECT_TRUE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  // Same bytes as the library's page, with the CLI's default 5% margin.
  EstimateOptions o = options_for("mlp:layers=4,dim=256", 2, "A100-80GB");
  o.gpu->margin = 0.05;
  std::ifstream f(path);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, html_report(o).value());
}

TEST(HtmlReportCli, ErrorsAreOneLineAndLeaveNoFile) {
  std::string dir = ::testing::TempDir() + "html_report_cli_errors";
  fs::create_directories(dir);
  std::string path = dir + "/r.html";
  fs::remove(path);
  expect_usage_error("report resnet18", "--output");
  expect_usage_error("report nosuchmodel -o " + path, "unknown model");
  expect_usage_error("report resnet18 --batch 0 -o " + path, "--batch must be a positive integer");
  expect_usage_error("report resnet18 --json -o " + path, "--json");
  EXPECT_FALSE(fs::exists(path));
  expect_usage_error("report mlp:layers=1,dim=8 -o " + dir + "/no/such/dir/r.html", "cannot write");
  fs::create_directories(dir + "/adir");
  expect_usage_error("report mlp:layers=1,dim=8 -o " + dir + "/adir", "cannot write");
  EXPECT_FALSE(fs::exists(dir + "/adir.tmp"));
}

// ---- the terminal ----------------------------------------------------------------------------

TEST(TerminalColor, OnlyWhenAsked) {
  // On the CPU profile there are no cuBLAS workspaces to dwarf the weights bar.
  EstimateOptions o = options_for("mlp:layers=2,dim=64", 2);
  o.device = "cpu";
  Result<Estimate> e = estimate(o);
  ASSERT_TRUE(e.ok());
  std::string plain = estimate_text(e.value(), false);
  EXPECT_EQ(plain.find('\033'), std::string::npos);
  EXPECT_NE(plain.find("█"), std::string::npos);  // the bar is there without colour
  std::string color = estimate_text(e.value(), true);
  // The breakdown bars take the report's palette: weights are Okabe-Ito blue (0, 114, 178).
  EXPECT_NE(color.find("\033[38;2;0;114;178m█"), std::string::npos);
  // Through a pipe (not a terminal) the CLI prints no escape codes.
  CliRun r = run_cli("estimate mlp:layers=2,dim=64 --batch 2 --device cpu");
  ASSERT_EQ(r.code, 0);
  EXPECT_EQ(r.out.find('\033'), std::string::npos);
}

// ---- a real browser --------------------------------------------------------------------------

TEST(HtmlReportBrowser, RendersInHeadlessChromiumWithoutConsoleErrors) {
  std::string dir = artifact_dir();
  std::string html = dir + "/report.html";
  CliRun r = run_cli("report resnet50 --batch 32 --gpu A100-40GB -o " + html);
  ASSERT_EQ(r.code, 0) << r.err;
  expect_renders_in_chromium(html, dir + "/report.png");
}

}  // namespace
}  // namespace headroom
