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
#include <tuple>
#include <vector>

#include "estimate/estimate.h"
#include "measure/nvml.h"
#include "measure/watch.h"
#include "measure/watch_samples.h"
#include "cost/cost_model.h"
#include "plan/planner.h"
#include "sim/device_catalog.h"
#include "report/estimate_report.h"
#include "report/html_report.h"
#include "report/svg.h"
#include "sim/simulate.h"
#include "util/file.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

namespace fs = std::filesystem;
using testing::artifact_dir;
using testing::Attrs;
using testing::elements;
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
  // The x axis is the cost model's timeline: each point spans its first step's start to its last
  // step's end, as step_times() gives them (time_axis), and the axis ends with the last step.
  const TimeAxis axis = time_axis(r.e, r.g);
  EXPECT_EQ(tl[0].at("data-x-unit"), axis.in_ms ? "ms" : "step");
  const double x_max = std::stod(tl[0].at("data-x-max"));
  EXPECT_NEAR(x_max, axis.total, 1e-4);
  for (const Attrs& a : pts) {
    EXPECT_NEAR(std::stod(a.at("data-start")), axis.start[std::stoul(a.at("data-first-step"))], 1e-4);
    EXPECT_NEAR(std::stod(a.at("data-end")), axis.end[std::stoul(a.at("data-last-step"))], 1e-4);
  }
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
      double want_x = x0 + pw * axis.start[std::stoul(pts[i].at("data-first-step"))] / axis.total;
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

TEST(HtmlReport, TheTimeAxisIsTheCostModelsTimeline) {
  Rendered r = render(options_for("resnet18", 4, "A100-SXM4-40GB"));
  const TimeAxis axis = time_axis(r.e, r.g);
  ASSERT_TRUE(axis.in_ms);
  EXPECT_EQ(axis.gpu, "A100-SXM4-40GB");
  const CostModel model(DeviceCatalog::builtin().find("A100-SXM4-40GB"));
  const int it = r.e.options.iterations;
  StepTimes t = step_times(model, r.g, r.e.program, MemoryPlan{}, r.e.options.optimizer, it);
  EXPECT_EQ(axis.start, t.start_ms);
  EXPECT_EQ(axis.end, t.end_ms);
  EXPECT_EQ(axis.total, t.end_ms.back());
  // The last training step spans exactly the step time the planner reports for it.
  IterationTime step = iteration_time(model, r.g, r.e.program, MemoryPlan{}, r.e.options.optimizer, it);
  size_t first = r.e.program.steps.size(), last = 0;
  for (size_t i = 0; i < r.e.program.steps.size(); ++i) {
    if (r.e.program.steps[i].iteration == it && r.e.program.steps[i].phase != Phase::Setup) {
      first = std::min(first, i);
      last = i;
    }
  }
  EXPECT_NEAR(axis.end[last] - axis.start[first], step.total_ms, 1e-9);
  EXPECT_NE(r.html.find("predicted time (ms, roofline on A100-SXM4-40GB"), std::string::npos);
  EXPECT_EQ(r.html.find("simulated step ("), std::string::npos);
  // Without a GPU the planner's default GPU times the steps.
  Rendered cpu = render(options_for("mlp:layers=4,dim=256", 2));
  EXPECT_EQ(time_axis(cpu.e, cpu.g).gpu, DeviceCatalog::builtin().find(kDefaultCostGpu).name);
}

// The rendered plot's frame.
struct Frame {
  double x0, y0, pw, ph, y_max, x_max;
};
Frame frame_of(const std::string& html) {
  std::vector<Attrs> tl = elements(html, "g", "timeline");
  EXPECT_EQ(tl.size(), 1u);
  std::vector<double> plot = numbers(tl[0].at("data-plot"));
  return {plot[0], plot[1], plot[2], plot[3], std::stod(tl[0].at("data-y-max")), std::stod(tl[0].at("data-x-max"))};
}

TEST(HtmlReport, AShortPeakIsDrawnAtAMinimumWidthAndMarked) {
  // resnet50 batch 32: the peak is one ReLU of the second step's backward, 86 us of a 55 ms run,
  // under a pixel wide on the 884-pixel plot.
  Rendered r = render(options_for("resnet50", 32, "A100-SXM4-40GB"));
  std::vector<Attrs> marker = elements(r.html, "g", "peak-marker");
  ASSERT_EQ(marker.size(), 1u);
  EXPECT_LT(std::stod(marker[0].at("data-width-px")), 4.0);
  EXPECT_EQ(marker[0].at("data-widened"), "true");
  EXPECT_NE(r.html.find("(drawn wider)"), std::string::npos);
  // The widened bar is the peak's stacked bytes, 4 pixels wide.
  const Frame f = frame_of(r.html);
  double height = 0;
  std::vector<Attrs> bars = elements(r.html, "rect", "short-peak");
  ASSERT_FALSE(bars.empty());
  for (const Attrs& b : bars) {
    EXPECT_EQ(b.at("width"), "4");
    height += std::stod(b.at("height"));
  }
  EXPECT_NEAR(height, f.ph * static_cast<double>(r.e.peak_bytes) / f.y_max, 0.01 * static_cast<double>(bars.size()));
  // A long peak is not widened.
  Rendered mlp = render(options_for("mlp:layers=4,dim=256", 2));
  EXPECT_EQ(elements(mlp.html, "g", "peak-marker")[0].count("data-widened"), 0u);
}

// The peak's label box crosses no horizontal line and sits above every curve under it.
void expect_label_clear(const Rendered& r) {
  const Frame f = frame_of(r.html);
  std::vector<Attrs> box = elements(r.html, "rect", "peak-label");
  ASSERT_EQ(box.size(), 1u);
  const double bx = std::stod(box[0].at("x")), by = std::stod(box[0].at("y")), bw = std::stod(box[0].at("width")),
               bh = std::stod(box[0].at("height"));
  EXPECT_GE(by, f.y0);
  for (const char* cls : {"capacity", "room"}) {
    for (const Attrs& l : elements(r.html, "line", cls)) {
      const double y = std::stod(l.at("y1"));
      EXPECT_FALSE(y > by && y < by + bh) << cls << " line at " << y << " crosses the label " << by << ".." << by + bh;
    }
  }
  // The stacked total passes under the box; the reserved line wholly above or wholly below it.
  int reserved_above = 0, reserved_below = 0;
  for (const Attrs& pt : elements(r.html, "rect", "hover")) {
    const double a = f.x0 + f.pw * std::stod(pt.at("data-start")) / f.x_max, b = f.x0 + f.pw * std::stod(pt.at("data-end")) / f.x_max;
    if (b < bx || a > bx + bw) continue;
    auto y_of = [&](const char* key) { return f.y0 + f.ph - f.ph * std::stod(pt.at(key)) / f.y_max; };
    EXPECT_GT(y_of("data-total"), by + bh) << "step " << pt.at("data-step") << " under the label";
    if (!pt.count("data-reserved")) continue;
    const double y = y_of("data-reserved");
    reserved_above += y < by;
    reserved_below += y > by + bh;
    EXPECT_TRUE(y < by || y > by + bh) << "the reserved line of step " << pt.at("data-step") << " crosses the label";
  }
  EXPECT_FALSE(reserved_above > 0 && reserved_below > 0) << "the reserved line crosses the label";
}

TEST(HtmlReport, ThePeakLabelCoversNoLine) {
  // gpt2 on a T4: the peak (about 26 GiB) is over the 15 GiB capacity line, near the top of the
  // scale: the label cannot go above the marker and must not sit on the capacity or room line.
  EstimateOptions o = options_for("gpt2", 8, "T4");
  o.seq = 1024;
  expect_label_clear(render(o));
  expect_label_clear(render(options_for("resnet50", 32, "A100-SXM4-40GB")));
  expect_label_clear(render(options_for("mlp:layers=4,dim=256", 2)));
}

// ---- --measured ------------------------------------------------------------------------------

TEST(WatchSamples, ReadsBackWhatWatchWrites) {
  // Two devices; device 1 holds the most; no process column: the device's used memory.
  std::vector<WatchSample> rows = {{0, 0, 100, 1000, std::nullopt, std::nullopt}, {0, 1, 300, 2000, std::nullopt, std::nullopt},
                                   {100, 0, 150, 1000, std::nullopt, std::nullopt}, {100, 1, 700, 2000, std::nullopt, std::nullopt},
                                   {200, 0, 120, 1000, std::nullopt, std::nullopt}, {200, 1, 700, 2000, std::nullopt, std::nullopt}};
  for (SampleFormat fmt : {SampleFormat::Csv, SampleFormat::Jsonl}) {
    std::string text = fmt == SampleFormat::Csv ? sample_csv_header() : "";
    for (const WatchSample& w : rows) text += sample_row(w, fmt);
    Result<MeasuredSeries> m = parse_watch_samples(text, fmt == SampleFormat::Csv ? "w.csv" : "w.jsonl");
    ASSERT_TRUE(m.ok()) << m.error();
    EXPECT_EQ(m.value().device, 1);
    EXPECT_FALSE(m.value().process);
    EXPECT_EQ(m.value().device_total_bytes, 2000);
    ASSERT_EQ(m.value().samples.size(), 3u);
    EXPECT_EQ(m.value().samples[1].t_ms, 100);
    EXPECT_EQ(m.value().samples[1].bytes, 700);
    EXPECT_EQ(m.value().peak, 1u);  // the first of the two 700s
  }
  // A watched process: its column, 0 where it had not appeared yet.
  std::string csv = sample_csv_header() + sample_row({0, 0, 500, 1000, std::nullopt, std::nullopt}, SampleFormat::Csv) +
                    sample_row({10, 0, 600, 1000, int64_t{250}, std::nullopt}, SampleFormat::Csv);
  Result<MeasuredSeries> p = parse_watch_samples(csv, "p.csv");
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_TRUE(p.value().process);
  EXPECT_EQ(p.value().samples[0].bytes, 0);
  EXPECT_EQ(p.value().samples[1].bytes, 250);
}

TEST(WatchSamples, AFileThatIsNotAWatchFileIsOneLine) {
  const std::string h = sample_csv_header();
  for (auto [text, path, fragment] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"t,x\n1,2\n", "a.csv", "line 1: not a `headroom watch` CSV"},
           {h + "0,0,1,2,,\n", "a.csv", "line 2: expected 7 columns"},
           {h + "0,0,-1,2,,,\n", "a.csv", "device_used_bytes is not a whole number"},
           {h + "10,0,1,2,,,\n5,0,1,2,,,\n", "a.csv", "line 3: t_ms goes back in time"},
           {h, "a.csv", "no samples"},
           {"{\"t_ms\": 0}\n", "a.jsonl", "device must be a whole number"},
           {"[1]\n", "a.jsonl", "not a JSON object"},
           {h, "a.txt", "must end in .csv or .jsonl"}}) {
    Result<MeasuredSeries> m = parse_watch_samples(text, path);
    ASSERT_FALSE(m.ok()) << text;
    EXPECT_NE(m.error().find(fragment), std::string::npos) << m.error();
    EXPECT_EQ(m.error().find('\n'), std::string::npos) << m.error();
  }
}

TEST(HtmlReport, TheMeasuredLineIsPlacedAtThePredictedPeak) {
  EstimateOptions o = options_for("resnet18", 8, "A100-SXM4-40GB");
  Rendered plain = render(o);
  // A synthetic series: idle, a run whose peak (1.5 GiB) is at t = 5,000 ms, idle again.
  MeasuredSeries m;
  m.path = "synthetic.csv";
  for (int64_t t = 0; t <= 10000; t += 100) m.samples.push_back({t, t == 5000 ? int64_t{1536} << 20 : int64_t{600} << 20});
  m.peak = 50;
  HtmlReportOptions ho;
  ho.measured = m;
  Rendered r = render(o, ho);
  EXPECT_EQ(elements(plain.html, "g", "measured").size(), 0u);
  std::vector<Attrs> g = elements(r.html, "g", "measured");
  ASSERT_EQ(g.size(), 1u);
  // The predicted device total's peak is the estimate's: context + NCCL + reserved peak.
  std::vector<Attrs> predicted = elements(r.html, "path", "predicted-total");
  ASSERT_EQ(predicted.size(), 1u);
  EXPECT_EQ(std::stoll(predicted[0].at("data-bytes")), r.e.device->device_total_bytes);
  // The measured peak moves to the middle of the first point holding the reserved peak.
  const TimeAxis axis = time_axis(r.e, r.g);
  double peak_ms = -1;
  for (const Attrs& pt : elements(r.html, "rect", "hover")) {
    if (std::stoll(pt.at("data-reserved")) == r.e.device->reserved_peak_bytes) {
      peak_ms = (axis.start[std::stoul(pt.at("data-first-step"))] + axis.end[std::stoul(pt.at("data-last-step"))]) / 2;
      break;
    }
  }
  ASSERT_GE(peak_ms, 0);
  EXPECT_NEAR(std::stod(g[0].at("data-shift-ms")), peak_ms - 5000, 1e-4);
  // The run lasts a few ms: every sample but the peak and its neighbours is off the axis, and the
  // page says how many.
  const std::vector<int64_t> drawn = int_list(g[0].at("data-t-ms"));
  EXPECT_EQ(drawn.size() + std::stoul(g[0].at("data-before")) + std::stoul(g[0].at("data-after")), m.samples.size() + 1)
      << "the sample before the peak is drawn and counted before (it holds until the peak)";
  EXPECT_TRUE(std::find(drawn.begin(), drawn.end(), 5000) != drawn.end());
  EXPECT_NE(r.html.find("fall outside the predicted run"), std::string::npos);
  EXPECT_EQ(html_report(r.e, r.g, ho), r.html);  // deterministic with a measured series too
  EXPECT_NE(r.html.find("measured (device)"), std::string::npos);
  // Without a GPU there is nothing to compare with: no line.
  Rendered cpu = render(options_for("resnet18", 8), ho);
  EXPECT_EQ(elements(cpu.html, "g", "measured").size(), 0u);
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

TEST(HtmlReportCli, GenerationIsPlottedAgainstTheStepIndex) {
  // Generation simulates a window of forwards on its own graph, not the one the report rebuilds:
  // no cost-model times for it, the axis says steps.
  std::string out = ::testing::TempDir() + "html_report_generate.html";
  CliRun r = run_cli(std::string("report ") + HEADROOM_SOURCE_DIR +
                     "/data/hf-configs/llama-3-8b.json --mode generate --prompt 64 --new-tokens 4 --gpu RTX-4090 -o " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream f(out);
  std::string html((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<Attrs> tl = elements(html, "g", "timeline");
  ASSERT_EQ(tl.size(), 1u);
  EXPECT_EQ(tl[0].at("data-x-unit"), "step");
  EXPECT_NE(html.find("simulated step ("), std::string::npos);
}

TEST(HtmlReportCli, MeasuredNeedsAGpuAndAWatchFile) {
  std::string dir = ::testing::TempDir() + "html_report_measured";
  fs::create_directories(dir);
  const std::string csv = dir + "/w.csv", out = dir + "/r.html";
  {
    std::ofstream f(csv);
    f << sample_csv_header() << "0,0,1000,40000000000,,,\n100,0,2000,40000000000,,,\n";
  }
  fs::remove(out);
  expect_usage_error("report mlp:layers=2,dim=8 --measured " + csv + " -o " + out, "--measured draws NVML readings");
  expect_usage_error("report mlp:layers=2,dim=8 --gpu A100-40GB --measured " + dir + "/none.csv -o " + out, "none.csv");
  {
    std::ofstream f(dir + "/bad.csv");
    f << "time,bytes\n1,2\n";
  }
  expect_usage_error("report mlp:layers=2,dim=8 --gpu A100-40GB --measured " + dir + "/bad.csv -o " + out, "not a `headroom watch` CSV");
  EXPECT_FALSE(fs::exists(out));
  CliRun r = run_cli("report mlp:layers=2,dim=8 --gpu A100-40GB --measured " + csv + " -o " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream f(out);
  std::string html((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(elements(html, "g", "measured").size(), 1u);
}

// ---- a real browser --------------------------------------------------------------------------

// A fake NVML script (tests/fake_nvml) shaped like the prediction: idle at the CUDA context for
// 20 samples, then one sample per predicted millisecond of the predicted device total scaled by
// 1.04 (a made-up 4% over the prediction, as allocator growth might show), then idle again.
// Synthetic: it exercises `watch` and `report --measured`; it measures nothing. Returns the
// script and its number of lines.
std::pair<std::string, size_t> fake_nvml_script(const std::string& html, int64_t context, int64_t total) {
  std::string s = "# synthetic: predicted device total x 1.04, written by html_report_test\n";
  size_t n = 0;
  auto line = [&](int64_t used) {
    s += std::to_string(total) + " " + std::to_string(used) + " 90 40\n";
    ++n;
  };
  for (int i = 0; i < 20; ++i) line(context);
  std::vector<Attrs> pts = elements(html, "rect", "hover");
  const double end = std::stod(pts.back().at("data-end"));
  size_t i = 0;
  for (double t = 0; t < end; t += 1) {
    while (i + 1 < pts.size() && std::stod(pts[i].at("data-end")) <= t) ++i;
    line(static_cast<int64_t>(1.04 * static_cast<double>(std::stoll(pts[i].at("data-reserved")) + context)));
  }
  for (int k = 0; k < 20; ++k) line(context);
  return {s, n};
}

TEST(HtmlReportBrowser, ReflowsAt390To2560WithAMeasuredLine) {
  std::string dir = artifact_dir();
  std::string html = dir + "/report.html", plain = dir + "/report-plain.html";
  CliRun r = run_cli("report resnet50 --batch 32 --gpu A100-40GB -o " + plain);
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream pf(plain);
  std::string page((std::istreambuf_iterator<char>(pf)), std::istreambuf_iterator<char>());
  EstimateOptions o = options_for("resnet50", 32, "A100-40GB");
  Result<Estimate> e = estimate(o);
  ASSERT_TRUE(e.ok());
  const std::string script = dir + "/fake-nvml-script.txt", csv = dir + "/watch-synthetic.csv";
  auto [text, samples] = fake_nvml_script(page, e.value().device->context_bytes, e.value().device->capacity_bytes);
  {
    std::ofstream f(script);
    f << text;
  }
  setenv(kNvmlLibraryEnv, HEADROOM_FAKE_NVML, 1);
  setenv("FAKE_NVML_SCRIPT", script.c_str(), 1);
  CliRun w = run_cli("watch --interval 1ms --samples " + std::to_string(samples) + " -o " + csv);
  unsetenv(kNvmlLibraryEnv);
  unsetenv("FAKE_NVML_SCRIPT");
  ASSERT_EQ(w.code, 0) << w.err;
  r = run_cli("report resnet50 --batch 32 --gpu A100-40GB --measured " + csv + " -o " + html);
  ASSERT_EQ(r.code, 0) << r.err;
  testing::expect_clean_layout(plain, "report-plain");
  testing::expect_clean_layout(html, "report");
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
