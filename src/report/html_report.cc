// The HTML report, in the order the page reads:
//   data     memory_timeline (replay the program: per-step high-water marks, caching allocator's
//            reserved bytes, downsampling) and weight_groups (parameters by module);
//   page     header and cards, then one function per section: the memory chart, the breakdown
//            bars, the largest buffers, weights per layer, notes;
//   output   write_file_atomically for the CLI.
// Layout is computed here in pixels (no script runs in the page); svg.h has the primitives.
#include "report/html_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "util/format.h"
#include "report/palette.h"
#include "report/svg.h"
#include "sim/caching_allocator.h"

namespace headroom {

// ---------------------------------------------------------------------------------------------
// Data

Timeline memory_timeline(const Program& p, const CachingAllocatorOptions* allocator, size_t max_points) {
  HEADROOM_CHECK(max_points >= 2, "the memory chart needs at least 2 points");
  std::optional<CachingAllocator> alloc;
  if (allocator) alloc.emplace(*allocator);
  std::vector<TimelinePoint> steps(p.steps.size());
  std::vector<Category> cat(p.buffers.size());
  CategoryBytes live{};
  int64_t total = 0;
  for (size_t si = 0; si < p.steps.size(); ++si) {
    const Step& st = p.steps[si];
    TimelinePoint& pt = steps[si];
    pt.step = pt.first_step = pt.last_step = static_cast<int32_t>(si);
    pt.bytes = live;  // the step's start is a candidate
    pt.total = total;
    pt.reserved = alloc ? alloc->footprint() : 0;
    for (int32_t ei = st.first_event; ei < st.end_event; ++ei) {
      const Event& ev = p.events[static_cast<size_t>(ei)];
      const Buffer& b = p.buffers[static_cast<size_t>(ev.buffer)];
      size_t bi = static_cast<size_t>(ev.buffer);
      switch (ev.kind) {
        case Event::Kind::Alloc:
          cat[bi] = b.category;
          live[static_cast<size_t>(b.category)] += b.bytes;
          total += b.bytes;
          if (alloc) alloc->alloc(ev.buffer, b.bytes);
          break;
        case Event::Kind::Free:
          live[static_cast<size_t>(cat[bi])] -= b.bytes;
          total -= b.bytes;
          if (alloc) alloc->free(ev.buffer);
          break;
        case Event::Kind::Retag:
          live[static_cast<size_t>(cat[bi])] -= b.bytes;
          cat[bi] = ev.category;
          live[static_cast<size_t>(ev.category)] += b.bytes;
          break;
      }
      if (total > pt.total) {
        pt.total = total;
        pt.bytes = live;
      }
      if (alloc) pt.reserved = std::max(pt.reserved, alloc->footprint());
    }
  }
  Timeline t;
  t.has_reserved = alloc.has_value();
  if (alloc) t.reserved_peak = alloc->stats().peak_reserved_bytes;
  if (steps.size() <= max_points) {
    t.points = std::move(steps);
  } else {
    size_t run = (steps.size() + max_points - 1) / max_points;
    for (size_t first = 0; first < steps.size(); first += run) {
      size_t last = std::min(steps.size(), first + run) - 1;
      size_t best = first;
      int64_t reserved = 0;
      for (size_t i = first; i <= last; ++i) {
        if (steps[i].total > steps[best].total) best = i;
        reserved = std::max(reserved, steps[i].reserved);
      }
      TimelinePoint pt = steps[best];
      pt.first_step = static_cast<int32_t>(first);
      pt.last_step = static_cast<int32_t>(last);
      pt.reserved = reserved;
      t.points.push_back(pt);
    }
  }
  for (size_t i = 0; i < t.points.size(); ++i) {
    if (t.points[i].total > t.points[t.peak_point].total) t.peak_point = i;
  }
  return t;
}

namespace {

// "layers.2" < "layers.10": runs of digits compare as numbers, the rest byte by byte; equal
// numbers with different spellings ("01", "1") fall back to the bytes, so the order is total.
bool natural_less(std::string_view a, std::string_view b) {
  size_t i = 0, j = 0;
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      size_t ie = i, je = j;
      while (ie < a.size() && digit(a[ie])) ++ie;
      while (je < b.size() && digit(b[je])) ++je;
      std::string_view na = a.substr(i, ie - i), nb = b.substr(j, je - j);
      while (na.size() > 1 && na.front() == '0') na.remove_prefix(1);
      while (nb.size() > 1 && nb.front() == '0') nb.remove_prefix(1);
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
      ++i;
      ++j;
    }
  }
  if (a.size() - i != b.size() - j) return a.size() - i < b.size() - j;
  return a < b;
}

}  // namespace

std::vector<WeightGroup> weight_groups(const Graph& g) {
  std::map<std::string, WeightGroup> by_module;
  for (const Tensor& t : g.tensors) {
    if (!g.is_weight(t.id) || t.tied_to != kNone) continue;
    size_t dot = t.name.rfind('.');
    std::string module = dot == std::string::npos ? t.name : t.name.substr(0, dot);
    WeightGroup& w = by_module[module];
    w.module = module;
    w.bytes += t.bytes();
    if (t.role == TensorRole::Parameter) w.parameters += t.numel();
    ++w.tensors;
  }
  std::vector<WeightGroup> out;
  for (auto& [name, w] : by_module) out.push_back(std::move(w));
  std::sort(out.begin(), out.end(), [](const WeightGroup& a, const WeightGroup& b) {
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    return natural_less(a.module, b.module);
  });
  return out;
}

// ---------------------------------------------------------------------------------------------
// Page

namespace {

using svg::escape;
using svg::num;

// Bottom to top: what lives the whole run first, then what comes and goes, so the moving parts
// are not hidden under a persistent band. Workspaces are either persistent (cuBLAS handles keep
// theirs from the first matmul on) or per-op (cuDNN convolutions): they go just above the inputs
// when they never shrink during the run, else on top.
using StackOrder = std::array<Category, kCategoryCount>;
StackOrder stack_order(const Timeline& t) {
  size_t w = static_cast<size_t>(Category::Workspaces);
  bool persistent = true;
  for (size_t i = 1; i < t.points.size(); ++i) persistent = persistent && t.points[i].bytes[w] >= t.points[i - 1].bytes[w];
  if (persistent) {
    return {Category::Weights,          Category::Inputs,      Category::Workspaces,
            Category::KvCache,          Category::OptimizerState,   Category::Gradients,   Category::SavedActivations,
            Category::Activations,      Category::ActivationGradients, Category::Temporaries};
  }
  return {Category::Weights,          Category::Inputs,      Category::KvCache,
          Category::OptimizerState,   Category::Gradients,        Category::SavedActivations, Category::Activations,
          Category::ActivationGradients, Category::Temporaries, Category::Workspaces};
}

std::string display_name(Category c) {
  std::string s(category_name(c));
  std::replace(s.begin(), s.end(), '_', ' ');
  return s;
}

// A dotted name, escaped, with a line-break opportunity after each dot.
std::string dotted(std::string_view name) {
  std::string s = escape(name);
  std::string out;
  for (char c : s) {
    out += c;
    if (c == '.') out += "<wbr>";
  }
  return out;
}

std::string_view hex(Category c) { return category_color(c).hex; }

std::string swatch(Category c) { return fmt::format(R"(<span class="sw" style="background:{}"></span>)", hex(c)); }

// Light tint behind the plot and a stronger one for the ribbon above it, per phase.
struct PhaseStyle {
  const char* background;
  const char* ribbon;
  const char* short_name;
};
PhaseStyle phase_style(Phase p) {
  switch (p) {
    case Phase::Setup: return {"#F5F5F5", "#DADADA", "set"};
    case Phase::Inference: return {"#F2F6FA", "#C6DBEE", "inf"};
    case Phase::Forward: return {"#F2F6FA", "#C6DBEE", "fwd"};
    case Phase::Backward: return {"#FCF5EC", "#F2D5AE", "bwd"};
    case Phase::Optimizer: return {"#F7F0F6", "#E2CBE0", "opt"};
  }
  return {"#FFFFFF", "#DDDDDD", "?"};
}

std::string mode_desc(const Estimate& e) {
  const EstimateOptions& o = e.options;
  if (o.mode != RunMode::Training) return "inference";
  std::string s = fmt::format("training ({}, {})", optimizer_name(o.optimizer), e.foreach ? "foreach" : "single-tensor");
  if (e.micro_batches > 1) s += fmt::format(", micro-batch {} x {}", e.micro_batch, e.micro_batches);
  return s;
}

std::string subtitle(const Estimate& e) {
  const EstimateOptions& o = e.options;
  std::string s = fmt::format("batch {}", o.batch);
  if (o.seq) s += fmt::format(" · seq {}", *o.seq);
  s += " · " + mode_desc(e);
  s += fmt::format(" · {} · device {}", precision_name(o.precision), o.device);
  if (e.device) s += fmt::format(" · {} ({})", e.device->gpu, human_bytes(e.device->capacity_bytes));
  else s += " · no GPU given";
  return s;
}

// "backward of training step 2" (", micro-batch 3" with gradient accumulation).
std::string step_desc(const Step& st, bool micro_batches) {
  std::string s = std::string(phase_name(st.phase));
  if (st.iteration > 0) s += fmt::format(" of training step {}", st.iteration);
  if (micro_batches && st.micro_batch > 0) s += fmt::format(", micro-batch {}", st.micro_batch);
  return s;
}

// ---- the memory chart ------------------------------------------------------------------------

std::string memory_chart(const Estimate& e, const Timeline& t, const Program& p, const HtmlReportOptions&) {
  constexpr double W = 1160, H = 480, L = 76, R = 176, T = 58, B = 50;
  constexpr double x0 = L, y0 = T, pw = W - L - R, ph = H - T - B;
  const size_t n_steps = p.steps.size();
  const TimelinePoint& peak = t.points[t.peak_point];
  const std::optional<DeviceMemory>& dev = e.device;
  const bool micro = e.micro_batches > 1;
  const StackOrder order = stack_order(t);

  double data_max = static_cast<double>(std::max(peak.total, t.reserved_peak));
  bool capacity_on_scale = false;
  double target = data_max;
  if (dev) {
    capacity_on_scale = static_cast<double>(dev->capacity_bytes) <= 2.5 * std::max(1.0, data_max);
    if (capacity_on_scale) target = std::max(target, static_cast<double>(dev->capacity_bytes));
  }
  svg::ByteTicks ticks = svg::byte_ticks(std::max(1.0, target * 1.06), 6);
  const double y_max = ticks.top_bytes;
  auto X = [&](double step) { return x0 + pw * (step + 0.5) / static_cast<double>(n_steps); };
  auto XL = [&](double step) { return x0 + pw * step / static_cast<double>(n_steps); };  // band edges
  auto Y = [&](double bytes) { return y0 + ph - ph * bytes / y_max; };

  std::string s;
  s += fmt::format(R"(<svg class="chart" width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="live memory by category over the simulated run">)",
                   num(W), num(H), num(W), num(H));
  s += "\n";

  // Phase bands: runs of steps with the same phase, training step and micro-batch.
  struct Band {
    size_t first, last;
    Phase phase;
    int32_t iteration, micro;
  };
  std::vector<Band> bands;
  for (size_t i = 0; i < n_steps; ++i) {
    const Step& st = p.steps[i];
    if (!bands.empty() && bands.back().phase == st.phase && bands.back().iteration == st.iteration &&
        bands.back().micro == st.micro_batch) {
      bands.back().last = i;
    } else {
      bands.push_back({i, i, st.phase, st.iteration, st.micro_batch});
    }
  }
  // Ribbon labels: the full phase name where it fits, else its short name, centred on the band
  // even when that overflows a narrow band (the optimizer is a few steps), unless it would cover
  // another label. Wide bands claim their space first.
  std::vector<std::string> band_label(bands.size());
  {
    std::vector<size_t> order(bands.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    auto width = [&](const Band& b) { return XL(static_cast<double>(b.last + 1)) - XL(static_cast<double>(b.first)); };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return width(bands[a]) > width(bands[b]); });
    std::vector<std::pair<double, double>> taken;
    for (size_t i : order) {
      const Band& b = bands[i];
      double bw = width(b), cx = XL(static_cast<double>(b.first)) + bw / 2;
      std::string label(phase_name(b.phase));
      if (svg::text_width(label, 11) + 6 > bw) label = phase_style(b.phase).short_name;
      double half = svg::text_width(label, 11) / 2 + 3;
      bool free = std::none_of(taken.begin(), taken.end(), [&](const std::pair<double, double>& r) {
        return cx - half < r.second && cx + half > r.first;
      });
      if (!free) continue;
      taken.push_back({cx - half, cx + half});
      band_label[i] = label;
    }
  }
  s += R"(<g class="phases">)";
  for (size_t i = 0; i < bands.size(); ++i) {
    const Band& b = bands[i];
    PhaseStyle ps = phase_style(b.phase);
    double bx = XL(static_cast<double>(b.first)), bw = XL(static_cast<double>(b.last + 1)) - bx;
    s += svg::rect(bx, y0, bw, ph, fmt::format(R"(fill="{}")", ps.background));
    s += svg::rect(bx, y0 - 20, bw, 17, fmt::format(R"(class="ribbon" data-phase="{}" fill="{}" stroke="#fff" stroke-width="1")",
                                                 phase_name(b.phase), ps.ribbon));
  }
  for (size_t i = 0; i < bands.size(); ++i) {
    const Band& b = bands[i];
    if (band_label[i].empty()) continue;
    double bx = XL(static_cast<double>(b.first)), bw = XL(static_cast<double>(b.last + 1)) - bx;
    std::string tip = fmt::format("{}: steps {}-{}", step_desc(p.steps[b.first], micro), b.first, b.last);
    s += "<g>" + svg::title(tip) +
         svg::text(bx + bw / 2, y0 - 7.5, band_label[i], R"(font-size="11" text-anchor="middle" fill="#222" class="halo-light")") +
         "</g>";
  }
  s += "</g>\n";

  // Training steps above the ribbon, with separators through the plot.
  std::map<int32_t, std::pair<size_t, size_t>> iterations;
  for (size_t i = 0; i < n_steps; ++i) {
    int32_t it = p.steps[i].iteration;
    if (it <= 0) continue;
    auto [pos, inserted] = iterations.try_emplace(it, i, i);
    if (!inserted) pos->second.second = i;
  }
  s += R"(<g class="iterations">)";
  for (const auto& [it, range] : iterations) {
    double a = XL(static_cast<double>(range.first)), b = XL(static_cast<double>(range.second + 1));
    s += svg::line(a + 1, y0 - 30, b - 1, y0 - 30, R"(stroke="#444" stroke-width="1")");
    s += svg::line(a + 1, y0 - 34, a + 1, y0 - 26, R"(stroke="#444" stroke-width="1")");
    s += svg::line(b - 1, y0 - 34, b - 1, y0 - 26, R"(stroke="#444" stroke-width="1")");
    std::string label = fmt::format("training step {}", it);
    if (svg::text_width(label, 12) + 8 > b - a) label = std::to_string(it);
    s += svg::text((a + b) / 2, y0 - 35, label, R"(font-size="12" font-weight="600" text-anchor="middle" class="halo")");
    if (range.first > 0) {
      s += svg::line(a, y0, a, y0 + ph, R"(stroke="#777" stroke-width="1" stroke-dasharray="3,3")");
    }
  }
  s += "</g>\n";

  // Grid and y axis.
  s += R"(<g class="y-axis" font-size="11" fill="#333">)";
  for (double v : ticks.values) {
    double y = Y(v);
    s += svg::line(x0, y, x0 + pw, y, v == 0 ? R"(stroke="#888")" : R"(stroke="#000" stroke-opacity="0.1")");
    s += svg::text(x0 - 6, y + 4, svg::tick_label(ticks, v), R"(text-anchor="end")");
  }
  s += svg::text(16, y0 + ph / 2, "live memory",
                 fmt::format(R"~(font-size="12" text-anchor="middle" transform="rotate(-90 16 {})")~", num(y0 + ph / 2)));
  s += "</g>\n";

  // Stacked areas, drawn as steps: each point holds its value across the steps it stands for.
  s += fmt::format(R"(<g class="timeline" data-plot="{} {} {} {}" data-y-max="{}" data-steps="{}">)", num(x0), num(y0),
                   num(pw), num(ph), static_cast<int64_t>(y_max), n_steps);
  s += "\n";
  std::vector<double> below(t.points.size(), 0.0);
  for (Category c : order) {
    size_t ci = static_cast<size_t>(c);
    bool any = std::any_of(t.points.begin(), t.points.end(), [&](const TimelinePoint& pt) { return pt.bytes[ci] != 0; });
    if (!any) continue;
    std::vector<svg::Point> pts;
    pts.reserve(t.points.size() * 2);
    std::vector<double> above(below);
    for (size_t i = 0; i < t.points.size(); ++i) {
      above[i] += static_cast<double>(t.points[i].bytes[ci]);
      pts.push_back({XL(t.points[i].first_step), Y(above[i])});
      pts.push_back({XL(t.points[i].last_step + 1), Y(above[i])});
    }
    for (size_t i = t.points.size(); i-- > 0;) {
      pts.push_back({XL(t.points[i].last_step + 1), Y(below[i])});
      pts.push_back({XL(t.points[i].first_step), Y(below[i])});
    }
    s += fmt::format(R"(<path class="area" data-category="{}" fill="{}" d="{}"/>)", category_name(c), hex(c),
                     svg::path_d(pts, true));
    s += "\n";
    below = std::move(above);
  }
  s += "</g>\n";

  // GPU lines and their labels in the right margin.
  std::vector<svg::MarginLabel> labels;
  if (dev) {
    double room = static_cast<double>(dev->capacity_bytes - dev->context_bytes - dev->nccl_bytes);
    if (capacity_on_scale) {
      double yc = Y(static_cast<double>(dev->capacity_bytes));
      s += svg::line(x0, yc, x0 + pw, yc, R"(class="capacity" stroke="#000" stroke-width="2")");
      labels.push_back({yc, dev->gpu + " capacity", human_bytes(dev->capacity_bytes), "capacity"});
      if (room > 0 && room < static_cast<double>(dev->capacity_bytes)) {
        double yr = Y(room);
        s += svg::line(x0, yr, x0 + pw, yr, R"(class="room" stroke="#000" stroke-width="1.2" stroke-dasharray="1.5,3")");
        std::string what = dev->nccl_bytes ? "less context, NCCL" : "less CUDA context";
        labels.push_back({yr, what, human_bytes(static_cast<int64_t>(room)), "room"});
      }
    } else {
      labels.push_back({y0 + 6, "▲ " + dev->gpu + " capacity",
                        fmt::format("{}, off the scale ({:.0f}x)", human_bytes(dev->capacity_bytes),
                                    static_cast<double>(dev->capacity_bytes) / std::max(1.0, data_max)),
                        "capacity-off"});
    }
  }
  if (t.has_reserved) {
    std::vector<svg::Point> pts;
    for (const TimelinePoint& pt : t.points) {
      pts.push_back({XL(pt.first_step), Y(static_cast<double>(pt.reserved))});
      pts.push_back({XL(pt.last_step + 1), Y(static_cast<double>(pt.reserved))});
    }
    s += fmt::format(R"(<path class="reserved" fill="none" stroke="#000" stroke-width="1.6" stroke-dasharray="6,3" d="{}"/>)",
                     svg::path_d(pts));
    labels.push_back({pts.back().y, "reserved (allocator)", human_bytes(t.reserved_peak) + " at most", "reserved"});
  }
  svg::spread_labels(labels, 28, y0 - 4);
  s += R"(<g class="margin-labels" font-size="11">)";
  for (const svg::MarginLabel& l : labels) {
    s += svg::text(x0 + pw + 8, l.y, l.head, fmt::format(R"(font-weight="600" data-label="{}")", l.style));
    s += svg::text(x0 + pw + 8, l.y + 13, l.value, R"(fill="#333")");
  }
  s += "</g>\n";

  // The peak.
  {
    const Step& st = p.steps[static_cast<size_t>(peak.step)];
    double px = (XL(peak.first_step) + XL(peak.last_step + 1)) / 2, py = Y(static_cast<double>(peak.total));
    s += fmt::format(R"(<g class="peak-marker" data-step="{}" data-bytes="{}">)", peak.step, peak.total);
    s += svg::title(fmt::format("peak {} ({} bytes) at step {}: {}, {}", human_bytes(peak.total), with_commas(peak.total),
                                peak.step, st.label, step_desc(st, micro)));
    s += svg::line(px, py, px, y0 + ph, R"(stroke="#000" stroke-width="1" stroke-dasharray="2,2")");
    s += svg::circle(px, py, 5, R"(fill="#000" stroke="#fff" stroke-width="2")");
    std::string head = "peak " + human_bytes(peak.total);
    std::string where = step_desc(st, micro);
    std::string op = "at " + st.label;
    double w = std::max({svg::text_width(head, 14), svg::text_width(where, 12), svg::text_width(op, 12)});
    bool right = px + 10 + w < x0 + pw;
    double tx = right ? px + 10 : px - 10;
    const char* anchor = right ? "start" : "end";
    // Three lines above the marker when there is room, else beside it.
    double ty = py - 44 >= y0 + 12 ? py - 44 : std::max(y0 + 14, py - 18);
    s += svg::rect(right ? tx - 3 : tx - w - 3, ty - 14, w + 6, 48, R"(fill="#fff" fill-opacity="0.85" rx="3")");
    s += svg::text(tx, ty, head, fmt::format(R"(class="halo" font-size="14" font-weight="700" text-anchor="{}")", anchor));
    s += svg::text(tx, ty + 15, where, fmt::format(R"(class="halo" font-size="12" text-anchor="{}")", anchor));
    s += svg::text(tx, ty + 29, op, fmt::format(R"(class="halo" font-size="12" text-anchor="{}")", anchor));
    s += "</g>\n";
  }

  // X axis.
  s += R"(<g class="x-axis" font-size="11" fill="#333">)";
  int64_t last = static_cast<int64_t>(n_steps) - 1;
  int64_t xstep = svg::nice_count_step(std::max<int64_t>(1, last), 10);
  for (int64_t v = 0; v <= last; v += xstep) {
    double x = X(static_cast<double>(v));
    s += svg::line(x, y0 + ph, x, y0 + ph + 4, R"(stroke="#888")");
    s += svg::text(x, y0 + ph + 16, with_commas(v), R"(text-anchor="middle")");
  }
  s += svg::text(x0 + pw / 2, H - 8, fmt::format("simulated step (each op, autograd node or optimizer action; {} steps)", with_commas(static_cast<int64_t>(n_steps))),
                 R"(font-size="12" text-anchor="middle")");
  s += "</g>\n";

  // Hover targets, one per plotted point, on top of everything.
  s += R"(<g class="hovers">)";
  s += "\n";
  for (size_t i = 0; i < t.points.size(); ++i) {
    const TimelinePoint& pt = t.points[i];
    double left = XL(pt.first_step), right = XL(pt.last_step + 1);
    std::string bytes;
    for (size_t c = 0; c < kCategoryCount; ++c) bytes += (c ? "," : "") + std::to_string(pt.bytes[c]);
    const Step& st = p.steps[static_cast<size_t>(pt.step)];
    std::string tip = fmt::format("step {} · {}\n{}\nlive {} ({} bytes)", pt.step, st.label, step_desc(st, micro),
                                  human_bytes(pt.total), with_commas(pt.total));
    if (pt.first_step != pt.last_step) tip += fmt::format("\n(highest of steps {}-{})", pt.first_step, pt.last_step);
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      int64_t v = pt.bytes[static_cast<size_t>(*it)];
      if (v) tip += fmt::format("\n  {} {}", display_name(*it), human_bytes(v));
    }
    if (t.has_reserved) tip += fmt::format("\nreserved {}", human_bytes(pt.reserved));
    s += svg::rect_with(left, y0, right - left, ph,
                        fmt::format(R"(class="hover" data-step="{}" data-first-step="{}" data-last-step="{}" data-total="{}" data-bytes="{}"{})",
                                    pt.step, pt.first_step, pt.last_step, pt.total, bytes,
                                    t.has_reserved ? fmt::format(R"( data-reserved="{}")", pt.reserved) : std::string()),
                        svg::title(tip));
    s += "\n";
  }
  s += "</g>\n</svg>\n";

  // Legend (HTML, wraps by itself).
  s += R"(<div class="legend">)";
  for (Category c : order) {
    size_t ci = static_cast<size_t>(c);
    bool any = std::any_of(t.points.begin(), t.points.end(), [&](const TimelinePoint& pt) { return pt.bytes[ci] != 0; });
    if (any) s += fmt::format("<span>{}{}</span>", swatch(c), display_name(c));
  }
  if (dev && capacity_on_scale) s += R"(<span><span class="ln solid"></span>GPU capacity</span>)";
  if (dev && capacity_on_scale) s += R"(<span><span class="ln dotted"></span>capacity less CUDA context)" +
                                     std::string(dev->nccl_bytes ? " and NCCL" : "") + "</span>";
  if (t.has_reserved) s += R"(<span><span class="ln dashed"></span>reserved by the caching allocator</span>)";
  s += "</div>\n";
  return s;
}

// ---- breakdown at the peak -------------------------------------------------------------------

std::string breakdown_chart(const Estimate& e) {
  std::vector<Category> cats;
  for (size_t c = 0; c < kCategoryCount; ++c) {
    if (e.breakdown_at_peak[c] != 0) cats.push_back(static_cast<Category>(c));
  }
  std::stable_sort(cats.begin(), cats.end(), [&](Category a, Category b) {
    return e.breakdown_at_peak[static_cast<size_t>(a)] > e.breakdown_at_peak[static_cast<size_t>(b)];
  });
  constexpr double W = 500, row = 28, label_w = 140, bar_max = 210;
  double H = row * static_cast<double>(cats.size()) + 8;
  std::string s = fmt::format(R"(<svg class="breakdown" width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="breakdown at the peak">)",
                              num(W), num(H), num(W), num(H));
  double y = 4;
  for (Category c : cats) {
    int64_t v = e.breakdown_at_peak[static_cast<size_t>(c)];
    double frac = e.peak_bytes > 0 ? static_cast<double>(v) / static_cast<double>(e.peak_bytes) : 0.0;
    double bw = std::max(1.0, bar_max * frac);
    s += "<g>" + svg::title(fmt::format("{}: {} bytes ({} of the peak)", display_name(c), with_commas(v), percent(v, e.peak_bytes)));
    s += svg::text(label_w - 8, y + 17, display_name(c), R"(font-size="13" text-anchor="end")");
    s += svg::rect(label_w, y + 4, bar_max, row - 8, R"(fill="#000" fill-opacity="0.05")");
    s += svg::rect(label_w, y + 4, bw, row - 8,
                   fmt::format(R"(class="breakdown-bar" data-category="{}" data-bytes="{}" fill="{}")", category_name(c), v, hex(c)));
    s += svg::text(label_w + bar_max + 10, y + 17, human_bytes(v), R"(font-size="13" font-weight="600")");
    s += svg::text(label_w + bar_max + 86, y + 17, percent(v, e.peak_bytes), R"(font-size="13" fill="#444")");
    s += "</g>\n";
    y += row;
  }
  s += "</svg>\n";
  return s;
}

// ---- largest buffers -------------------------------------------------------------------------

std::string largest_table(const Estimate& e) {
  if (e.largest_at_peak.empty()) return "<p class=\"muted\">No buffers listed (--top 0).</p>\n";
  std::string s = R"(<table class="largest"><thead><tr><th class="n">bytes</th><th class="n">of peak</th><th>category</th><th>buffer</th><th>made by</th></tr></thead><tbody>)";
  s += "\n";
  for (const BufferAtPeak& b : e.largest_at_peak) {
    s += fmt::format(R"(<tr data-bytes="{}"><td class="n" title="{} bytes">{}</td><td class="n">{}</td><td class="cat">{}{}</td><td><code>{}</code></td><td>{}</td></tr>)",
                     b.bytes, with_commas(b.bytes), human_bytes(b.bytes), percent(b.bytes, e.peak_bytes), swatch(b.category),
                     display_name(b.category), dotted(b.name),
                     b.op.empty() ? std::string(R"(<span class="muted">—</span>)") : "<code>" + dotted(b.op) + "</code>");
    s += "\n";
  }
  s += "</tbody></table>\n";
  return s;
}

// ---- weights per layer -----------------------------------------------------------------------

std::string weights_section(const Graph& g) {
  std::vector<WeightGroup> groups = weight_groups(g);
  int64_t total = 0;
  for (const WeightGroup& w : groups) total += w.bytes;
  std::string s;
  if (groups.empty() || total == 0) return "<p class=\"muted\">The model has no weights.</p>\n";
  // How many layers hold half and nine tenths of the weights.
  auto layers_for = [&](double share) {
    int64_t acc = 0;
    for (size_t i = 0; i < groups.size(); ++i) {
      acc += groups[i].bytes;
      if (static_cast<double>(acc) >= share * static_cast<double>(total)) return i + 1;
    }
    return groups.size();
  };
  s += fmt::format(R"(<p class="lead">{} in {} modules with weights; the largest {} hold half of it, the largest {} hold 90%.</p>)",
                   human_bytes(total), groups.size(), layers_for(0.5), layers_for(0.9));
  s += "\n<div class=\"weights\"><div>";

  constexpr double W = 640, H = 330, L = 70, R = 46, T = 14, B = 46;
  constexpr double x0 = L, y0 = T, pw = W - L - R, ph = H - T - B;
  svg::ByteTicks ticks = svg::byte_ticks(static_cast<double>(groups.front().bytes) * 1.04, 5);
  auto Y = [&](double bytes) { return y0 + ph - ph * bytes / ticks.top_bytes; };
  auto YP = [&](double share) { return y0 + ph - ph * share; };
  double n = static_cast<double>(groups.size());
  double bw = pw / n;
  s += fmt::format(R"(<svg class="pareto" width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="weight memory per layer">)",
                   num(W), num(H), num(W), num(H));
  s += R"(<g font-size="11" fill="#333">)";
  for (double v : ticks.values) {
    s += svg::line(x0, Y(v), x0 + pw, Y(v), v == 0 ? R"(stroke="#888")" : R"(stroke="#000" stroke-opacity="0.1")");
    s += svg::text(x0 - 6, Y(v) + 4, svg::tick_label(ticks, v), R"(text-anchor="end")");
  }
  for (int pct = 0; pct <= 100; pct += 25) {
    s += svg::text(x0 + pw + 6, YP(pct / 100.0) + 4, fmt::format("{}%", pct), R"(text-anchor="start")");
  }
  s += svg::text(14, y0 + ph / 2, "bytes per layer",
                 fmt::format(R"~(font-size="12" text-anchor="middle" transform="rotate(-90 14 {})")~", num(y0 + ph / 2)));
  s += svg::text(W - 6, y0 + ph / 2, "cumulative share",
                 fmt::format(R"~(font-size="12" text-anchor="middle" transform="rotate(90 {} {})")~", num(W - 6), num(y0 + ph / 2)));
  int64_t xstep = svg::nice_count_step(static_cast<int64_t>(groups.size()), 8);
  for (int64_t r = 1; r <= static_cast<int64_t>(groups.size()); r = r == 1 && xstep > 1 ? xstep : r + xstep) {
    double x = x0 + bw * (static_cast<double>(r) - 0.5);
    s += svg::line(x, y0 + ph, x, y0 + ph + 4, R"(stroke="#888")");
    s += svg::text(x, y0 + ph + 16, std::to_string(r), R"(text-anchor="middle")");
  }
  s += svg::text(x0 + pw / 2, H - 8, "layers (modules with weights), largest first", R"(font-size="12" text-anchor="middle")");
  s += "</g>\n<g class=\"bars\">";
  double gap = bw > 5 ? 1 : 0;
  int64_t acc = 0;
  std::vector<svg::Point> cum;
  for (size_t i = 0; i < groups.size(); ++i) {
    const WeightGroup& w = groups[i];
    acc += w.bytes;
    double x = x0 + bw * static_cast<double>(i);
    double share = static_cast<double>(acc) / static_cast<double>(total);
    double top = Y(static_cast<double>(w.bytes));
    s += svg::rect_with(x + gap / 2, top, bw - gap, y0 + ph - top,
                        fmt::format(R"(class="weight-bar" data-group="{}" data-bytes="{}" fill="{}")", escape(w.module),
                                    w.bytes, hex(Category::Weights)),
                        svg::title(fmt::format("#{} {}: {} ({} of the weights, cumulative {}){}", i + 1, w.module,
                                               human_bytes(w.bytes), percent(w.bytes, total), percent(acc, total),
                                               w.parameters ? fmt::format(", {} parameters", with_commas(w.parameters)) : "")));
    cum.push_back({x + bw / 2, YP(share)});
  }
  s += "</g>\n";
  cum.insert(cum.begin(), {x0, YP(0)});
  s += fmt::format(R"(<path class="cumulative" fill="none" stroke="#D55E00" stroke-width="2" d="{}"/>)", svg::path_d(cum));
  s += "</svg>\n";
  s += R"(<p class="legend"><span><span class="sw" style="background:#0072B2"></span>bytes of one module's parameters and buffers</span><span><span class="ln cum"></span>cumulative share of all weights</span></p>)";
  s += "</div>\n";

  // The largest modules by name.
  s += R"(<table class="top-weights"><thead><tr><th class="n">#</th><th>module</th><th class="n">bytes</th><th class="n">share</th><th class="n">cumulative</th></tr></thead><tbody>)";
  acc = 0;
  size_t shown = std::min<size_t>(groups.size(), 12);
  for (size_t i = 0; i < shown; ++i) {
    acc += groups[i].bytes;
    s += fmt::format(R"(<tr><td class="n">{}</td><td><code>{}</code></td><td class="n">{}</td><td class="n">{}</td><td class="n">{}</td></tr>)",
                     i + 1, dotted(groups[i].module), human_bytes(groups[i].bytes), percent(groups[i].bytes, total),
                     percent(acc, total));
  }
  if (shown < groups.size()) {
    s += fmt::format(R"(<tr><td></td><td class="muted" colspan="4">and {} more</td></tr>)", groups.size() - shown);
  }
  s += "</tbody></table></div>\n";
  return s;
}

// ---- cards -----------------------------------------------------------------------------------

std::string card(std::string_view key, std::string_view value, std::string_view detail, std::string_view cls = {}) {
  return fmt::format(R"(<div class="card{}"><div class="k">{}</div><div class="v">{}</div><div class="d">{}</div></div>)",
                     cls.empty() ? "" : " " + std::string(cls), escape(key), escape(value), escape(detail));
}

std::string cards(const Estimate& e) {
  std::string s = R"(<section class="cards">)";
  std::string when = std::string(phase_name(e.peak_phase));
  if (e.peak_iteration > 0) when += fmt::format(" of step {}", e.peak_iteration);
  s += card("peak (tensors)", human_bytes(e.peak_bytes), with_commas(e.peak_bytes) + " bytes, " + when);
  s += card("peak at", e.peak_op, "the op or autograd node running then");
  s += card("weights", human_bytes(e.weights_bytes), with_commas(e.parameter_count) + " parameters");
  if (e.device) {
    const DeviceMemory& d = *e.device;
    s += card("reserved peak", human_bytes(d.reserved_peak_bytes),
              "caching allocator, +" + human_bytes(d.reserved_peak_bytes - d.allocated_peak_bytes) + " over allocated");
    std::string verdict = d.fits ? "fits, " + human_bytes(d.headroom_bytes) + " left"
                                 : "does not fit, " + human_bytes(-d.headroom_bytes) + " short";
    s += card("on " + d.gpu, verdict,
              human_bytes(d.device_total_bytes) + " of " + human_bytes(d.capacity_bytes) + " with the CUDA context (" +
                  human_bytes(d.context_bytes) + ")",
              d.fits ? "fits" : "nofit");
  } else {
    s += card("GPU", "not given", "add --gpu NAME for capacity and the caching allocator");
  }
  s += "</section>\n";
  return s;
}

constexpr const char* kCss = R"(
:root{--ink:#1a1a1a;--muted:#5f5f5f;--rule:#dcdcdc}
*{box-sizing:border-box}
body{margin:0;background:#fff;color:var(--ink);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",Arial,sans-serif}
main{max-width:1200px;margin:0 auto;padding:18px 20px 28px}
h1{font-size:23px;margin:0;font-weight:700}
h1 .model{font-family:ui-monospace,"DejaVu Sans Mono",monospace}
h2{font-size:17px;margin:0 0 2px}
.sub{color:var(--muted);margin:2px 0 0}
.muted{color:var(--muted)}
.lead{margin:0 0 8px;color:#333}
section{margin:0 0 22px}
.cards{display:flex;gap:10px;margin:14px 0 20px}
.card{flex:1 1 0;min-width:0;border:1px solid var(--rule);border-radius:6px;padding:7px 11px}
.card .k{font-size:11px;color:var(--muted);text-transform:uppercase;letter-spacing:.05em}
.card .v{font-size:19px;font-weight:650;overflow-wrap:anywhere}
.card .d{font-size:12px;color:var(--muted)}
.card.fits{border-color:#009E73;background:#F0FAF6}
.card.fits .v{color:#00694d}
.card.nofit{border-color:#D55E00;background:#FDF3EC}
.card.nofit .v{color:#a34500}
.two{display:grid;grid-template-columns:500px 1fr;gap:28px;align-items:start}
.weights{display:grid;grid-template-columns:640px 1fr;gap:24px;align-items:start}
svg{display:block;overflow:visible}
svg text{font-family:inherit}
.halo{paint-order:stroke;stroke:#fff;stroke-width:3px;stroke-linejoin:round}
.halo-light{paint-order:stroke;stroke:#fff;stroke-opacity:.7;stroke-width:2px}
.hover{fill:#000;fill-opacity:0}
.hover:hover{fill-opacity:.08}
.weight-bar:hover{fill:#56B4E9}
table{border-collapse:collapse;width:100%;font-size:13px}
th{font-weight:600;color:#333;border-bottom:1px solid #bbb}
th,td{padding:3px 6px;text-align:left;vertical-align:top}
td{border-bottom:1px solid #eee}
.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.cat{white-space:nowrap}
code{font:12px/1.35 ui-monospace,"DejaVu Sans Mono",monospace;overflow-wrap:anywhere}
.sw{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:5px;vertical-align:-1px}
.ln{display:inline-block;width:24px;height:0;margin-right:6px;vertical-align:4px;border-top:2px solid #000}
.ln.dashed{border-top-style:dashed}
.ln.dotted{border-top-style:dotted}
.ln.cum{border-top-color:#D55E00}
.legend{display:flex;flex-wrap:wrap;gap:4px 16px;font-size:13px;margin:4px 0 0 76px}
p.legend{margin:6px 0 0 70px}
ul.notes{margin:4px 0 0;padding-left:20px}
footer{color:var(--muted);font-size:12px;border-top:1px solid var(--rule);padding-top:8px}
)";

}  // namespace

std::string_view html_page_css() { return kCss; }

std::string html_report(const Estimate& e, const Graph& g, const HtmlReportOptions& options) {
  const Program& p = e.program;
  HEADROOM_CHECK(!p.steps.empty(), "html_report needs the program: estimate with keep_program = true");
  std::optional<CachingAllocatorOptions> ao;
  if (e.device && e.options.gpu) {
    ao = e.options.gpu->allocator;
    int64_t room = e.device->capacity_bytes - e.device->context_bytes - e.device->nccl_bytes;
    ao->capacity_bytes = room > 0 ? room : 1;  // as device_memory() does
  }
  Timeline t = memory_timeline(p, ao ? &*ao : nullptr, options.max_points);

  const EstimateOptions& o = e.options;
  std::string title = fmt::format("{}: {}", o.model, subtitle(e));
  std::string s;
  s.reserve(64 * 1024 + t.points.size() * 600);
  s += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  s += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  s += "<meta name=\"generator\" content=\"headroom report\">\n";
  s += "<title>headroom: " + escape(title) + "</title>\n<style>" + kCss + "</style>\n</head>\n<body>\n<main>\n";
  s += fmt::format("<header><h1>headroom report: <span class=\"model\">{}</span></h1><p class=\"sub\">{}</p>\n", escape(o.model),
                   escape(subtitle(e)));
  s += fmt::format("<p class=\"sub\">{} parameters · weights {} · inputs {} · {} ops · {} simulated steps, {} allocation events</p></header>\n",
                   with_commas(e.parameter_count), human_bytes(e.weights_bytes), human_bytes(e.input_bytes), e.op_count,
                   with_commas(static_cast<int64_t>(p.steps.size())), with_commas(static_cast<int64_t>(p.events.size())));
  s += cards(e);

  s += "<section>\n<h2>Memory over the simulated run</h2>\n";
  s += "<p class=\"lead\">Live tensor bytes stacked by category at each step's high-water mark";
  if (t.points.size() < p.steps.size()) {
    s += fmt::format(" ({} points: each the highest of about {} consecutive steps)", t.points.size(),
                     (p.steps.size() + t.points.size() - 1) / t.points.size());
  }
  s += ". Hover the chart for a step's details.</p>\n";
  s += memory_chart(e, t, p, options);
  s += "</section>\n";

  s += "<div class=\"two\">\n<section>\n";
  s += fmt::format("<h2>Breakdown at the peak ({})</h2>\n", escape(human_bytes(e.peak_bytes)));
  s += breakdown_chart(e);
  s += "</section>\n<section>\n<h2>Largest buffers alive at the peak</h2>\n";
  s += largest_table(e);
  s += "</section>\n</div>\n";

  s += "<section>\n<h2>Weight memory per layer</h2>\n";
  s += weights_section(g);
  s += "</section>\n";

  if (!e.notes.empty()) {
    s += "<section>\n<h2>Notes</h2>\n<ul class=\"notes\">";
    for (const std::string& n : e.notes) s += "<li>" + escape(n) + "</li>";
    s += "</ul>\n</section>\n";
  }
  s += "<footer>headroom simulates every allocation and free PyTorch makes; tensor bytes are exact (what "
       "torch.cuda.max_memory_allocated reports, without allocator rounding). The reserved line replays them on "
       "PyTorch's CUDA caching allocator; the device total adds the CUDA context. See docs/report.md.</footer>\n";
  s += "</main>\n</body>\n</html>\n";
  return s;
}

Result<std::string> html_report(const EstimateOptions& options, const HtmlReportOptions& html) {
  EstimateOptions o = options;
  o.keep_program = true;
  Result<Estimate> e = estimate(o);
  if (!e.ok()) return Result<std::string>::failure(e.error());
  return capture_input_errors([&]() -> std::string {
    Graph g = build_graph(o, e.value().micro_batch);
    return html_report(e.value(), g, html);
  });
}

}  // namespace headroom
