// The pack page, in the order it reads: header and cards, the savings chart, free sharing, the
// weight distribution per model, the merge plan and residency. Layout is in pixels, computed
// here; report/svg.h has the primitives and report/html_report.h the shared style sheet.
#include "report/pack_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "pack/sharing.h"
#include "pack/swap_sim.h"
#include "report/html_report.h"
#include "report/palette.h"
#include "report/svg.h"
#include "util/format.h"

namespace headroom {
namespace {

using svg::card;
using svg::escape;
using svg::num;

constexpr const char* kFree = "#009E73";  // bluish green: free sharing
constexpr const char* kCurve = "#0072B2";  // blue: the merge plan

std::string model_list(const PackReport& r) {
  std::string s;
  for (size_t i = 0; i < r.models.size(); ++i) s += (i ? ", " : "") + r.models[i].label;
  return s;
}

std::string subtitle(const PackReport& r) {
  std::string s = fmt::format("{} models · batch {} · inference, fp32", r.models.size(), r.options.batch);
  if (r.residency) s += fmt::format(" · GPU {} ({})", r.residency->gpu, human_bytes(r.residency->memory_bytes));
  else s += " · no GPU given";
  return s;
}

std::string cards(const PackReport& r) {
  const MergePlan& p = r.plan;
  const IdenticalPlan& id = r.identical;
  std::string s = R"(<section class="cards">)";
  s += card("weights, no sharing", human_bytes(p.unshared_bytes), with_commas(p.unshared_bytes) + " bytes");
  // Green only for a real saving: "0 B" is not good news.
  s += card("free sharing", (id.saved_bytes > 0 ? "−" : "") + human_bytes(id.saved_bytes),
            id.saved_bytes > 0 ? fmt::format("{} groups of bit-identical layers, no retraining", id.groups.size())
                               : std::string("no bit-identical layers found"),
            id.saved_bytes > 0 ? "free" : "");
  s += card("every merge", (p.saved_bytes > 0 ? "−" : "") + human_bytes(p.saved_bytes),
            fmt::format("{} groups of equal configuration, joint retraining", p.groups.size()));
  if (r.residency) {
    const Residency& rs = *r.residency;
    const ResidentSet& a = rs.all_unshared;
    const ResidentSet& f = rs.all_free;
    const ResidentSet& b = rs.all_shared;
    // --merged-groups: residency counts the greedy prefix kept, not every merge.
    const std::string merges = static_cast<size_t>(r.merged_groups) == p.groups.size()
                                   ? std::string("every merge")
                                   : fmt::format("the first {} of {} merges", r.merged_groups, p.groups.size());
    std::string v = a.fits ? "all fit" : f.fits ? "fit with free sharing" : b.fits ? "fit with merges" : "do not all fit";
    s += card("on " + rs.gpu, v,
              human_bytes(a.total_bytes) + " without sharing, " + human_bytes(f.total_bytes) + " with free sharing, " +
                  human_bytes(b.total_bytes) + " with free sharing and " + merges + ", of " + human_bytes(rs.memory_bytes),
              a.fits || f.fits || b.fits ? "fits" : "nofit");
  } else {
    s += card("GPU", "not given", "add --gpu NAME for capacity and residency");
  }
  s += "</section>\n";
  return s;
}

// ---- 1. the savings curve --------------------------------------------------------------------

std::string savings_chart(const PackReport& r) {
  const MergePlan& p = r.plan;
  const size_t n = p.groups.size();
  constexpr double W = 1160, H = 420, L = 84, R = 200, T = 24, B = 50;
  constexpr double x0 = L, y0 = T, pw = W - L - R, ph = H - T - B;

  std::vector<int64_t> weights = {p.unshared_bytes};
  for (int64_t c : p.cumulative_saved) weights.push_back(p.unshared_bytes - c);

  double data_max = static_cast<double>(std::max<int64_t>(1, p.unshared_bytes));
  double target = data_max;
  bool capacity_on_scale = false;
  int64_t room = 0;
  if (r.residency) {
    const Residency& rs = *r.residency;
    int64_t act = 0;
    for (const PackModel& m : r.models) act = std::max(act, m.device_need_bytes);  // the residency rule's term
    room = rs.usable_bytes - rs.context_bytes - act;
    capacity_on_scale = static_cast<double>(rs.memory_bytes) <= 2.5 * data_max;
    if (capacity_on_scale) target = std::max(target, static_cast<double>(rs.memory_bytes));
  }
  svg::ByteTicks ticks = svg::byte_ticks(target * 1.06, 6);
  const double y_max = ticks.top_bytes;
  const double x_span = static_cast<double>(std::max<size_t>(n, 1));
  auto X = [&](double k) { return x0 + pw * k / x_span; };
  auto Y = [&](double bytes) { return y0 + ph - ph * bytes / y_max; };

  std::string s = fmt::format(
      R"(<svg class="chart" width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="total weight memory as the merge plan's groups are merged">)",
      num(W), num(H), num(W), num(H));
  s += "\n";
  s += R"(<g class="y-axis" font-size="11" fill="#333">)";
  for (double v : ticks.values) {
    s += svg::line(x0, Y(v), x0 + pw, Y(v), v == 0 ? R"(stroke="#888")" : R"(stroke="#000" stroke-opacity="0.1")");
    s += svg::text(x0 - 6, Y(v) + 4, svg::tick_label(ticks, v), R"(text-anchor="end")");
  }
  s += svg::text(16, y0 + ph / 2, "weights of all models",
                 fmt::format(R"~(font-size="12" text-anchor="middle" transform="rotate(-90 16 {})")~", num(y0 + ph / 2)));
  s += "</g>\n";

  // X axis: whole numbers of groups, about ten ticks.
  s += R"(<g class="x-axis" font-size="11" fill="#333">)";
  const int64_t step = svg::nice_count_step(static_cast<int64_t>(n), 10);
  for (int64_t k = 0; k <= static_cast<int64_t>(n); k += step) {
    double x = X(static_cast<double>(k));
    s += svg::line(x, y0 + ph, x, y0 + ph + 4, R"(stroke="#888")");
    s += svg::text(x, y0 + ph + 16, with_commas(k), R"(text-anchor="middle")");
  }
  s += svg::text(x0 + pw / 2, H - 8,
                 fmt::format("groups merged, greedy order (largest saving first; {} groups)", with_commas(static_cast<int64_t>(n))),
                 R"(font-size="12" text-anchor="middle")");
  s += "</g>\n";

  std::vector<svg::MarginLabel> labels;
  // Free sharing: a level, reached without retraining.
  const IdenticalPlan& id = r.identical;
  if (id.saved_bytes > 0) {
    double y = Y(static_cast<double>(id.shared_bytes));
    s += svg::line(x0, y, x0 + pw, y,
                   fmt::format(R"(class="free-sharing" data-bytes="{}" stroke="{}" stroke-width="2" stroke-dasharray="8,4")",
                               id.shared_bytes, kFree));
    labels.push_back({y, "free sharing only", human_bytes(id.shared_bytes) + " (bit-identical)", "free"});
    // Free sharing and every merge together: a layer counts once (pack/sharing.h), so this is
    // below both the free level and the curve's end.
    std::vector<ModelLayers> layers;
    std::vector<int32_t> all;
    for (const PackModel& m : r.models) {
      all.push_back(static_cast<int32_t>(layers.size()));
      layers.push_back(m.layers);
    }
    const int64_t both = weights_with_sharing(layers, r.plan, id, Sharing::Merged, all);
    double yb = Y(static_cast<double>(both));
    s += svg::line(x0, yb, x0 + pw, yb,
                   fmt::format(R"(class="free-and-merges" data-bytes="{}" stroke="{}" stroke-width="1.5" stroke-dasharray="2,3")",
                               both, kFree));
    labels.push_back({yb, "free + every merge", human_bytes(both), "free"});
  }
  if (r.residency) {
    const Residency& rs = *r.residency;
    if (capacity_on_scale) {
      double y = Y(static_cast<double>(rs.memory_bytes));
      s += svg::line(x0, y, x0 + pw, y,
                     fmt::format(R"(class="capacity" data-bytes="{}" stroke="#000" stroke-width="2")", rs.memory_bytes));
      labels.push_back({y, rs.gpu + " capacity", human_bytes(rs.memory_bytes), "capacity"});
      if (room > 0) {
        double yr = Y(static_cast<double>(room));
        s += svg::line(x0, yr, x0 + pw, yr,
                       fmt::format(R"(class="room" data-bytes="{}" stroke="#000" stroke-width="1.2" stroke-dasharray="1.5,3")", room));
        labels.push_back({yr, "room for weights", human_bytes(room) + " (less context, largest activations)", "room"});
      }
    } else {
      labels.push_back({y0 + 6, "▲ " + rs.gpu + " capacity",
                        fmt::format("{}, off the scale ({:.0f}x)", human_bytes(rs.memory_bytes),
                                    static_cast<double>(rs.memory_bytes) / data_max),
                        "capacity-off"});
    }
  }

  // The curve.
  s += fmt::format(R"(<g class="savings" data-plot="{} {} {} {}" data-y-max="{}" data-groups="{}">)", num(x0), num(y0),
                   num(pw), num(ph), static_cast<int64_t>(y_max), n);
  std::vector<svg::Point> pts;
  std::string data;
  for (size_t k = 0; k < weights.size(); ++k) {
    pts.push_back({X(static_cast<double>(k)), Y(static_cast<double>(weights[k]))});
    data += (k ? "," : "") + std::to_string(weights[k]);
  }
  std::vector<svg::Point> area = pts;
  area.push_back({pts.back().x, Y(0)});
  area.push_back({pts.front().x, Y(0)});
  s += fmt::format(R"(<path fill="{}" fill-opacity="0.12" d="{}"/>)", kCurve, svg::path_d(area, true));
  s += fmt::format(R"(<path class="savings-curve" data-weights="{}" fill="none" stroke="{}" stroke-width="2.2" d="{}"/>)",
                   data, kCurve, svg::path_d(pts));
  if (n <= 80) {
    for (size_t k = 1; k < pts.size(); ++k) {
      const MergeGroup& g = p.groups[k - 1];
      s += "<g>" +
           svg::title(fmt::format("after group {}: {} ({} saved, {} of the possible saving); merged {} x {}", k,
                                  human_bytes(weights[k]), human_bytes(p.cumulative_saved[k - 1]),
                                  percent(p.cumulative_saved[k - 1], p.saved_bytes), g.members.size(),
                                  human_bytes(g.layer_bytes))) +
           svg::circle(pts[k].x, pts[k].y, 3, fmt::format(R"(fill="{}")", kCurve)) + "</g>";
    }
  }
  s += "</g>\n";

  // 50/80/95% markers.
  s += R"(<g class="thresholds" font-size="11">)";
  std::vector<std::array<double, 4>> taken;  // label boxes: x1, y1, x2, y2
  for (size_t i = 0; i < p.thresholds.size(); ++i) {
    const SavingThreshold& t = p.thresholds[i];
    if (t.groups == 0) continue;
    double x = X(t.groups), y = Y(static_cast<double>(weights[static_cast<size_t>(t.groups)]));
    s += fmt::format(R"(<g class="threshold" data-fraction="{}" data-groups="{}" data-weights="{}">)", num(t.fraction),
                     t.groups, weights[static_cast<size_t>(t.groups)]);
    s += svg::line(x, y, x, y0 + ph, R"(stroke="#000" stroke-width="1" stroke-dasharray="2,2")");
    s += svg::circle(x, y, 5, R"(fill="#fff" stroke="#000" stroke-width="2")");
    std::string label = fmt::format("{:.0f}%: {} group{}", t.fraction * 100, t.groups, t.groups == 1 ? "" : "s");
    // Above the point, raised a line at a time until it covers no earlier label (markers at
    // nearby x: a steep curve reaches 50% and 80% within a few groups).
    double lw = svg::text_width(label, 11), ly = y - 10;
    for (int tries = 0; tries < 8; ++tries) {
      bool clash = std::any_of(taken.begin(), taken.end(), [&](const std::array<double, 4>& b) {
        return x + 6 < b[2] && x + 6 + lw > b[0] && ly - 11 < b[3] && ly + 3 > b[1];
      });
      if (!clash) break;
      ly -= 14;
    }
    ly = std::max(y0 + 10, ly);
    taken.push_back({x + 6, ly - 11, x + 6 + lw, ly + 3});
    s += svg::text(x + 6, ly, label, R"(class="halo" font-weight="600")");
    s += "</g>";
  }
  s += "</g>\n";

  svg::spread_labels(labels, 28, y0 - 4);
  s += R"(<g class="margin-labels" font-size="11">)";
  for (const svg::MarginLabel& l : labels) {
    s += svg::text(x0 + pw + 8, l.y, l.head, fmt::format(R"(font-weight="600" data-label="{}")", l.style));
    s += svg::text(x0 + pw + 8, l.y + 13, l.value, R"(fill="#333")");
  }
  s += "</g>\n</svg>\n";
  s += fmt::format(
      R"(<p class="legend"><span><span class="ln" style="border-top-color:{}"></span>weights after merging the first k groups (joint retraining)</span>{}{}<span>○ 50/80/95% of the possible saving</span></p>)",
      kCurve,
      id.saved_bytes > 0
          ? fmt::format(R"(<span><span class="ln dashed" style="border-top-color:{}"></span>with free sharing only</span>)", kFree)
          : "",
      capacity_on_scale ? R"(<span><span class="ln"></span>GPU capacity</span><span><span class="ln dotted"></span>room for weights</span>)"
                        : "");
  s += "\n";
  return s;
}

// ---- 2. free sharing -------------------------------------------------------------------------

std::string free_section(const PackReport& r) {
  const IdenticalPlan& id = r.identical;
  std::string s;
  s += fmt::format(R"(<p class="lead">Layers whose weights are bit-identical (same dtype, shape and bytes, confirmed byte by byte) keep one copy: {} saved, {} of all weights, with no retraining.</p>)",
                   human_bytes(id.saved_bytes), percent(id.saved_bytes, id.unshared_bytes));
  s += "\n<table class=\"checks\"><thead><tr><th>model</th><th>weight values</th></tr></thead><tbody>";
  for (size_t i = 0; i < r.models.size(); ++i) {
    s += fmt::format(R"(<tr data-status="{}"><td><code>{}</code></td><td>{}</td></tr>)",
                     weight_check_name(id.checks[i].status), svg::breakable(r.models[i].label),
                     escape(weight_check_text(id.checks[i])));
  }
  s += "</tbody></table>\n";
  if (id.groups.empty()) return s;
  s += R"(<table class="identical"><thead><tr><th class="n">#</th><th class="n">saved</th><th class="n">layer</th><th>kind</th><th>members</th></tr></thead><tbody>)";
  size_t shown = std::min<size_t>(id.groups.size(), 30);
  for (size_t i = 0; i < shown; ++i) {
    const IdenticalGroup& g = id.groups[i];
    std::string members;
    for (const IdenticalMember& mb : g.members) {
      const PackModel& m = r.models[static_cast<size_t>(mb.model)];
      members += (members.empty() ? "" : ", ") + std::string("<code>") + svg::breakable(m.label) + ":<wbr>" +
                 svg::breakable(m.layers.layers[static_cast<size_t>(mb.layer)].name) + "</code>";
    }
    s += fmt::format(R"(<tr data-bytes-saved="{}"><td class="n">{}</td><td class="n">{}</td><td class="n">{}</td><td>{}</td><td>{}</td></tr>)",
                     g.bytes_saved, i + 1, human_bytes(g.bytes_saved), human_bytes(g.layer_bytes), op_kind_name(g.kind),
                     members);
  }
  if (shown < id.groups.size()) {
    s += fmt::format(R"(<tr><td></td><td class="muted" colspan="4">and {} more (--json has them all)</td></tr>)",
                     id.groups.size() - shown);
  }
  s += "</tbody></table>\n";
  return s;
}

// ---- 3. weight distribution per model --------------------------------------------------------

std::string distribution_chart(const PackReport& r) {
  constexpr double W = 640, H = 340, L = 62, R = 20, T = 14, B = 46;
  constexpr double x0 = L, y0 = T, pw = W - L - R, ph = H - T - B;
  auto X = [&](double f) { return x0 + pw * f; };
  auto Y = [&](double f) { return y0 + ph - ph * f; };
  std::string s = "<div class=\"weights\"><div>";
  s += fmt::format(
      R"(<svg class="pareto" width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="cumulative share of layer memory per model">)",
      num(W), num(H), num(W), num(H));
  s += R"(<g font-size="11" fill="#333">)";
  for (int pct = 0; pct <= 100; pct += 20) {
    double f = pct / 100.0;
    s += svg::line(x0, Y(f), x0 + pw, Y(f), pct == 0 ? R"(stroke="#888")" : R"(stroke="#000" stroke-opacity="0.1")");
    s += svg::text(x0 - 6, Y(f) + 4, fmt::format("{}%", pct), R"(text-anchor="end")");
    s += svg::line(X(f), y0 + ph, X(f), y0 + ph + 4, R"(stroke="#888")");
    s += svg::text(X(f), y0 + ph + 16, fmt::format("{}%", pct), R"(text-anchor="middle")");
  }
  s += svg::text(14, y0 + ph / 2, "share of layer memory",
                 fmt::format(R"~(font-size="12" text-anchor="middle" transform="rotate(-90 14 {})")~", num(y0 + ph / 2)));
  s += svg::text(x0 + pw / 2, H - 8, "share of the model's layers, largest first", R"(font-size="12" text-anchor="middle")");
  s += "</g>\n";
  s += fmt::format(R"(<g class="distribution" data-plot="{} {} {} {}">)", num(x0), num(y0), num(pw), num(ph));
  std::string legend;
  // Models with the same layer bytes (the same model twice, or twins) have the same curve: it is
  // drawn once, in the first one's colour, and named for all of them.
  std::vector<std::vector<int64_t>> sorted(r.models.size());
  for (size_t mi = 0; mi < r.models.size(); ++mi) {
    for (const Layer& l : r.models[mi].layers.layers) sorted[mi].push_back(l.bytes);
    std::sort(sorted[mi].begin(), sorted[mi].end(), std::greater<>());
  }
  for (size_t mi = 0; mi < r.models.size(); ++mi) {
    const PackModel& m = r.models[mi];
    const std::vector<int64_t>& bytes = sorted[mi];
    if (bytes.empty() || m.layers.layer_bytes <= 0) continue;
    bool drawn = false;
    std::string label = m.label;
    for (size_t k = 0; k < r.models.size(); ++k) {
      if (sorted[k] != bytes || k == mi) continue;
      if (k < mi) drawn = true;
      else label += ", " + r.models[k].label;
    }
    if (drawn) continue;
    std::vector<svg::Point> pts = {{X(0), Y(0)}};
    std::string data;
    int64_t acc = 0;
    for (size_t i = 0; i < bytes.size(); ++i) {
      acc += bytes[i];
      data += (i ? "," : "") + std::to_string(bytes[i]);
      pts.push_back({X(static_cast<double>(i + 1) / static_cast<double>(bytes.size())),
                     Y(static_cast<double>(acc) / static_cast<double>(m.layers.layer_bytes))});
    }
    std::string_view color = series_color(mi);
    std::string dash = mi / kSeriesColors == 0 ? "" : fmt::format(R"( stroke-dasharray="{},3")", 2 + 4 * (mi / kSeriesColors));
    s += fmt::format(R"(<path class="model-share" data-model="{}" data-bytes="{}" fill="none" stroke="{}" stroke-width="2"{} d="{}">{}</path>)",
                     escape(label), data, color, dash, svg::path_d(pts),
                     svg::title(fmt::format("{}: {} layers, {}", label, bytes.size(), human_bytes(m.layers.layer_bytes))));
    legend += fmt::format(R"(<span><span class="ln" style="border-top-color:{}{}"></span>{}{}</span>)", color,
                          dash.empty() ? "" : ";border-top-style:dashed", svg::breakable(label),
                          label != m.label ? " (same layers: one curve)" : "");
  }
  s += "</g>\n</svg>\n";
  s += "<p class=\"legend\">" + legend + "</p></div>\n";

  // The numbers: share held by the largest 1%, 10%, 50% of the layers.
  s += R"(<table class="distribution-table"><thead><tr><th>model</th><th class="n">layers</th><th class="n">layer memory</th><th class="n">top 1%</th><th class="n">top 10%</th><th class="n">top 50%</th></tr></thead><tbody>)";
  for (size_t mi = 0; mi < r.models.size(); ++mi) {
    const PackModel& m = r.models[mi];
    const LayerDistribution& d = r.plan.distributions[mi];
    s += fmt::format(R"(<tr><td><code>{}</code></td><td class="n">{}</td><td class="n">{}</td>)", svg::breakable(m.label), d.layers,
                     human_bytes(m.layers.layer_bytes));
    for (const LayerDistribution::Top& t : d.top) {
      s += fmt::format(R"(<td class="n" title="largest {} layers: {}">{:.1f}%</td>)", t.count, human_bytes(t.bytes),
                       100 * t.share);
    }
    s += "</tr>";
  }
  s += "</tbody></table></div>\n";
  return s;
}

// ---- 4. merge plan and residency -------------------------------------------------------------

std::string plan_table(const PackReport& r) {
  const MergePlan& p = r.plan;
  if (p.groups.empty()) return "<p class=\"muted\">No two models have layers of equal configuration.</p>\n";
  std::string s =
      R"(<table class="plan"><thead><tr><th class="n">#</th><th class="n">saved</th><th class="n">cumulative</th><th class="n">of possible</th><th>kind</th><th>members</th></tr></thead><tbody>)";
  size_t shown = std::min<size_t>(p.groups.size(), 20);
  for (size_t i = 0; i < shown; ++i) {
    const MergeGroup& g = p.groups[i];
    std::string members;
    for (const GroupMember& mb : g.members) {
      const PackModel& m = r.models[static_cast<size_t>(mb.model)];
      members += (members.empty() ? "" : ", ") + std::string("<code>") + svg::breakable(m.label) + ":<wbr>" +
                 svg::breakable(m.layers.layers[static_cast<size_t>(mb.layer)].name) + "</code>";
    }
    s += fmt::format(R"(<tr><td class="n">{}</td><td class="n">{}</td><td class="n">{}</td><td class="n">{}</td><td>{}</td><td>{}</td></tr>)",
                     i + 1, human_bytes(g.bytes_saved), human_bytes(p.cumulative_saved[i]),
                     percent(p.cumulative_saved[i], p.saved_bytes), op_kind_name(g.kind), members);
  }
  if (shown < p.groups.size()) {
    s += fmt::format(R"(<tr><td></td><td class="muted" colspan="5">and {} more (--json has the whole plan)</td></tr>)",
                     p.groups.size() - shown);
  }
  s += "</tbody></table>\n";
  return s;
}

std::string residency_table(const PackReport& r) {
  const Residency& rs = *r.residency;
  auto names = [&](const ResidentSet& set) {
    std::string s;
    for (int32_t m : set.models) s += (s.empty() ? "" : ", ") + r.models[static_cast<size_t>(m)].label;
    return s.empty() ? std::string("none") : s;
  };
  std::string s = fmt::format(
      R"(<p class="lead">CUDA context {} + the reserved peak of the set's own program (its weights, a shared pool once, then one request per model on one caching allocator), against {}.</p>)",
      human_bytes(rs.context_bytes), human_bytes(rs.memory_bytes));
  s += R"(<table class="residency"><thead><tr><th>set</th><th>models</th><th class="n">weights</th><th class="n">total</th><th>fits</th></tr></thead><tbody>)";
  for (auto [what, set] : {std::pair<const char*, const ResidentSet*>{"all, no sharing", &rs.all_unshared},
                           {"all, free sharing", &rs.all_free},
                           {"all, free sharing + every merge", &rs.all_shared},
                           {"greedy, no sharing", &rs.greedy_unshared},
                           {"greedy, free sharing", &rs.greedy_free},
                           {"greedy, free sharing + every merge", &rs.greedy_shared}}) {
    s += fmt::format(R"(<tr><td>{}</td><td>{}</td><td class="n">{}</td><td class="n">{}</td><td>{}</td></tr>)", what,
                     svg::breakable(names(*set)), human_bytes(set->weights_bytes), human_bytes(set->total_bytes),
                     set->fits ? "yes" : "no");
  }
  s += "</tbody></table>\n";
  return s;
}

// ---- 5. the workload simulation --------------------------------------------------------------

std::string ms_of(int64_t ns) { return fmt::format("{:.1f} ms", static_cast<double>(ns) * 1e-6); }

// One row per policy and sharing choice: what the GPU spent waiting for loads (stalls), the loads,
// the bytes moved, the evictions, deadline misses and the worst p99; then one lane per run on a
// common time axis: execution in the model's colour, loads (the GPU stalled) in black.
std::string simulation_section(const PackReport& r) {
  const SimulationSetup& st = *r.setup;
  std::string s = fmt::format(
      R"(<p class="lead">Requests served one at a time over a {:g} s window (seed {}), weights swapped in over the host link when the model is not resident, with {} of memory for weights (pack/swap_sim.h, docs/pack.md). Each eviction policy runs without sharing, with free sharing and with free sharing plus every merge.</p>)",
      st.window_s, st.seed, escape(human_bytes(st.weights_capacity_bytes)));
  s += "\n<h3>Requests</h3>\n";
  s += R"(<table class="workload"><thead><tr><th>model</th><th class="n">batch</th><th class="n">exec</th><th>from</th><th class="n">target</th><th class="n">requests</th></tr></thead><tbody>)";
  for (const SimulatedModel& m : st.models) {
    s += fmt::format(R"(<tr><td><code>{}</code></td><td class="n">{}</td><td class="n">{}</td><td>{}</td><td class="n">{}</td><td class="n">{}</td></tr>)",
                     svg::breakable(m.label), m.batch, ms_of(static_cast<int64_t>(m.exec_s * 1e9)), escape(m.exec_source),
                     ms_of(static_cast<int64_t>(m.latency_target_s * 1e9)), m.requests);
  }
  s += "</tbody></table>\n";
  s += "<h3>Per policy and sharing choice</h3>\n";
  s += R"(<table class="runs-compared"><thead><tr><th>policy</th><th>sharing</th><th class="n">stalls (load wait)</th><th class="n">loads</th><th class="n">moved</th><th class="n">evictions</th><th class="n">deadline misses</th><th class="n">worst p99</th><th class="n">finished</th></tr></thead><tbody>)";
  int64_t makespan = 1;
  for (const SimulationRun& run : r.runs) makespan = std::max(makespan, run.result.makespan_ns);
  for (const SimulationRun& run : r.runs) {
    int64_t loads = 0, misses = 0, p99 = 0;
    for (const SwapModelStats& m : run.result.models) {
      loads += m.loads;
      misses += m.deadline_misses;
      p99 = std::max(p99, m.p99_ns);
    }
    s += fmt::format(
        R"(<tr class="sim-run" data-policy="{}" data-sharing="{}" data-stall-ns="{}" data-loads="{}"><td>{}</td><td>{}</td><td class="n">{}</td><td class="n">{}</td><td class="n">{}</td><td class="n">{}</td><td class="n">{}</td><td class="n">{}</td><td class="n">{}</td></tr>)",
        eviction_policy_name(run.policy), sharing_key(run.sharing), run.result.load_wait_ns, loads, eviction_policy_name(run.policy),
        sharing_label(run.sharing), ms_of(run.result.load_wait_ns), loads, human_bytes(run.result.bytes_moved), run.result.evictions,
        misses, ms_of(p99), ms_of(run.result.makespan_ns));
  }
  s += "</tbody></table>\n";

  // The lanes.
  s += "<h3>The GPU's time, one lane per run</h3>\n";
  constexpr double W = 1160, L = 150, R = 20, T = 8, lane = 22, B = 40;
  const double H = T + lane * static_cast<double>(r.runs.size()) + B;
  const double x0 = L, pw = W - L - R;
  auto X = [&](int64_t ns) { return x0 + pw * static_cast<double>(ns) / static_cast<double>(makespan); };
  s += fmt::format(R"(<svg class="chart sim-timeline" width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="the GPU's time per run: execution and load stalls">)",
                   num(W), num(H), num(W), num(H));
  s += "\n";
  for (size_t i = 0; i < r.runs.size(); ++i) {
    const SimulationRun& run = r.runs[i];
    const double y = T + lane * static_cast<double>(i);
    s += svg::text(x0 - 8, y + 15, fmt::format("{}, {}", eviction_policy_name(run.policy), sharing_label(run.sharing)),
                   R"(font-size="11" text-anchor="end")");
    s += svg::rect(x0, y + 3, pw, lane - 6, R"(fill="#000" fill-opacity="0.04")");
    // Segments merged while they are the same kind and model and touch at the pixel scale, so a
    // long trace stays a few hundred rectangles.
    struct Seg {
      double a, b;
      int model;  // -1: a load
    };
    std::vector<Seg> segs;
    auto add = [&](double a, double b, int model) {
      if (!segs.empty() && segs.back().model == model && a - segs.back().b < 0.5) {
        segs.back().b = std::max(segs.back().b, b);
      } else {
        segs.push_back({a, b, model});
      }
    };
    for (const SwapRequestTrace& q : run.result.trace) {
      if (q.load_ns > 0) add(X(q.start_ns), X(q.start_ns + q.load_ns), -1);
      add(X(q.start_ns + q.load_ns), X(q.finish_ns), q.model);
    }
    s += fmt::format(R"(<g class="sim-lane" data-policy="{}" data-sharing="{}">)", eviction_policy_name(run.policy), sharing_key(run.sharing));
    for (const Seg& g : segs) {
      s += svg::rect(g.a, y + (g.model < 0 ? 3 : 6), std::max(0.3, g.b - g.a), g.model < 0 ? lane - 6 : lane - 12,
                     g.model < 0 ? std::string(R"(fill="#000")")
                                 : fmt::format(R"(fill="{}")", series_color(static_cast<size_t>(g.model))));
    }
    s += "</g>\n";
  }
  const double axis_y = T + lane * static_cast<double>(r.runs.size());
  s += R"(<g class="x-axis" font-size="11" fill="#333">)";
  const double span_ms = static_cast<double>(makespan) * 1e-6;
  const double step = svg::nice_step(span_ms, 8);
  for (int k = 0; k * step <= span_ms * (1 + 1e-9); ++k) {
    const double x = X(static_cast<int64_t>(std::llround(k * step * 1e6)));
    s += svg::line(x, axis_y, x, axis_y + 4, R"(stroke="#888")");
    s += svg::text(x, axis_y + 16, fmt::format("{:g}", std::round(k * step * 1e6) / 1e6), R"(text-anchor="middle")");
  }
  s += svg::text(x0 + pw / 2, H - 6, "time (ms) until the last request of the slowest run finished", R"(font-size="12" text-anchor="middle")");
  s += "</g>\n</svg>\n";
  s += R"(<p class="legend"><span><span class="sw" style="background:#000"></span>GPU waits for a load (stall)</span>)";
  for (size_t m = 0; m < st.models.size(); ++m) {  // the trace's model indices are the simulated models'
    s += fmt::format(R"(<span><span class="sw" style="background:{}"></span>{} executes</span>)", series_color(m), svg::breakable(st.models[m].label));
  }
  s += "</p>\n";
  if (!st.not_simulated.empty()) {
    std::string names;
    for (const std::string& n : st.not_simulated) names += (names.empty() ? "" : ", ") + n;
    s += "<p class=\"muted\">Not in the workload: " + svg::breakable(names) + ".</p>\n";
  }
  return s;
}

constexpr const char* kPackCss = R"(
.card.free{border-color:#009E73}
.card.free .v{color:#00694d}
table.checks,table.identical,table.plan,table.residency,table.workload,table.runs-compared{margin:6px 0 10px}
h3{font-size:14px;margin:12px 0 4px}
)";

}  // namespace

std::string pack_html(const PackReport& r) {
  const MergePlan& p = r.plan;
  std::string title = "headroom pack: " + model_list(r) + " · " + subtitle(r);
  std::string s;
  s.reserve(64 * 1024);
  s += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  s += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  s += "<meta name=\"generator\" content=\"headroom pack\">\n";
  s += "<title>" + escape(title) + "</title>\n<style>" + std::string(html_page_css()) + kPackCss +
       "</style>\n</head>\n<body>\n<main>\n";
  s += fmt::format("<header><h1>headroom pack: <span class=\"model\">{}</span></h1><p class=\"sub\">{}</p></header>\n",
                   svg::breakable(model_list(r)), escape(subtitle(r)));
  s += cards(r);

  s += "<section>\n<h2>Cumulative savings of merging</h2>\n";
  s += fmt::format(R"(<p class="lead">Total weight memory of the {} models as the merge plan's groups (layers of equal configuration across models, GEMEL) are merged, largest saving first: {} to {}.)",
                   r.models.size(), human_bytes(p.unshared_bytes), human_bytes(p.shared_bytes));
  if (p.saved_bytes > 0) {
    s += fmt::format(" Half of the possible saving takes {} of {} groups.", p.thresholds[0].groups, p.groups.size());
  }
  s += " Merged layers need joint retraining; bit-identical ones share for free.</p>\n";
  s += savings_chart(r);
  s += "</section>\n";

  s += "<section>\n<h2>Free sharing: bit-identical weights</h2>\n" + free_section(r) + "</section>\n";
  s += "<section>\n<h2>Weight distribution per model</h2>\n";
  s += "<p class=\"lead\">Cumulative share of each model's layer memory held by its largest layers: a curve that "
       "rises steeply holds most of its weights in a few layers (GEMEL's power law), where merging pays most.</p>\n";
  s += distribution_chart(r) + "</section>\n";
  s += "<section>\n<h2>Merge plan (largest groups)</h2>\n" + plan_table(r) + "</section>\n";
  if (r.residency) s += "<section>\n<h2>Residency on " + escape(r.residency->gpu) + "</h2>\n" + residency_table(r) + "</section>\n";
  if (r.setup) s += "<section>\n<h2>Workload simulation: swapping weights</h2>\n" + simulation_section(r) + "</section>\n";
  s += "<footer>headroom pack: layers are grouped by configuration (merge plan, needs retraining) and by bit-identical "
       "weights (free); weights are exact bytes as the graphs declare them. See docs/pack.md and docs/report.md.</footer>\n";
  s += "</main>\n</body>\n</html>\n";
  return svg::scrollable_tables(s);
}

}  // namespace headroom
