// The plan page, in the order it reads: header and cards, memory over one training step, the
// strategies compared (and the numerics-changing options), the chosen plan layer by layer.
// Layout is in pixels, computed here; report/plan_curves.h has the data, report/svg.h the
// primitives and report/html_report.h the shared style sheet.
#include "report/plan_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "report/html_report.h"
#include "report/palette.h"
#include "report/plan_curves.h"
#include "report/plan_report.h"
#include "report/svg.h"
#include "util/format.h"

namespace headroom {
namespace {

using svg::card;
using svg::escape;
using svg::num;

constexpr const char* kBaselineColor = "#666666";
constexpr const char* kBudgetColor = "#000000";

// A strategy keeps its colour whatever else is applicable: its index in strategy_names(), one
// colour each (palette.h); keep-everything is grey and dotted, black is the budget's.
struct Stroke {
  std::string color;
  std::string dash;  // "" or a stroke-dasharray
};
Stroke stroke_of(int strategy_index) {
  if (strategy_index < 0) return {kBaselineColor, "2,3"};
  return {std::string(strategy_color(static_cast<size_t>(strategy_index))), ""};
}

std::string ms_text(double ms) { return ms < 10 ? fmt::format("{:.2f} ms", ms) : fmt::format("{:.1f} ms", ms); }
// Times in the data attributes: 4 decimals (0.1 us), the same on every machine.
std::string ms_attr(double ms) { return fmt::format("{:.4f}", ms); }

std::string device_desc(const Plan& p) {
  const EstimateOptions& o = p.run;
  if (o.device != "cuda") return "device cpu (exact heap)";
  if (!o.gpu) return "device cuda";
  if (!o.gpu->gpu.empty()) return "GPU " + o.gpu->gpu;
  // make_plan's device for --budget without --gpu: the budget is what the allocator may reserve.
  if (o.gpu->context_bytes == 0 && o.gpu->gpu_memory == p.budget_bytes) return "device cuda, no GPU given";
  return "custom GPU (" + human_bytes(o.gpu->gpu_memory.value_or(0)) + ")";
}

std::string subtitle(const Plan& p) {
  const EstimateOptions& o = p.run;
  std::string s = fmt::format("batch {}", p.batch);
  if (o.seq) s += fmt::format(" · seq {}", *o.seq);
  s += fmt::format(" · training ({}) · {} · {} · budget {} · times on {} (roofline model)", optimizer_name(o.optimizer),
                   precision_name(o.precision), device_desc(p), human_bytes(p.budget_bytes), p.cost_gpu);
  return s;
}

bool cuda_device(const Plan& p) { return p.run.device == "cuda" && p.run.gpu.has_value(); }

// What the budget is compared with, said the same way on the cards, above the chart and under
// the table.
std::string budget_meaning(const Plan& p, const PlanCurves& pc) {
  if (!cuda_device(p)) return "exact live tensor bytes (CPU heap)";
  if (pc.overhead_bytes > 0) return "device total: CUDA context + NCCL + what the caching allocator reserves";
  return "what the caching allocator may reserve (no GPU given: no CUDA context counted)";
}


std::string cards(const Plan& p, const PlanCurves& pc) {
  const double base_ms = p.baseline.time.total_ms;
  std::string s = R"(<section class="cards">)";
  s += card("budget", human_bytes(p.budget_bytes), with_commas(p.budget_bytes) + " bytes of " + budget_meaning(p, pc));
  s += card("keep everything", human_bytes(p.baseline.peak_bytes),
            fmt::format("step {}; {}", ms_text(base_ms), p.baseline.feasible ? "fits" : "does not fit"),
            p.baseline.feasible ? "fits" : "nofit");
  if (p.feasible) {
    const Evaluation& e = p.chosen.eval;
    s += card("plan: " + p.strategy, p.chosen.note.empty() ? p.strategy : p.chosen.note,
              fmt::format("peak {} ({} free), step {} ({:+.1f}%)", human_bytes(e.peak_bytes),
                          human_bytes(p.budget_bytes - e.peak_bytes), ms_text(e.time.total_ms),
                          overhead_pct(e.time.total_ms, base_ms)),
              "fits");
  } else {
    s += card("plan", "nothing fits",
              fmt::format("smallest peak {} ({}), {} over", human_bytes(p.smallest_peak_bytes), p.smallest_peak_strategy,
                          human_bytes(p.smallest_peak_bytes - p.budget_bytes)),
              "nofit");
  }
  s += card("simulations", with_commas(p.evaluations),
            fmt::format("{} strategies re-simulated, timed on {}", p.alternatives.size(), p.cost_gpu));
  s += "</section>\n";
  return s;
}

// ---- 2. memory over one training step --------------------------------------------------------

// The curves the page leads with: the chosen plan (or, when nothing fits, the smallest peak)
// and keep-everything. Index into pc.curves.
std::vector<size_t> main_curves(const Plan& p, const PlanCurves& pc) {
  std::vector<size_t> out = {0};
  for (size_t i = 1; i < pc.curves.size(); ++i) {
    const bool lead = p.feasible ? pc.curves[i].chosen : pc.curves[i].strategy == p.smallest_peak_strategy;
    if (lead) out.push_back(i);
  }
  return out;
}

// The shared scales. x: the main curves' longest step; a small multiple whose step is more than
// kOutlierFactor times keep-everything's is clipped at the longest of the others (and says so).
constexpr double kOutlierFactor = 3.0;
struct Scales {
  svg::ByteTicks ticks;
  double main_x_top = 1, main_x_step = 1;
  double panel_x_top = 1, panel_x_step = 1;
  bool line_on_scale = false;
};
Scales scales(const Plan& p, const PlanCurves& pc) {
  Scales sc;
  double data_max = 1, main_x = 0, panel_x = 0;
  const double base_ms = pc.curves[0].points.back().end_ms;
  for (const PlanCurve& c : pc.curves) data_max = std::max(data_max, static_cast<double>(c.points[c.peak_point].bytes));
  for (size_t i : main_curves(p, pc)) main_x = std::max(main_x, pc.curves[i].points.back().end_ms);
  panel_x = main_x;
  for (const PlanCurve& c : pc.curves) {
    const double end = c.points.back().end_ms;
    if (end <= kOutlierFactor * base_ms) panel_x = std::max(panel_x, end);
  }
  const double line = static_cast<double>(pc.line_bytes);
  sc.line_on_scale = line > 0 && line <= 2.5 * data_max;
  sc.ticks = svg::byte_ticks(std::max(data_max, sc.line_on_scale ? line : 0.0) * 1.06, 6);
  auto top = [](double x, double& step) {
    if (!(x > 0)) x = 1;
    step = svg::nice_step(x, 10);
    return std::ceil(x / step - 1e-9) * step;
  };
  sc.main_x_top = top(main_x, sc.main_x_step);
  // Panels are a third as wide: about four ticks.
  if (!(panel_x > 0)) panel_x = 1;
  sc.panel_x_step = svg::nice_step(panel_x, 4);
  sc.panel_x_top = std::ceil(panel_x / sc.panel_x_step - 1e-9) * sc.panel_x_step;
  return sc;
}

struct Frame {
  double W, H, x0, y0, pw, ph;
  double font;  // tick labels
};

// One chart: axes, the budget line, the curves `which` (the first drawn thin and faint when
// `ghost_first`), their peaks. Curves longer than x_top are cut at the plot's edge.
std::string curve_chart(const Plan& p, const PlanCurves& pc, const Scales& sc, const Frame& f, double x_top, double x_step,
                        const std::vector<size_t>& which, bool ghost_first, bool big, std::string_view aria) {
  const double y_max = sc.ticks.top_bytes;
  auto X = [&](double ms) { return f.x0 + f.pw * ms / x_top; };
  auto Y = [&](double bytes) { return f.y0 + f.ph - f.ph * bytes / y_max; };
  std::string s = fmt::format(R"(<svg class="{}" width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="{}">)",
                              big ? "chart" : "chart panel", num(f.W), num(f.H), num(f.W), num(f.H), escape(aria));
  s += "\n";
  s += fmt::format(R"(<g class="y-axis" font-size="{}" fill="#333">)", num(f.font));
  for (size_t k = 0; k < sc.ticks.values.size(); ++k) {
    const double v = sc.ticks.values[k];
    s += svg::line(f.x0, Y(v), f.x0 + f.pw, Y(v), v == 0 ? R"(stroke="#888")" : R"(stroke="#000" stroke-opacity="0.1")");
    if (big || k % 2 == 0 || k + 1 == sc.ticks.values.size()) {
      s += svg::text(f.x0 - 5, Y(v) + f.font / 3, svg::tick_label(sc.ticks, v), R"(text-anchor="end")");
    }
  }
  if (big) {
    s += svg::text(16, f.y0 + f.ph / 2, "live tensor bytes (exact)",
                   fmt::format(R"~(font-size="12" text-anchor="middle" transform="rotate(-90 16 {})")~", num(f.y0 + f.ph / 2)));
  }
  s += "</g>\n";
  s += fmt::format(R"(<g class="x-axis" font-size="{}" fill="#333">)", num(f.font));
  const int x_ticks = static_cast<int>(std::lround(x_top / x_step));
  for (int k = 0; k <= x_ticks; ++k) {
    const double v = k * x_step;
    s += svg::line(X(v), f.y0 + f.ph, X(v), f.y0 + f.ph + 4, R"(stroke="#888")");
    s += svg::text(X(v), f.y0 + f.ph + f.font + 5, fmt::format("{:g}", std::round(v * 1e6) / 1e6), R"(text-anchor="middle")");
  }
  if (big) {
    s += svg::text(f.x0 + f.pw / 2, f.H - 8,
                   fmt::format("predicted time in training step {} (ms, roofline on {}): recomputation and copy stalls widen a curve",
                               pc.iteration, p.cost_gpu),
                   R"(font-size="12" text-anchor="middle")");
  }
  s += "</g>\n";

  const double line = static_cast<double>(pc.line_bytes);
  if (sc.line_on_scale) {
    s += svg::line(f.x0, Y(line), f.x0 + f.pw, Y(line),
                   fmt::format(R"(class="budget" data-budget="{}" data-overhead="{}" data-bytes="{}" stroke="{}" stroke-width="{}")",
                               p.budget_bytes, pc.overhead_bytes, pc.line_bytes, kBudgetColor, big ? 2 : 1.4));
  }
  const std::string plot = fmt::format("{} {} {} {}", num(f.x0), num(f.y0), num(f.pw), num(f.ph));
  s += fmt::format(R"(<g class="plan-chart" data-plot="{}" data-y-max="{}" data-x-max-ms="{}" data-iteration="{}">)", plot,
                   static_cast<int64_t>(y_max), ms_attr(x_top), pc.iteration);
  s += "\n";
  std::string peaks;
  for (size_t w = 0; w < which.size(); ++w) {
    const PlanCurve& c = pc.curves[which[w]];
    const bool ghost = ghost_first && w == 0;
    const Stroke st = stroke_of(c.strategy_index);
    std::vector<svg::Point> pts;
    std::string steps, firsts, lasts, bytes, ms;
    bool clipped = false;
    for (size_t k = 0; k < c.points.size(); ++k) {
      const PlanCurvePoint& q = c.points[k];
      if (q.start_ms < x_top) {
        clipped = clipped || q.end_ms > x_top * (1 + 1e-9);
        pts.push_back({X(q.start_ms), Y(static_cast<double>(q.bytes))});
        pts.push_back({X(std::min(q.end_ms, x_top)), Y(static_cast<double>(q.bytes))});
      } else {
        clipped = true;
      }
      const char* sep = k ? "," : "";
      steps += sep + std::to_string(q.step);
      firsts += sep + std::to_string(q.first_step);
      lasts += sep + std::to_string(q.last_step);
      bytes += sep + std::to_string(q.bytes);
      ms += sep + ms_attr(q.start_ms);
    }
    ms += "," + ms_attr(c.points.back().end_ms);
    const std::string label = c.strategy == "none" ? "keep everything" : c.strategy;
    if (ghost) {
      s += fmt::format(R"(<path class="baseline-ghost" fill="none" stroke="{}" stroke-width="1" stroke-opacity="0.6" d="{}"/>)",
                       st.color, svg::path_d(pts));
      s += "\n";
      continue;
    }
    const bool thick = big && (c.chosen || which.size() == 1 || c.strategy != "none");
    s += fmt::format(
        R"(<path class="strategy-curve" data-strategy="{}" data-chosen="{}" data-feasible="{}" data-plot="{}" data-y-max="{}" data-x-max-ms="{}"{} data-steps="{}" data-first-steps="{}" data-last-steps="{}" data-bytes="{}" data-ms="{}" fill="none" stroke="{}" stroke-width="{}"{} stroke-linejoin="round" d="{}">{}</path>)",
        escape(c.strategy), c.chosen ? "true" : "false", c.eval->feasible ? "true" : "false", plot, static_cast<int64_t>(y_max),
        ms_attr(x_top), clipped ? R"( data-clipped="true")" : "", steps, firsts, lasts, bytes, ms, st.color,
        c.chosen ? "3.2" : thick ? "2.4" : "1.8", st.dash.empty() ? "" : fmt::format(R"( stroke-dasharray="{}")", st.dash),
        svg::path_d(pts),
        svg::title(fmt::format("{}: live peak {}, step {} ({}; peak compared with the budget: {}){}", label,
                               human_bytes(c.points[c.peak_point].bytes), ms_text(c.eval->time.total_ms),
                               c.eval->feasible ? "fits" : "does not fit", human_bytes(c.eval->peak_bytes),
                               c.note.empty() ? "" : "; " + c.note)));
    s += "\n";
    const PlanCurvePoint& pk = c.points[c.peak_point];
    if (pk.start_ms < x_top) {
      const double px = (X(pk.start_ms) + X(std::min(pk.end_ms, x_top))) / 2, py = Y(static_cast<double>(pk.bytes));
      peaks += fmt::format(R"(<g class="curve-peak" data-strategy="{}" data-bytes="{}" data-step="{}">)", escape(c.strategy),
                           pk.bytes, pk.step);
      peaks += svg::circle(px, py, c.chosen ? 5.5 : 4, fmt::format(R"(fill="#fff" stroke="{}" stroke-width="{}")", st.color, c.chosen ? 3 : 2));
      peaks += svg::title(fmt::format("{}: peak {} live at {} ms (step {})", label, human_bytes(pk.bytes),
                                      fmt::format("{:.2f}", pk.start_ms), pk.step));
      peaks += "</g>";
    }
    if (clipped) {
      peaks += svg::text(f.x0 + f.pw - 2, f.y0 + f.font + 2, "→ " + ms_text(c.points.back().end_ms),
                         fmt::format(R"(class="halo clipped" font-size="{}" font-weight="600" text-anchor="end" fill="{}")", num(f.font), st.color));
    }
  }
  s += "</g>\n<g class=\"peaks\">" + peaks + "</g>\n";
  if (big) {
    // The budget named in the right margin.
    s += R"(<g class="margin-labels" font-size="11">)";
    const std::string head = pc.overhead_bytes > 0 ? "budget − context, NCCL" : "budget";
    const std::string value = pc.overhead_bytes > 0 ? fmt::format("{} ({} − {})", human_bytes(pc.line_bytes), human_bytes(p.budget_bytes),
                                                                  human_bytes(pc.overhead_bytes))
                                                    : human_bytes(pc.line_bytes);
    const double lx = f.x0 + f.pw + 8;
    if (sc.line_on_scale) {
      s += svg::text(lx, Y(line), head, R"(font-weight="600" data-label="budget")");
      s += svg::text(lx, Y(line) + 13, value, R"(fill="#333")");
    } else if (pc.line_bytes > 0) {
      s += svg::text(lx, f.y0 + 6, "▲ " + head, R"(font-weight="600" data-label="budget-off")");
      s += svg::text(lx, f.y0 + 19, human_bytes(pc.line_bytes) + ", off the scale", R"(fill="#333")");
    } else {
      s += svg::text(lx, f.y0 + f.ph, "budget " + human_bytes(p.budget_bytes), R"(font-weight="600" data-label="budget-none")");
      s += svg::text(lx, f.y0 + f.ph + 13, "under the context and NCCL (" + human_bytes(pc.overhead_bytes) + ")", R"(fill="#333")");
    }
    s += "</g>\n";
  }
  s += "</svg>\n";
  return s;
}

std::string legend_item(const PlanCurve& c, bool lead) {
  const Stroke st = stroke_of(c.strategy_index);
  std::string style = "border-top-color:" + st.color;
  if (!st.dash.empty()) style += ";border-top-style:dotted";
  return fmt::format(R"(<span{}><span class="ln{}" style="{}"></span>{}{}</span>)", c.chosen ? R"( class="chosen")" : "",
                     lead ? " thick" : "", style, escape(c.strategy == "none" ? "keep everything" : c.strategy),
                     c.eval->feasible ? (c.chosen ? " (the plan)" : "") : " (does not fit)");
}

std::string memory_charts(const Plan& p, const PlanCurves& pc) {
  const Scales sc = scales(p, pc);
  const std::vector<size_t> lead = main_curves(p, pc);
  std::string s;
  // Keep-everything under the plan.
  std::vector<size_t> order = lead;
  s += curve_chart(p, pc, sc, Frame{1160, 440, 84, 24, 1160 - 84 - 200, 440 - 24 - 50, 11}, sc.main_x_top, sc.main_x_step, order, false,
                   true, "live memory over one training step: the plan against keeping everything");
  s += R"(<p class="legend">)";
  for (size_t i : lead) s += legend_item(pc.curves[i], true);
  s += R"(<span><span class="ln"></span>budget</span><span>○ each curve's peak</span></p>)";
  s += "\n";
  if (!p.feasible && lead.size() > 1) {
    s += "<p class=\"muted\">Nothing fits: the second line is the strategy with the smallest peak.</p>\n";
  }

  // The others, one small chart each on shared scales, behind a toggle (no script: <details>).
  std::vector<size_t> others;
  for (size_t i = 1; i < pc.curves.size(); ++i) {
    if (std::find(lead.begin(), lead.end(), i) == lead.end()) others.push_back(i);
  }
  if (others.empty()) return s;
  std::string outliers;
  for (size_t i : others) {
    const PlanCurve& c = pc.curves[i];
    if (c.points.back().end_ms > sc.panel_x_top * (1 + 1e-9)) {
      outliers += (outliers.empty() ? "" : ", ") + fmt::format("{} ({})", c.strategy, ms_text(c.points.back().end_ms));
    }
  }
  s += fmt::format(R"(<details class="others" open><summary>The other {} strategies, one chart each (keep everything in grey)</summary>)",
                   others.size());
  s += "\n<div class=\"multiples\">";
  for (size_t i : others) {
    const PlanCurve& c = pc.curves[i];
    const std::string fits = c.eval->feasible ? "fits" : "does not fit";
    s += fmt::format(R"(<figure class="multiple" id="strategy-{}"><figcaption><span class="ln" style="border-top-color:{}"></span><code>{}</code> {} · {} · {}</figcaption>)",
                     escape(c.strategy), stroke_of(c.strategy_index).color, escape(c.strategy), human_bytes(c.eval->peak_bytes),
                     ms_text(c.eval->time.total_ms), fits);
    s += curve_chart(p, pc, sc, Frame{380, 200, 58, 8, 380 - 58 - 10, 200 - 8 - 26, 11}, sc.panel_x_top, sc.panel_x_step, {0, i}, true,
                     false, c.strategy + ": live memory over one training step");
    s += "</figure>";
  }
  s += "</div>\n";
  s += fmt::format(R"(<p class="muted">Shared scales: bytes as above, time 0 to {} ms.{}</p>)", fmt::format("{:g}", sc.panel_x_top),
                   outliers.empty() ? std::string()
                                    : " Longer than " + fmt::format("{:g}", kOutlierFactor) +
                                          "x keep everything, cut at the right edge (→ their step time): " + escape(outliers) + ".");
  s += "\n</details>\n";
  return s;
}

// ---- 3. the strategies compared --------------------------------------------------------------

std::string strategy_row(const std::string& name, const StrategyResult* r, const Evaluation& e, const std::string& note,
                         bool applicable, bool chosen, double base_ms) {
  const std::string fits = !applicable ? "-" : e.feasible ? "yes" : "no";
  std::string s = fmt::format(R"(<tr class="strategy{}" data-strategy="{}" data-fits="{}">)", chosen ? " chosen" : "",
                              escape(name), fits);
  s += fmt::format("<td><code>{}</code>{}</td><td>{}</td>", escape(name), chosen ? R"( <span class="tag">plan</span>)" : "", fits);
  if (applicable) {
    s += fmt::format(R"(<td class="n" data-bytes="{}">{}</td><td class="n">{}</td><td class="n">{}</td>)", e.peak_bytes,
                     human_bytes(e.peak_bytes), ms_text(e.time.total_ms),
                     name == "none" ? std::string("—") : fmt::format("{:+.1f}%", overhead_pct(e.time.total_ms, base_ms)));
  } else {
    s += R"(<td class="n">—</td><td class="n">—</td><td class="n">—</td>)";
  }
  std::string detail = note;
  if (applicable && r && e.time.recompute_ms > 0) detail += fmt::format("; recompute {}", ms_text(e.time.recompute_ms));
  if (applicable && e.time.stall_ms > 0) detail += fmt::format("; copy stalls {}", ms_text(e.time.stall_ms));
  if (applicable && e.time.transfer_bytes > 0) detail += fmt::format("; {} over the host link", human_bytes(e.time.transfer_bytes));
  s += "<td>" + escape(detail) + "</td></tr>";
  return s;
}

std::string strategies_table(const Plan& p, const PlanCurves& pc) {
  const double base_ms = p.baseline.time.total_ms;
  std::string s =
      R"(<table class="strategies"><thead><tr><th>strategy</th><th>fits</th><th class="n">peak</th><th class="n">step time</th><th class="n">overhead</th><th>note</th></tr></thead><tbody>)";
  s += strategy_row("none", nullptr, p.baseline, "keep everything, full batch", true, p.feasible && p.strategy == "none", base_ms);
  for (const StrategyResult& r : p.alternatives) {
    s += strategy_row(r.name, &r, r.eval, r.note, r.applicable, p.feasible && p.strategy == r.name, base_ms);
  }
  s += "</tbody></table>\n";
  s += fmt::format(R"(<p class="muted">Peak: {}. Overhead: step time against keeping everything ({}).</p>)",
                   budget_meaning(p, pc) + ", as compared with the budget",
                   ms_text(base_ms));
  s += "\n";
  if (p.numerics.empty()) return s;
  s += "<h3>Changes numerics: not applied</h3>\n";
  s += R"(<table class="numerics"><thead><tr><th>precision</th><th>would fit</th><th class="n">peak</th><th class="n">step time</th><th class="n">against keep everything</th></tr></thead><tbody>)";
  for (const NumericsOption& n : p.numerics) {
    s += fmt::format(
        R"(<tr class="numerics" data-precision="{}"><td><code>{}</code></td><td>{}</td><td class="n" data-bytes="{}">{}</td><td class="n">{}</td><td class="n">{:+.1f}%</td></tr>)",
        escape(n.name), escape(n.name), n.feasible ? "yes" : "no", n.peak_bytes, human_bytes(n.peak_bytes), ms_text(n.step_time_ms),
        overhead_pct(n.step_time_ms, base_ms));
  }
  s += "</tbody></table>\n";
  s += "<p class=\"muted\">Mixed or lower precision changes the results of training; the planner lists it and leaves the "
       "choice to you (keep-everything memory and time).</p>\n";
  return s;
}

// ---- 4. the chosen plan layer by layer -------------------------------------------------------

const char* action_color(const std::string& action) {
  if (action == "recompute") return "#009E73";
  if (action == "offload") return "#CC79A7";
  return "#DDDDDD";
}

std::string decisions_section(const Plan& p) {
  const std::vector<LayerDecision>& d = p.decisions;
  if (d.empty()) return "<p class=\"muted\">The model has no layers with kernels.</p>\n";
  std::string s;
  if (!p.feasible) {
    s += "<p class=\"lead\">Nothing fits the budget: every layer keeps its activations (the keep-everything run).</p>\n";
  } else {
    s += fmt::format("<p class=\"lead\">The plan <code>{}</code>{}: one cell per layer with a kernel, in forward order.",
                     escape(p.strategy), p.chosen.note.empty() ? "" : " (" + escape(p.chosen.note) + ")");
    if (p.chosen.eval.micro_batches > 1) {
      s += fmt::format(" Every forward and backward runs at micro-batch {}, {} times per step (gradient accumulation).",
                       p.chosen.eval.micro_batch, p.chosen.eval.micro_batches);
    }
    s += "</p>\n";
  }
  // The checkpointed segment of each layer (-1: none), so adjacent segments stay apart: the
  // strip leaves a gap between them and the runs table splits there.
  std::vector<int> segment(d.size(), -1);
  if (p.feasible) {
    const std::vector<CheckpointSegment>& segs = p.chosen.candidate.plan.checkpoints;
    for (size_t i = 0; i < d.size(); ++i) {
      if (d[i].action != "recompute") continue;  // an offload inside a segment wins (decisions_of)
      for (size_t k = 0; k < segs.size(); ++k) {
        if (d[i].op >= segs[k].first && d[i].op <= segs[k].last) segment[i] = static_cast<int>(k);
      }
    }
  }
  auto same_run = [&](size_t a, size_t b) { return d[a].action == d[b].action && segment[a] == segment[b]; };
  constexpr double W = 1160, H = 44, x0 = 0, cell_h = 24;
  const double cw = W / static_cast<double>(d.size());
  s += fmt::format(R"(<svg class="decisions" width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="per-layer decisions">)",
                   num(W), num(H), num(W), num(H));
  int convs = 0, memory_optimal = 0;
  std::string gaps;
  for (size_t i = 0; i < d.size(); ++i) {
    const LayerDecision& l = d[i];
    const double x = x0 + cw * static_cast<double>(i);
    std::string attrs = fmt::format(R"(class="decision" data-layer="{}" data-action="{}"{} fill="{}")", escape(l.layer), l.action,
                                    l.conv_algorithm.empty() ? "" : fmt::format(R"( data-conv="{}")", l.conv_algorithm),
                                    action_color(l.action));
    if (i > 0 && segment[i] >= 0 && segment[i] != segment[i - 1]) {
      attrs += fmt::format(R"( data-segment="{}")", segment[i]);
      gaps += svg::rect(x - 0.75, 0, 1.5, cell_h, R"(fill="#fff")");  // over the cells, after them
    } else if (segment[i] >= 0) {
      attrs += fmt::format(R"( data-segment="{}")", segment[i]);
    }
    s += svg::rect_with(x, 0, cw, cell_h, attrs,
                        svg::title(l.layer + ": " + l.action + (l.conv_algorithm.empty() ? "" : ", " + l.conv_algorithm + " convolution")));
    if (!l.conv_algorithm.empty()) {
      ++convs;
      const bool slow = l.conv_algorithm == "memory-optimal";
      memory_optimal += slow;
      s += svg::rect(x, cell_h + 3, cw, 6, slow ? R"(fill="#D55E00")" : R"(fill="#0072B2" fill-opacity="0.35")");
    }
  }
  s += gaps;
  if (p.feasible && p.chosen.eval.micro_batches > 1) {
    // Accumulation changes no layer: the strip would be one grey bar. Say what it does instead,
    // over the strip, once per micro-batch.
    const int n = p.chosen.eval.micro_batches;
    const double mw = W / n;
    for (int k = 0; k < n; ++k) {
      s += svg::rect(mw * k + 1, 2, mw - 2, cell_h - 4,
                     R"(class="micro-batch" fill="#0072B2" fill-opacity="0.18" stroke="#0072B2" stroke-width="1")");
      const std::string label = fmt::format("micro-batch {} of {} ({} samples)", k + 1, n, p.chosen.eval.micro_batch);
      const std::string text = svg::text_width(label, 11) + 8 < mw ? label : std::to_string(k + 1);
      s += svg::text(mw * k + mw / 2, 16, text, R"(font-size="11" text-anchor="middle" fill="#00466e")");
    }
  }
  s += svg::text(0, H - 1, "layer 1", R"(font-size="11" fill="#333")");
  s += svg::text(W, H - 1, fmt::format("layer {}", d.size()), R"(font-size="11" fill="#333" text-anchor="end")");
  s += "</svg>\n";
  s += R"(<p class="legend flush"><span><span class="sw" style="background:#DDDDDD"></span>keep (saved for the backward)</span><span><span class="sw" style="background:#009E73"></span>recompute in the backward</span><span><span class="sw" style="background:#CC79A7"></span>offload to host memory</span>)";
  if (convs > 0) {
    s += R"(<span><span class="sw thin" style="background:#0072B2;opacity:.35"></span>convolution, fastest algorithm</span><span><span class="sw thin" style="background:#D55E00"></span>convolution, workspace-free (slower)</span>)";
  }
  s += "</p>\n";

  // Runs of one action: the compact form of the same decisions.
  s += R"(<table class="runs"><thead><tr><th>action</th><th class="n">layers</th><th>from</th><th>to</th></tr></thead><tbody>)";
  size_t rows = 0, runs = 0;
  for (size_t i = 0; i < d.size();) {
    size_t j = i;
    while (j + 1 < d.size() && same_run(j + 1, i)) ++j;
    ++runs;
    if (rows < 40) {
      s += fmt::format(R"(<tr data-action="{}"><td><span class="sw" style="background:{}"></span>{}{}</td><td class="n">{}</td><td><code>{}</code></td><td><code>{}</code></td></tr>)",
                       d[i].action, action_color(d[i].action), d[i].action,
                       segment[i] >= 0 ? fmt::format(" (segment {})", segment[i] + 1) : "", j - i + 1, escape(d[i].layer),
                       escape(d[j].layer));
      ++rows;
    }
    i = j + 1;
  }
  if (runs > rows) s += fmt::format(R"(<tr><td class="muted" colspan="4">and {} more runs (--json has every layer)</td></tr>)", runs - rows);
  s += "</tbody></table>\n";
  if (convs > 0) {
    s += fmt::format("<p class=\"muted\">{} convolutions: {} with cuDNN's fastest algorithm and its workspace, {} with a "
                     "workspace-free one.</p>\n",
                     convs, convs - memory_optimal, memory_optimal);
  }
  return s;
}

constexpr const char* kPlanCss = R"(
h3{font-size:14px;margin:12px 0 4px}
table.strategies,table.numerics,table.runs{margin:6px 0 8px}
tr.chosen td{background:#F0FAF6;font-weight:600}
tr.chosen td:first-child{box-shadow:inset 4px 0 0 #009E73}
.tag{font-size:11px;font-weight:600;color:#fff;background:#00694d;border-radius:3px;padding:0 5px;margin-left:4px}
.multiples{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,300px),1fr));gap:10px 18px;margin:8px 0}
.multiple{margin:0;min-width:0}
.multiple figcaption{font-size:12px;margin:0 0 2px}
details.others summary{cursor:pointer;font-weight:600;margin:10px 0 4px}
.legend .chosen{font-weight:600}
p.legend.flush{margin:4px 0 8px}
.sw.thin{height:5px;vertical-align:2px}
table.runs{width:auto}
)";

}  // namespace

std::string plan_html(const Plan& p) {
  const PlanCurves pc = plan_curves(p);
  const std::string title = "headroom plan: " + p.model + " · " + subtitle(p);
  std::string s;
  s.reserve(128 * 1024);
  s += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  s += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  s += "<meta name=\"generator\" content=\"headroom plan\">\n";
  s += "<title>" + escape(title) + "</title>\n<style>" + std::string(html_page_css()) + kPlanCss +
       "</style>\n</head>\n<body>\n<main>\n";
  s += fmt::format("<header><h1>headroom plan: <span class=\"model\">{}</span></h1><p class=\"sub\">{}</p></header>\n",
                   svg::breakable(p.model), escape(subtitle(p)));
  s += cards(p, pc);

  s += "<section>\n<h2>Memory over one training step</h2>\n";
  s += fmt::format(
      "<p class=\"lead\">Exact live tensor bytes (on CUDA what <code>torch.cuda.memory_allocated</code> reports) over training step {} "
      "of the keep-everything run and of each applicable strategy's candidate, re-simulated, against the time the roofline "
      "model predicts on {}. ",
      pc.iteration, escape(p.cost_gpu));
  s += "The budget is " + escape(budget_meaning(p, pc)) + "; ";
  if (pc.overhead_bytes > 0) {
    s += fmt::format("the line is the budget less the CUDA context and NCCL ({}), and ", escape(human_bytes(pc.overhead_bytes)));
  }
  if (cuda_device(p)) {
    s += "the caching allocator's rounding and cached blocks come on top of the live bytes, so a curve just under the line can "
         "still miss (the table says what fits). ";
  } else {
    s += "the line is the budget. ";
  }
  s += "Hover a curve or a peak for its numbers.</p>\n";
  s += memory_charts(p, pc);
  s += "</section>\n";

  s += "<section>\n<h2>Strategies compared</h2>\n" + strategies_table(p, pc) + "</section>\n";
  s += "<section>\n<h2>The plan layer by layer</h2>\n" + decisions_section(p) + "</section>\n";
  s += "<footer>headroom plan: every strategy's candidate is re-simulated by the same interpreter and heap model as "
       "<code>estimate</code>; times come from a roofline cost model that orders strategies and is not validated against a "
       "GPU. See docs/planning.md and docs/report.md.</footer>\n";
  s += "</main>\n</body>\n</html>\n";
  return svg::scrollable_tables(s);
}

}  // namespace headroom
