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
#include "report/svg.h"
#include "util/format.h"

namespace headroom {
namespace {

using svg::escape;
using svg::num;

constexpr const char* kBaselineColor = "#666666";
constexpr const char* kBudgetColor = "#000000";

// A strategy keeps its colour whatever else is applicable: its index in strategy_names(). Black
// is the budget's, so six colours go round, the second round dashed.
struct Stroke {
  std::string color;
  std::string dash;  // "" or a stroke-dasharray
};
Stroke stroke_of(int strategy_index) {
  if (strategy_index < 0) return {kBaselineColor, "2,3"};
  const size_t i = static_cast<size_t>(strategy_index);
  return {std::string(series_color(i % 6)), i / 6 == 0 ? "" : "7,3"};
}

double overhead_pct(double ms, double baseline_ms) { return baseline_ms > 0 ? (ms / baseline_ms - 1.0) * 100.0 : 0.0; }

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

std::string card(std::string_view key, std::string_view value, std::string_view detail, std::string_view cls = {}) {
  return fmt::format(R"(<div class="card{}"><div class="k">{}</div><div class="v">{}</div><div class="d">{}</div></div>)",
                     cls.empty() ? "" : " " + std::string(cls), escape(key), escape(value), escape(detail));
}

std::string cards(const Plan& p) {
  const double base_ms = p.baseline.time.total_ms;
  std::string s = R"(<section class="cards">)";
  s += card("budget", human_bytes(p.budget_bytes),
            with_commas(p.budget_bytes) + (cuda_device(p) ? " bytes of device total (context + NCCL + reserved)" : " bytes of live tensors"));
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

std::string memory_chart(const Plan& p, const PlanCurves& pc) {
  constexpr double W = 1160, H = 440, L = 84, R = 200, T = 24, B = 50;
  constexpr double x0 = L, y0 = T, pw = W - L - R, ph = H - T - B;

  double data_max = 1, x_max = 0;
  for (const PlanCurve& c : pc.curves) {
    data_max = std::max(data_max, static_cast<double>(c.points[c.peak_point].bytes));
    x_max = std::max(x_max, c.points.back().end_ms);
  }
  if (!(x_max > 0)) x_max = 1;
  // The line is drawn when it does not squash the curves (as the estimate report's capacity).
  const double line = static_cast<double>(pc.line_bytes);
  const bool line_on_scale = line > 0 && line <= 2.5 * data_max;
  svg::ByteTicks ticks = svg::byte_ticks(std::max(data_max, line_on_scale ? line : 0.0) * 1.06, 6);
  const double y_max = ticks.top_bytes;
  const double x_step = svg::nice_step(x_max, 10);
  const double x_top = std::ceil(x_max / x_step - 1e-9) * x_step;
  auto X = [&](double ms) { return x0 + pw * ms / x_top; };
  auto Y = [&](double bytes) { return y0 + ph - ph * bytes / y_max; };

  std::string s = fmt::format(
      R"(<svg class="chart" width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="live memory over one training step per strategy, against the budget">)",
      num(W), num(H), num(W), num(H));
  s += "\n";
  s += R"(<g class="y-axis" font-size="11" fill="#333">)";
  for (double v : ticks.values) {
    s += svg::line(x0, Y(v), x0 + pw, Y(v), v == 0 ? R"(stroke="#888")" : R"(stroke="#000" stroke-opacity="0.1")");
    s += svg::text(x0 - 6, Y(v) + 4, svg::tick_label(ticks, v), R"(text-anchor="end")");
  }
  s += svg::text(16, y0 + ph / 2, "live tensor bytes (exact)",
                 fmt::format(R"~(font-size="12" text-anchor="middle" transform="rotate(-90 16 {})")~", num(y0 + ph / 2)));
  s += "</g>\n";
  s += R"(<g class="x-axis" font-size="11" fill="#333">)";
  const int x_ticks = static_cast<int>(std::lround(x_top / x_step));
  for (int k = 0; k <= x_ticks; ++k) {
    const double v = k * x_step;
    s += svg::line(X(v), y0 + ph, X(v), y0 + ph + 4, R"(stroke="#888")");
    s += svg::text(X(v), y0 + ph + 16, fmt::format("{:g}", std::round(v * 1e6) / 1e6), R"(text-anchor="middle")");
  }
  s += svg::text(x0 + pw / 2, H - 8,
                 fmt::format("predicted time in training step {} (ms, roofline on {}): recomputation and copy stalls widen a curve",
                             pc.iteration, p.cost_gpu),
                 R"(font-size="12" text-anchor="middle")");
  s += "</g>\n";

  s += fmt::format(R"(<g class="plan-chart" data-plot="{} {} {} {}" data-y-max="{}" data-x-max-ms="{}" data-iteration="{}">)",
                   num(x0), num(y0), num(pw), num(ph), static_cast<int64_t>(y_max), ms_attr(x_top), pc.iteration);
  s += "\n";
  // The chosen curve last, on top of the others.
  std::vector<size_t> order;
  for (size_t i = 0; i < pc.curves.size(); ++i) {
    if (!pc.curves[i].chosen) order.push_back(i);
  }
  for (size_t i = 0; i < pc.curves.size(); ++i) {
    if (pc.curves[i].chosen) order.push_back(i);
  }
  std::string peaks;
  for (size_t i : order) {
    const PlanCurve& c = pc.curves[i];
    const Stroke st = stroke_of(c.strategy_index);
    std::vector<svg::Point> pts;
    std::string steps, firsts, lasts, bytes, ms;
    for (size_t k = 0; k < c.points.size(); ++k) {
      const PlanCurvePoint& q = c.points[k];
      pts.push_back({X(q.start_ms), Y(static_cast<double>(q.bytes))});
      pts.push_back({X(q.end_ms), Y(static_cast<double>(q.bytes))});
      const char* sep = k ? "," : "";
      steps += sep + std::to_string(q.step);
      firsts += sep + std::to_string(q.first_step);
      lasts += sep + std::to_string(q.last_step);
      bytes += sep + std::to_string(q.bytes);
      ms += sep + ms_attr(q.start_ms);
    }
    ms += "," + ms_attr(c.points.back().end_ms);
    const std::string label = c.strategy == "none" ? "keep everything" : c.strategy;
    s += fmt::format(
        R"(<path class="strategy-curve" data-strategy="{}" data-chosen="{}" data-feasible="{}" data-steps="{}" data-first-steps="{}" data-last-steps="{}" data-bytes="{}" data-ms="{}" fill="none" stroke="{}" stroke-width="{}"{}{} stroke-linejoin="round" d="{}">{}</path>)",
        escape(c.strategy), c.chosen ? "true" : "false", c.eval->feasible ? "true" : "false", steps, firsts, lasts, bytes, ms,
        st.color, c.chosen ? "3.2" : "1.6", st.dash.empty() ? "" : fmt::format(R"( stroke-dasharray="{}")", st.dash),
        c.chosen ? "" : R"( stroke-opacity="0.85")", svg::path_d(pts),
        svg::title(fmt::format("{}: live peak {}, step {} ({}; peak compared with the budget: {}){}", label,
                               human_bytes(c.points[c.peak_point].bytes), ms_text(c.eval->time.total_ms),
                               c.eval->feasible ? "fits" : "does not fit", human_bytes(c.eval->peak_bytes),
                               c.note.empty() ? "" : "; " + c.note)));
    s += "\n";
    const PlanCurvePoint& pk = c.points[c.peak_point];
    const double px = (X(pk.start_ms) + X(pk.end_ms)) / 2, py = Y(static_cast<double>(pk.bytes));
    peaks += fmt::format(R"(<g class="curve-peak" data-strategy="{}" data-bytes="{}" data-step="{}">)", escape(c.strategy),
                         pk.bytes, pk.step);
    peaks += svg::circle(px, py, c.chosen ? 5.5 : 4,
                         fmt::format(R"(fill="#fff" stroke="{}" stroke-width="{}")", st.color, c.chosen ? 3 : 2));
    peaks += svg::title(fmt::format("{}: peak {} live at {} ms ({})", label, human_bytes(pk.bytes), fmt::format("{:.2f}", pk.start_ms),
                                    "step " + std::to_string(pk.step)));
    peaks += "</g>";
  }
  s += "</g>\n<g class=\"peaks\">" + peaks + "</g>\n";

  // The budget: a line in live bytes (budget less context and NCCL), or named in the margin.
  s += R"(<g class="margin-labels" font-size="11">)";
  const std::string head = pc.overhead_bytes > 0 ? "budget − context, NCCL" : "budget";
  const std::string value =
      pc.overhead_bytes > 0
          ? fmt::format("{} ({} − {})", human_bytes(pc.line_bytes), human_bytes(p.budget_bytes), human_bytes(pc.overhead_bytes))
          : human_bytes(pc.line_bytes);
  if (line_on_scale) {
    const double y = Y(line);
    s += svg::line(x0, y, x0 + pw, y,
                   fmt::format(R"(class="budget" data-budget="{}" data-overhead="{}" data-bytes="{}" stroke="{}" stroke-width="2")",
                               p.budget_bytes, pc.overhead_bytes, pc.line_bytes, kBudgetColor));
    s += svg::text(x0 + pw + 8, y, head, R"(font-weight="600" data-label="budget")");
    s += svg::text(x0 + pw + 8, y + 13, value, R"(fill="#333")");
  } else if (pc.line_bytes > 0) {
    s += svg::text(x0 + pw + 8, y0 + 6, "▲ " + head, R"(font-weight="600" data-label="budget-off")");
    s += svg::text(x0 + pw + 8, y0 + 19, value + ", off the scale", R"(fill="#333")");
  } else {
    // Nothing of the budget is left for tensors: no line to draw.
    s += svg::text(x0 + pw + 8, y0 + ph, "budget " + human_bytes(p.budget_bytes), R"(font-weight="600" data-label="budget-none")");
    s += svg::text(x0 + pw + 8, y0 + ph + 13, "under the context and NCCL (" + human_bytes(pc.overhead_bytes) + ")",
                   R"(fill="#333")");
  }
  s += "</g>\n</svg>\n";

  // Legend, in table order.
  s += R"(<p class="legend">)";
  for (const PlanCurve& c : pc.curves) {
    const Stroke st = stroke_of(c.strategy_index);
    std::string style = "border-top-color:" + st.color;
    if (!st.dash.empty()) style += ";border-top-style:dashed";
    if (c.strategy_index < 0) style += ";border-top-style:dotted";
    s += fmt::format(R"(<span{}><span class="ln{}" style="{}"></span>{}{}</span>)", c.chosen ? R"( class="chosen")" : "",
                     c.chosen ? " thick" : "", style, escape(c.strategy == "none" ? "keep everything" : c.strategy),
                     c.eval->feasible ? (c.chosen ? " (the plan)" : "") : " (does not fit)");
  }
  s += R"(<span><span class="ln"></span>budget</span><span>○ each curve's peak</span></p>)";
  s += "\n";
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

std::string strategies_table(const Plan& p) {
  const double base_ms = p.baseline.time.total_ms;
  std::string s =
      R"(<table class="strategies"><thead><tr><th>strategy</th><th>fits</th><th class="n">peak</th><th class="n">step time</th><th class="n">overhead</th><th>note</th></tr></thead><tbody>)";
  s += strategy_row("none", nullptr, p.baseline, "keep everything, full batch", true, p.feasible && p.strategy == "none", base_ms);
  for (const StrategyResult& r : p.alternatives) {
    s += strategy_row(r.name, &r, r.eval, r.note, r.applicable, p.feasible && p.strategy == r.name, base_ms);
  }
  s += "</tbody></table>\n";
  s += fmt::format(R"(<p class="muted">Peak: {}. Overhead: step time against keeping everything ({}).</p>)",
                   cuda_device(p) ? "device total (CUDA context + NCCL + what the caching allocator reserves), as compared with the budget"
                                  : "exact live bytes, as compared with the budget",
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
.ln.thick{border-top-width:4px}
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
                   escape(p.model), escape(subtitle(p)));
  s += cards(p);

  s += "<section>\n<h2>Memory over one training step</h2>\n";
  s += fmt::format(
      "<p class=\"lead\">Exact live tensor bytes (on CUDA what <code>torch.cuda.memory_allocated</code> reports) over training step {} "
      "of the keep-everything run and of each applicable strategy's candidate, re-simulated, against the time the roofline "
      "model predicts on {}. ",
      pc.iteration, escape(p.cost_gpu));
  if (pc.overhead_bytes > 0) {
    s += fmt::format("The budget is a device total, so the line is the budget less the CUDA context and NCCL ({}); the caching "
                     "allocator's rounding and cached blocks come on top of the live bytes, so a curve just under it can still "
                     "miss (the table says what fits). ",
                     escape(human_bytes(pc.overhead_bytes)));
  } else if (cuda_device(p)) {
    s += "The budget is what the caching allocator may reserve: its rounding and cached blocks come on top of the live bytes, so "
         "a curve just under it can still miss (the table says what fits). ";
  }
  s += "Hover a curve or a peak for its numbers.</p>\n";
  s += memory_chart(p, pc);
  s += "</section>\n";

  s += "<section>\n<h2>Strategies compared</h2>\n" + strategies_table(p) + "</section>\n";
  s += "<section>\n<h2>The plan layer by layer</h2>\n" + decisions_section(p) + "</section>\n";
  s += "<footer>headroom plan: every strategy's candidate is re-simulated by the same interpreter and heap model as "
       "<code>estimate</code>; times come from a roofline cost model that orders strategies and is not validated against a "
       "GPU. See docs/planning.md and docs/report.md.</footer>\n";
  s += "</main>\n</body>\n</html>\n";
  return s;
}

}  // namespace headroom
