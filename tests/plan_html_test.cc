// The plan page (src/report/plan_html.h): every plotted point is the live bytes of the
// re-simulated candidate's program at that step's high-water mark (replayed here from the
// Program's events, not by the report's code), on the cost model's time axis; the budget line
// sits at the budget (less the CUDA context on a GPU); the chosen strategy is highlighted; the
// CLI writes the page atomically; it renders in headless Chromium (test-artifacts/plan.png).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <tuple>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "html_test_util.h"
#include "plan/planner.h"
#include "report/plan_curves.h"
#include "report/plan_html.h"
#include "sim/device_catalog.h"
#include "sim/simulate.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

namespace fs = std::filesystem;
using testing::Attrs;
using testing::elements;
using testing::int_list;
using testing::numbers;

// mlp:layers=8,dim=256 at batch 2048 on the CPU peaks at 50,356,292 live bytes in the backward
// of step 2 (headroom estimate); a 40 MiB budget makes the planner checkpoint one segment.
Plan mlp_plan() {
  PlanRequest req;
  req.run.model = "mlp:layers=8,dim=256";
  req.run.batch = 2048;
  req.run.device = "cpu";
  req.budget_bytes = int64_t{40} << 20;
  Result<Plan> r = make_plan(req);
  EXPECT_TRUE(r.ok()) << r.error();
  return r.value();
}

// resnet18 at batch 8 on an A100 with half the activations: gradient accumulation wins.
Plan resnet_plan() {
  PlanRequest req;
  req.run.model = "resnet18";
  req.run.batch = 8;
  req.run.gpu = GpuOptions{};
  req.run.gpu->gpu = "A100-SXM4-40GB";
  req.activation_fraction = 0.4;  // accumulation wins here (at 0.45-0.5, with the measured CUDA rules, sqrt checkpointing does)
  Result<Plan> r = make_plan(req);
  EXPECT_TRUE(r.ok()) << r.error();
  return r.value();
}

// Live bytes at each step's high-water mark (the most during the step, its start included),
// replayed from the events.
std::vector<int64_t> high_water_marks(const Program& p) {
  std::vector<int64_t> out(p.steps.size());
  int64_t live = 0;
  for (size_t s = 0; s < p.steps.size(); ++s) {
    int64_t hw = live;
    for (int32_t e = p.steps[s].first_event; e < p.steps[s].end_event; ++e) {
      const Event& ev = p.events[static_cast<size_t>(e)];
      const int64_t b = p.buffers[static_cast<size_t>(ev.buffer)].bytes;
      if (ev.kind == Event::Kind::Alloc) live += b;
      if (ev.kind == Event::Kind::Free) live -= b;
      hw = std::max(hw, live);
    }
    out[s] = hw;
  }
  return out;
}

struct Plot {
  double x, y, w, h, y_max, x_max_ms;
};
Plot plot_from(const Attrs& a) {
  std::vector<double> v = numbers(a.at("data-plot"));
  EXPECT_EQ(v.size(), 4u);
  return {v[0], v[1], v[2], v[3], std::stod(a.at("data-y-max")), std::stod(a.at("data-x-max-ms"))};
}
// The main chart's plot (the first; the small multiples follow it).
Plot plot_of(const std::string& html) {
  std::vector<Attrs> g = elements(html, "g", "plan-chart");
  EXPECT_FALSE(g.empty());
  return plot_from(g[0]);
}

// Every curve against its candidate's program, rebuilt through the planner's own context.
void check_curves(const Plan& plan, const std::string& html) {
  PlanContext ctx(plan.run, plan.budget_bytes, CostModel(DeviceCatalog::builtin().find(plan.cost_gpu), plan.constants));
  std::vector<Attrs> paths = elements(html, "path", "strategy-curve");
  size_t applicable = 0;
  for (const StrategyResult& r : plan.alternatives) applicable += r.applicable;
  ASSERT_EQ(paths.size(), 1 + applicable);
  std::vector<Attrs> peaks = elements(html, "g", "curve-peak");
  ASSERT_LE(peaks.size(), paths.size());
  for (const Attrs& path : paths) {
    const std::string name = path.at("data-strategy");
    SCOPED_TRACE(name);
    const Plot pl = plot_from(path);  // its own chart: the main one or a small multiple
    const bool clipped = path.count("data-clipped") == 1;
    const StrategyResult* r = nullptr;
    for (const StrategyResult& a : plan.alternatives) {
      if (a.name == name) r = &a;
    }
    ASSERT_TRUE(name == "none" || r != nullptr);
    const Candidate c = r ? r->candidate : Candidate{};
    const Evaluation& e = r ? r->eval : plan.baseline;
    Program p = ctx.program(c);
    std::vector<int64_t> hw = high_water_marks(p);
    std::vector<int64_t> steps, expected;
    for (size_t s = 0; s < p.steps.size(); ++s) {
      if (p.steps[s].iteration == plan.run.iterations && p.steps[s].phase != Phase::Setup) {
        steps.push_back(static_cast<int64_t>(s));
        expected.push_back(hw[s]);
      }
    }
    // No downsampling at these sizes: one point per step of the iteration.
    EXPECT_EQ(int_list(path.at("data-steps")), steps);
    EXPECT_EQ(int_list(path.at("data-first-steps")), steps);
    EXPECT_EQ(int_list(path.at("data-last-steps")), steps);
    std::vector<int64_t> bytes = int_list(path.at("data-bytes"));
    EXPECT_EQ(bytes, expected);
    // The curve's top is the simulator's peak of that training step.
    SimResult sim = simulate(p);
    const int64_t top = *std::max_element(bytes.begin(), bytes.end());
    EXPECT_EQ(top, sim.iterations[static_cast<size_t>(plan.run.iterations - 1)].peak.bytes);
    // Time: from 0 to the step time the table reports, never backwards.
    std::vector<double> ms = numbers(path.at("data-ms"));
    ASSERT_EQ(ms.size(), bytes.size() + 1);
    EXPECT_EQ(ms.front(), 0);
    EXPECT_NEAR(ms.back(), e.time.total_ms, 1e-3);
    EXPECT_TRUE(std::is_sorted(ms.begin(), ms.end()));
    EXPECT_EQ(clipped, ms.back() > pl.x_max_ms + 1e-4);
    // The drawn vertices: (t_i, b_i), (t_i+1, b_i) on the axes of data-plot; a clipped curve
    // stops at the plot's right edge (the points starting past it are not drawn).
    std::vector<double> d = numbers(path.at("d"));
    size_t shown = 0;
    while (shown < bytes.size() && ms[shown] < pl.x_max_ms) ++shown;
    ASSERT_EQ(d.size(), 4 * shown);
    // data-ms has 4 decimals: 0.00005 ms of rounding, more pixels on a short axis, plus the
    // path's 2 decimals.
    const double tol = pl.w * 5e-5 / pl.x_max_ms + 0.006;
    for (size_t i = 0; i < shown; ++i) {
      const double y = pl.y + pl.h - pl.h * static_cast<double>(bytes[i]) / pl.y_max;
      EXPECT_NEAR(d[4 * i], pl.x + pl.w * ms[i] / pl.x_max_ms, tol) << i;
      EXPECT_NEAR(d[4 * i + 1], y, 0.006) << i;
      EXPECT_NEAR(d[4 * i + 2], pl.x + pl.w * std::min(ms[i + 1], pl.x_max_ms) / pl.x_max_ms, tol) << i;
      EXPECT_NEAR(d[4 * i + 3], y, 0.006) << i;
    }
    if (clipped) {
      EXPECT_NEAR(d[d.size() - 2], pl.x + pl.w, 0.01);
    }
    EXPECT_EQ(path.at("data-feasible"), e.feasible ? "true" : "false");
    // Its peak marker: the first point with the most bytes (none when the peak is cut off).
    auto pk = std::find_if(peaks.begin(), peaks.end(), [&](const Attrs& a) { return a.at("data-strategy") == name; });
    const size_t first_top_point = static_cast<size_t>(std::find(bytes.begin(), bytes.end(), top) - bytes.begin());
    if (first_top_point >= shown) {
      EXPECT_EQ(pk, peaks.end());
      continue;
    }
    ASSERT_NE(pk, peaks.end());
    EXPECT_EQ(pk->at("data-bytes"), std::to_string(top));
    const size_t first_top = static_cast<size_t>(std::find(bytes.begin(), bytes.end(), top) - bytes.begin());
    EXPECT_EQ(pk->at("data-step"), std::to_string(steps[first_top]));
  }
}

void expect_chosen(const Plan& plan, const std::string& html) {
  ASSERT_TRUE(plan.feasible);
  std::vector<Attrs> rows = elements(html, "tr", "strategy chosen");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].at("data-strategy"), plan.strategy);
  // One row per strategy and one for keeping everything.
  EXPECT_EQ(elements(html, "tr", "strategy").size() + rows.size(), plan.alternatives.size() + 1);
  size_t chosen = 0;
  for (const Attrs& a : elements(html, "path", "strategy-curve")) {
    if (a.at("data-chosen") == "true") {
      ++chosen;
      EXPECT_EQ(a.at("data-strategy"), plan.strategy);
      EXPECT_EQ(a.at("stroke-width"), "3.2");
    }
  }
  EXPECT_EQ(chosen, 1u);
}

TEST(PlanHtml, MlpOnTheCpuPointsBudgetAndChosenCheckpoint) {
  Plan plan = mlp_plan();
  ASSERT_EQ(plan.strategy, "checkpoint");
  std::string html = plan_html(plan);
  check_curves(plan, html);
  expect_chosen(plan, html);
  // The keep-everything curve peaks at the estimate's 50,356,292 bytes (step 2's backward).
  std::vector<Attrs> peaks = elements(html, "g", "curve-peak");
  auto none = std::find_if(peaks.begin(), peaks.end(), [](const Attrs& a) { return a.at("data-strategy") == "none"; });
  ASSERT_NE(none, peaks.end());
  EXPECT_EQ(none->at("data-bytes"), "50356292");
  EXPECT_EQ(plan.baseline.exact_peak_bytes, 50356292);
  // On the CPU the budget is live bytes: the line is the budget itself, at its place on the axis.
  std::vector<Attrs> line = elements(html, "line", "budget");
  ASSERT_EQ(line.size(), elements(html, "g", "plan-chart").size());  // one per chart
  EXPECT_EQ(line[0].at("data-budget"), std::to_string(int64_t{40} << 20));
  EXPECT_EQ(line[0].at("data-overhead"), "0");
  EXPECT_EQ(line[0].at("data-bytes"), std::to_string(int64_t{40} << 20));
  const Plot pl = plot_of(html);
  EXPECT_NEAR(std::stod(line[0].at("y1")), pl.y + pl.h - pl.h * static_cast<double>(int64_t{40} << 20) / pl.y_max, 0.006);
  EXPECT_EQ(line[0].at("y1"), line[0].at("y2"));
  // The title names model, batch, mode, device, budget and the timing GPU.
  EXPECT_NE(html.find("<title>headroom plan: mlp:layers=8,dim=256 · batch 2048 · training (adam) · fp32 · device cpu (exact heap) · "
                      "budget 40.0 MiB · times on A100-SXM4-40GB (roofline model)</title>"),
            std::string::npos);
  // Decisions: one cell per layer, as the plan decided; the checkpointed segment is recomputed.
  std::vector<Attrs> cells = elements(html, "rect", "decision");
  ASSERT_EQ(cells.size(), plan.decisions.size());
  size_t recomputed = 0;
  for (size_t i = 0; i < cells.size(); ++i) {
    EXPECT_EQ(cells[i].at("data-layer"), plan.decisions[i].layer);
    EXPECT_EQ(cells[i].at("data-action"), plan.decisions[i].action);
    recomputed += cells[i].at("data-action") == "recompute";
  }
  EXPECT_GT(recomputed, 0u);
  // Each recomputed cell names its segment; the runs table has one recompute row per segment.
  std::set<std::string> segments;
  for (const Attrs& c : cells) {
    EXPECT_EQ(c.count("data-segment") == 1, c.at("data-action") == "recompute") << c.at("data-layer");
    if (c.count("data-segment")) segments.insert(c.at("data-segment"));
  }
  EXPECT_EQ(segments.size(), plan.chosen.candidate.plan.checkpoints.size());
  size_t recompute_rows = 0;
  for (size_t k = html.find(R"(<tr data-action="recompute">)"); k != std::string::npos;
       k = html.find(R"(<tr data-action="recompute">)", k + 1)) {
    ++recompute_rows;
  }
  EXPECT_EQ(recompute_rows, plan.chosen.candidate.plan.checkpoints.size());
  // The numerics options are listed apart, not applied.
  EXPECT_NE(html.find("Changes numerics: not applied"), std::string::npos);
  EXPECT_EQ(elements(html, "tr", "numerics").size(), plan.numerics.size());
  // Not-applicable strategies stay in the table without a curve.
  std::vector<Attrs> conv = elements(html, "tr", "strategy");
  EXPECT_TRUE(std::any_of(conv.begin(), conv.end(), [](const Attrs& a) { return a.at("data-strategy") == "conv" && a.at("data-fits") == "-"; }));
}

TEST(PlanHtml, ResNet18OnAGpuDrawsTheBudgetLessTheContext) {
  Plan plan = resnet_plan();
  ASSERT_EQ(plan.strategy, "accumulate");
  std::string html = plan_html(plan);
  check_curves(plan, html);
  expect_chosen(plan, html);
  // The budget is a device total: the live bytes are drawn against it less the context (lazy
  // module loading: the measured stack's 758 MiB for a CNN's training, estimate/cuda_context.h;
  // no NCCL).
  std::vector<Attrs> line = elements(html, "line", "budget");
  ASSERT_EQ(line.size(), elements(html, "g", "plan-chart").size());  // one per chart
  const int64_t line_bytes = plan.budget_bytes - (int64_t{758} << 20);
  EXPECT_EQ(line[0].at("data-budget"), std::to_string(plan.budget_bytes));
  EXPECT_EQ(line[0].at("data-overhead"), std::to_string(int64_t{758} << 20));
  EXPECT_EQ(line[0].at("data-bytes"), std::to_string(line_bytes));
  const Plot pl = plot_of(html);
  EXPECT_NEAR(std::stod(line[0].at("y1")), pl.y + pl.h - pl.h * static_cast<double>(line_bytes) / pl.y_max, 0.006);
  // Convolutions carry their algorithm.
  size_t convs = 0;
  for (const Attrs& a : elements(html, "rect", "decision")) convs += a.count("data-conv");
  EXPECT_EQ(convs, 20u);
}

// The curves drawn on the chart whose plot is `plot` (data-plot).
std::vector<Attrs> curves_on(const std::string& html, const std::string& plot) {
  std::vector<Attrs> out;
  for (const Attrs& a : elements(html, "path", "strategy-curve")) {
    if (a.at("data-plot") == plot) out.push_back(a);
  }
  return out;
}

TEST(PlanHtml, TheMainChartIsThePlanAgainstKeepingEverythingAndTheRestAreSmallMultiples) {
  for (const Plan& plan : {mlp_plan(), resnet_plan()}) {
    SCOPED_TRACE(plan.strategy);
    const std::string html = plan_html(plan);
    const std::vector<Attrs> charts = elements(html, "g", "plan-chart");
    ASSERT_GE(charts.size(), 2u);
    std::vector<Attrs> lead = curves_on(html, charts[0].at("data-plot"));
    ASSERT_EQ(lead.size(), 2u);
    EXPECT_EQ(lead[0].at("data-strategy"), "none");
    EXPECT_EQ(lead[1].at("data-strategy"), plan.strategy);
    EXPECT_EQ(lead[1].at("data-chosen"), "true");
    // Every other applicable strategy: one small chart, its curve over keep-everything's ghost,
    // all on the same scales (their own plot geometry, one y maximum).
    size_t applicable = 0;
    for (const StrategyResult& r : plan.alternatives) applicable += r.applicable;
    EXPECT_EQ(charts.size(), applicable);  // the main chart + applicable - 1 panels
    EXPECT_EQ(elements(html, "path", "baseline-ghost").size(), applicable - 1);
    for (size_t i = 1; i < charts.size(); ++i) {
      EXPECT_EQ(charts[i].at("data-plot"), charts[1].at("data-plot"));
      EXPECT_EQ(charts[i].at("data-y-max"), charts[0].at("data-y-max"));
      EXPECT_EQ(charts[i].at("data-x-max-ms"), charts[1].at("data-x-max-ms"));
      EXPECT_EQ(curves_on(html, charts[i].at("data-plot")).size(), charts.size() - 1);
    }
    EXPECT_NE(html.find("<details class=\"others\" open><summary>"), std::string::npos);
    // Each strategy its own colour.
    std::set<std::string> colours;
    for (const Attrs& a : elements(html, "path", "strategy-curve")) {
      EXPECT_TRUE(colours.insert(a.at("stroke")).second) << a.at("data-strategy") << " reuses " << a.at("stroke");
    }
  }
}

TEST(PlanHtml, WhenNothingFitsTheSmallestPeakLeads) {
  PlanRequest req;
  req.run.model = "mlp:layers=8,dim=256";
  req.run.batch = 2048;
  req.run.device = "cpu";
  req.budget_bytes = int64_t{1} << 20;  // 1 MiB: less than the weights
  Result<Plan> r = make_plan(req);
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_FALSE(r.value().feasible);
  const std::string html = plan_html(r.value());
  const std::vector<Attrs> charts = elements(html, "g", "plan-chart");
  std::vector<Attrs> lead = curves_on(html, charts[0].at("data-plot"));
  ASSERT_EQ(lead.size(), 2u);
  EXPECT_EQ(lead[0].at("data-strategy"), "none");
  EXPECT_EQ(lead[1].at("data-strategy"), r.value().smallest_peak_strategy);
  EXPECT_EQ(lead[1].at("data-chosen"), "false");
  EXPECT_NE(html.find("Nothing fits: the second line is the strategy with the smallest peak."), std::string::npos);
}

TEST(PlanHtml, SmallMultiplesShareAnXAxisCutForOutliers) {
  // resnet18 batch 64 on a T4 with a 1.5 GiB budget: vdnn-all copies every activation over PCIe
  // and its step is several times keep-everything's.
  PlanRequest req;
  req.run.model = "resnet18";
  req.run.batch = 64;
  req.run.gpu = GpuOptions{};
  req.run.gpu->gpu = "T4";
  req.budget_bytes = int64_t{3} << 29;
  Result<Plan> r = make_plan(req);
  ASSERT_TRUE(r.ok()) << r.error();
  const Plan& plan = r.value();
  const std::string html = plan_html(plan);
  const std::vector<Attrs> charts = elements(html, "g", "plan-chart");
  ASSERT_GE(charts.size(), 2u);
  const double x_max = std::stod(charts[1].at("data-x-max-ms"));
  const double base = plan.baseline.time.total_ms;
  std::string cut;
  for (const Attrs& a : elements(html, "path", "strategy-curve")) {
    if (a.at("data-plot") != charts[1].at("data-plot")) continue;
    const double total = numbers(a.at("data-ms")).back();
    // A panel curve is cut exactly when it runs past the shared axis, and only outliers do.
    EXPECT_EQ(a.count("data-clipped") == 1, total > x_max + 1e-4) << a.at("data-strategy");
    if (total <= 3 * base) {
      EXPECT_LE(total, x_max + 1e-4) << a.at("data-strategy");
    }
    if (a.count("data-clipped")) cut += a.at("data-strategy") + " ";
  }
  EXPECT_EQ(cut.empty(), html.find("cut at the right edge") == std::string::npos) << cut;
}

TEST(PlanHtml, AccumulationIsDrawnAsItsMicroBatches) {
  Plan plan = resnet_plan();
  ASSERT_EQ(plan.strategy, "accumulate");
  ASSERT_GT(plan.chosen.eval.micro_batches, 1);
  const std::string html = plan_html(plan);
  EXPECT_EQ(elements(html, "rect", "micro-batch").size(), static_cast<size_t>(plan.chosen.eval.micro_batches));
  EXPECT_NE(html.find(fmt::format("micro-batch 1 of {}", plan.chosen.eval.micro_batches)), std::string::npos);
  EXPECT_EQ(elements(plan_html(mlp_plan()), "rect", "micro-batch").size(), 0u);
}

TEST(PlanHtml, TheBudgetMeansOneThingOnThePage) {
  // --budget without --gpu on CUDA: what the allocator may reserve, no context.
  PlanRequest req;
  req.run.model = "resnet18";
  req.run.batch = 8;
  req.budget_bytes = int64_t{1} << 30;
  Result<Plan> r = make_plan(req);
  ASSERT_TRUE(r.ok()) << r.error();
  for (auto [html, meaning, other] :
       {std::tuple<std::string, std::string, std::string>{plan_html(r.value()), "what the caching allocator may reserve (no GPU given", "device total"},
        {plan_html(resnet_plan()), "device total: CUDA context + NCCL + what the caching allocator reserves", "may reserve"},
        {plan_html(mlp_plan()), "exact live tensor bytes (CPU heap)", "device total"}}) {
    size_t n = 0;
    for (size_t k = html.find(meaning); k != std::string::npos; k = html.find(meaning, k + 1)) ++n;
    EXPECT_EQ(n, 3u) << meaning;  // the budget card, above the chart, under the table
    EXPECT_EQ(html.find(other), std::string::npos) << other << " on the page of " << meaning;
  }
}

TEST(PlanHtml, DownsamplingKeepsEachRunsHighestStep) {
  Plan plan = mlp_plan();
  PlanCurves all = plan_curves(plan), few = plan_curves(plan, 7);
  ASSERT_EQ(all.curves.size(), few.curves.size());
  for (size_t c = 0; c < all.curves.size(); ++c) {
    const std::vector<PlanCurvePoint>& a = all.curves[c].points;
    const std::vector<PlanCurvePoint>& f = few.curves[c].points;
    ASSERT_LE(f.size(), 7u);
    EXPECT_EQ(f.front().first_step, a.front().step);
    EXPECT_EQ(f.back().last_step, a.back().step);
    EXPECT_EQ(f.back().end_ms, a.back().end_ms);
    for (const PlanCurvePoint& q : f) {
      int64_t most = 0;
      for (const PlanCurvePoint& r : a) {
        if (r.step >= q.first_step && r.step <= q.last_step) most = std::max(most, r.bytes);
      }
      EXPECT_EQ(q.bytes, most);
    }
    EXPECT_EQ(f[few.curves[c].peak_point].bytes, a[all.curves[c].peak_point].bytes);
  }
}

TEST(PlanHtml, DeterministicAndSelfContained) {
  Plan plan = mlp_plan();
  std::string a = plan_html(plan), b = plan_html(plan);
  EXPECT_EQ(a, b);
  for (const char* banned : {"<script", "http://", "https://", "<link", "@import", "url("}) {
    EXPECT_EQ(a.find(banned), std::string::npos) << banned;
  }
}

using testing::CliRun;
using testing::run_cli;

TEST(PlanHtmlCli, WritesThePageAndPrintsThePlan) {
  std::string dir = testing::artifact_dir() + "/plan_cli";
  fs::create_directories(dir);
  std::string out = dir + "/plan.html";
  fs::remove(out);
  CliRun r = run_cli("plan mlp:layers=8,dim=256 --batch 2048 --device cpu --budget 40MiB --html " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("plan: checkpoint"), std::string::npos);
  std::ifstream f(out);
  std::string html((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find(R"(<tr class="strategy chosen" data-strategy="checkpoint")"), std::string::npos);
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  // An unwritable place: one line, exit 2, nothing on stdout, no file.
  std::string bad = dir + "/no/such/dir/plan.html";
  CliRun e = run_cli("plan mlp --device cpu --budget 1GiB --html " + bad);
  EXPECT_EQ(e.code, 2);
  EXPECT_EQ(e.out, "");
  EXPECT_NE(e.err.find("cannot write '" + bad + "': No such file or directory"), std::string::npos) << e.err;
  EXPECT_EQ(std::count(e.err.begin(), e.err.end(), '\n'), 1);
  EXPECT_FALSE(fs::exists(bad));
  // The page belongs to plan MODEL only.
  CliRun c = run_cli("plan --chain x.json --budget 1GiB --html " + out);
  EXPECT_EQ(c.code, 2);
  EXPECT_NE(c.err.find("--html applies to plan MODEL"), std::string::npos) << c.err;
}

TEST(PlanHtmlBrowser, ReflowsAt390To2560) {
  std::string dir = testing::artifact_dir();
  std::string html = dir + "/plan.html", accumulate = dir + "/plan-accumulate.html";
  CliRun r = run_cli("plan resnet18 --batch 64 --gpu T4 --budget 1.5GiB --html " + html);
  ASSERT_EQ(r.code, 0) << r.err;
  r = run_cli("plan resnet18 --batch 8 --gpu A100-40GB --activation-budget 50% --html " + accumulate);
  ASSERT_EQ(r.code, 0) << r.err;
  testing::expect_clean_layout(html, "plan");
  testing::expect_clean_layout(accumulate, "plan-accumulate");
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
