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
#include "cost/cost_model.h"
#include "plan/planner.h"
#include "sim/caching_allocator.h"
#include "sim/device_catalog.h"

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

TimeAxis time_axis(const Estimate& e, const Graph& g) {
  const Program& p = e.program;
  TimeAxis a;
  auto by_step = [&] {
    a = TimeAxis{};
    for (size_t i = 0; i < p.steps.size(); ++i) {
      a.start.push_back(static_cast<double>(i));
      a.end.push_back(static_cast<double>(i + 1));
    }
    a.total = static_cast<double>(p.steps.size());
    return a;
  };
  // Generation simulates a window of forwards on its own graph, not `g`: its op ids would time the
  // wrong ops even where they are in range.
  if (e.options.generation) return by_step();
  for (const Step& st : p.steps) {
    if (st.op != kNone && (st.op < 0 || static_cast<size_t>(st.op) >= g.ops.size())) return by_step();
  }
  const GpuSpec* spec = nullptr;
  if (e.options.gpu && !e.options.gpu->gpu.empty()) spec = DeviceCatalog::builtin().try_find(e.options.gpu->gpu);
  if (!spec) spec = &DeviceCatalog::builtin().find(kDefaultCostGpu);
  MemoryPlan plan = e.options.mode == RunMode::Training ? e.options.plan : MemoryPlan{};
  if (e.options.mode == RunMode::Training && !e.options.checkpoint_ranges.empty()) {
    try {
      add_checkpoint_ranges(g, e.options.checkpoint_ranges, plan);
    } catch (const InputError&) {
      return by_step();  // the estimate resolved them already; a guard
    }
  }
  const int iteration = e.options.mode == RunMode::Training ? e.options.iterations : 0;
  StepTimes t = step_times(CostModel(*spec), g, p, plan, e.options.optimizer, iteration);
  if (t.end_ms.empty() || !(t.end_ms.back() > 0)) return by_step();
  a.in_ms = true;
  a.gpu = spec->name;
  a.start = std::move(t.start_ms);
  a.end = std::move(t.end_ms);
  a.total = a.end.back();
  return a;
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

using svg::card;
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

// A peak narrower than this many pixels is drawn this wide (and marked as widened).
constexpr double kMinPeakPx = 4;
// The --measured lines: vermillion for the measurement (drawn on a white halo), purple dashes for
// what it is compared with; neither is a category colour used for a line elsewhere.
constexpr const char* kMeasuredColor = "#D55E00";
constexpr const char* kPredictedTotalColor = "#5D3A9B";

// "0.42 ms", "37 µs", "1.25 s".
std::string duration_text(double ms) {
  if (ms < 1) return fmt::format("{:.0f} µs", ms * 1000);
  if (ms < 1000) return fmt::format("{:.2f} ms", ms);
  return fmt::format("{:.2f} s", ms / 1000);
}

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

// The measured series placed on the predicted axis: shifted so that its peak sits at the
// predicted device total's peak (docs/gpu.md: a watch starts long before the run it watches and
// its clock is not the cost model's, so the peaks are the one moment both sides name).
struct MeasuredOnAxis {
  double shift_ms = 0;           // added to a sample's t_ms
  double predicted_peak_ms = 0;  // where the peaks meet
  int64_t predicted_total_peak = 0;
  size_t before = 0, after = 0;  // samples left and right of the axis
};

MeasuredOnAxis place_measured(const MeasuredSeries& m, const Timeline& t, const TimeAxis& axis, int64_t overhead) {
  MeasuredOnAxis a;
  size_t best = 0;
  for (size_t i = 0; i < t.points.size(); ++i) {
    if (t.points[i].reserved > t.points[best].reserved) best = i;
  }
  const TimelinePoint& pk = t.points[best];
  a.predicted_total_peak = pk.reserved + overhead;
  a.predicted_peak_ms = (axis.start[static_cast<size_t>(pk.first_step)] + axis.end[static_cast<size_t>(pk.last_step)]) / 2;
  a.shift_ms = a.predicted_peak_ms - static_cast<double>(m.samples[m.peak].t_ms);
  for (const MeasuredSample& q : m.samples) {
    const double x = static_cast<double>(q.t_ms) + a.shift_ms;
    if (x < 0) ++a.before;
    if (x > axis.total) ++a.after;
  }
  return a;
}

std::string memory_chart(const Estimate& e, const Timeline& t, const Program& p, const TimeAxis& axis,
                         const MeasuredSeries* measured) {
  constexpr double W = 1160, H = 480, L = 76, R = 176, T = 58, B = 50;
  constexpr double x0 = L, y0 = T, pw = W - L - R, ph = H - T - B;
  const size_t n_steps = p.steps.size();
  const TimelinePoint& peak = t.points[t.peak_point];
  const std::optional<DeviceMemory>& dev = e.device;
  const bool micro = e.micro_batches > 1;
  const StackOrder order = stack_order(t);
  const int64_t overhead = dev ? dev->context_bytes + dev->nccl_bytes : 0;
  std::optional<MeasuredOnAxis> mo;
  if (measured && t.has_reserved) mo = place_measured(*measured, t, axis, overhead);

  double data_max = static_cast<double>(std::max(peak.total, t.reserved_peak));
  if (mo) {
    data_max = std::max({data_max, static_cast<double>(mo->predicted_total_peak),
                         static_cast<double>(measured->samples[measured->peak].bytes)});
  }
  bool capacity_on_scale = false;
  double target = data_max;
  if (dev) {
    capacity_on_scale = static_cast<double>(dev->capacity_bytes) <= 2.5 * std::max(1.0, data_max);
    if (capacity_on_scale) target = std::max(target, static_cast<double>(dev->capacity_bytes));
  }
  svg::ByteTicks ticks = svg::byte_ticks(std::max(1.0, target * 1.06), 6);
  const double y_max = ticks.top_bytes;
  const double x_span = axis.total > 0 ? axis.total : 1;
  auto X = [&](double v) { return x0 + pw * v / x_span; };
  auto SL = [&](int32_t step) { return X(axis.start[static_cast<size_t>(step)]); };  // a step's left edge
  auto SR = [&](int32_t step) { return X(axis.end[static_cast<size_t>(step)]); };    // and right edge
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
  std::vector<double> band_label_x(bands.size());
  {
    std::vector<size_t> order(bands.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    auto width = [&](const Band& b) { return SR(b.last) - SL(b.first); };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return width(bands[a]) > width(bands[b]); });
    std::vector<std::pair<double, double>> taken;
    for (size_t i : order) {
      const Band& b = bands[i];
      double bw = width(b), cx = SL(b.first) + bw / 2;
      if (bw < 0.01) continue;
      std::string label(phase_name(b.phase));
      if (svg::text_width(label, 11) + 6 > bw) label = phase_style(b.phase).short_name;
      double half = svg::text_width(label, 11) / 2 + 3;
      // Kept over the plot: a narrow band at either end would push its label into the y axis's
      // tick labels or the margin labels.
      cx = std::clamp(cx, x0 + half, x0 + pw - half);
      bool free = std::none_of(taken.begin(), taken.end(), [&](const std::pair<double, double>& r) {
        return cx - half < r.second && cx + half > r.first;
      });
      if (!free) continue;
      taken.push_back({cx - half, cx + half});
      band_label[i] = label;
      band_label_x[i] = cx;
    }
  }
  s += R"(<g class="phases">)";
  for (size_t i = 0; i < bands.size(); ++i) {
    const Band& b = bands[i];
    PhaseStyle ps = phase_style(b.phase);
    double bx = SL(b.first), bw = SR(b.last) - bx;
    if (bw < 0.01) continue;  // steps that take no time (setup, zero_grad)
    s += svg::rect(bx, y0, bw, ph, fmt::format(R"(fill="{}")", ps.background));
    s += svg::rect(bx, y0 - 20, bw, 17, fmt::format(R"(class="ribbon" data-phase="{}" fill="{}" stroke="#fff" stroke-width="1")",
                                                 phase_name(b.phase), ps.ribbon));
  }
  for (size_t i = 0; i < bands.size(); ++i) {
    const Band& b = bands[i];
    if (band_label[i].empty()) continue;
    std::string tip = fmt::format("{}: steps {}-{}", step_desc(p.steps[b.first], micro), b.first, b.last);
    s += "<g>" + svg::title(tip) +
         svg::text(band_label_x[i], y0 - 7.5, band_label[i], R"(font-size="11" text-anchor="middle" fill="#222" class="halo-light")") +
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
    double a = SL(range.first), b = SR(range.second);
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
  s += fmt::format(R"(<g class="timeline" data-plot="{} {} {} {}" data-y-max="{}" data-steps="{}" data-x-unit="{}" data-x-max="{:.4f}">)",
                   num(x0), num(y0), num(pw), num(ph), static_cast<int64_t>(y_max), n_steps, axis.in_ms ? "ms" : "step", x_span);
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
      pts.push_back({SL(t.points[i].first_step), Y(above[i])});
      pts.push_back({SR(t.points[i].last_step), Y(above[i])});
    }
    for (size_t i = t.points.size(); i-- > 0;) {
      pts.push_back({SR(t.points[i].last_step), Y(below[i])});
      pts.push_back({SL(t.points[i].first_step), Y(below[i])});
    }
    s += fmt::format(R"(<path class="area" data-category="{}" fill="{}" d="{}"/>)", category_name(c), hex(c),
                     svg::path_d(pts, true));
    s += "\n";
    below = std::move(above);
  }
  s += "</g>\n";

  // GPU lines and their labels in the right margin. `hlines` and `curves` are what the peak's
  // label must not cover.
  std::vector<svg::MarginLabel> labels;
  std::vector<double> hlines;
  std::vector<std::vector<svg::Point>> curves;
  {
    std::vector<svg::Point> top;
    for (size_t i = 0; i < t.points.size(); ++i) {
      top.push_back({SL(t.points[i].first_step), Y(static_cast<double>(t.points[i].total))});
      top.push_back({SR(t.points[i].last_step), Y(static_cast<double>(t.points[i].total))});
    }
    curves.push_back(std::move(top));
  }
  if (dev) {
    double room = static_cast<double>(dev->capacity_bytes - dev->context_bytes - dev->nccl_bytes);
    if (capacity_on_scale) {
      double yc = Y(static_cast<double>(dev->capacity_bytes));
      s += svg::line(x0, yc, x0 + pw, yc, R"(class="capacity" stroke="#000" stroke-width="2")");
      hlines.push_back(yc);
      labels.push_back({yc, dev->gpu + " capacity", human_bytes(dev->capacity_bytes), "capacity"});
      if (room > 0 && room < static_cast<double>(dev->capacity_bytes)) {
        double yr = Y(room);
        s += svg::line(x0, yr, x0 + pw, yr, R"(class="room" stroke="#000" stroke-width="1.2" stroke-dasharray="1.5,3")");
        hlines.push_back(yr);
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
      pts.push_back({SL(pt.first_step), Y(static_cast<double>(pt.reserved))});
      pts.push_back({SR(pt.last_step), Y(static_cast<double>(pt.reserved))});
    }
    s += fmt::format(R"(<path class="reserved" fill="none" stroke="#000" stroke-width="1.6" stroke-dasharray="6,3" d="{}"/>)",
                     svg::path_d(pts));
    labels.push_back({pts.back().y, "reserved (allocator)", human_bytes(t.reserved_peak) + " at most", "reserved"});
    curves.push_back(std::move(pts));
  }
  if (mo) {
    // Predicted device total (what NVML should read): reserved + context + NCCL.
    std::vector<svg::Point> pts;
    for (const TimelinePoint& pt : t.points) {
      pts.push_back({SL(pt.first_step), Y(static_cast<double>(pt.reserved + overhead))});
      pts.push_back({SR(pt.last_step), Y(static_cast<double>(pt.reserved + overhead))});
    }
    s += fmt::format(R"(<path class="predicted-total" data-bytes="{}" fill="none" stroke="{}" stroke-width="1.8" stroke-dasharray="9,3" d="{}"/>)",
                     mo->predicted_total_peak, kPredictedTotalColor, svg::path_d(pts));
    labels.push_back({pts.back().y, "predicted device total", human_bytes(mo->predicted_total_peak) + " at most", "predicted-total"});
    curves.push_back(std::move(pts));
    // The measured samples on the axis, each held until the next one.
    std::vector<svg::Point> mp;
    std::string t_attr, b_attr;
    const std::vector<MeasuredSample>& q = measured->samples;
    for (size_t i = 0; i < q.size(); ++i) {
      const double a = static_cast<double>(q[i].t_ms) + mo->shift_ms;
      const double b = i + 1 < q.size() ? static_cast<double>(q[i + 1].t_ms) + mo->shift_ms : a;
      if (b < 0 || a > axis.total) continue;
      const double y = Y(static_cast<double>(q[i].bytes));
      mp.push_back({X(std::max(0.0, a)), y});
      mp.push_back({X(std::min(axis.total, b)), y});
      t_attr += (t_attr.empty() ? "" : ",") + std::to_string(q[i].t_ms);
      b_attr += (b_attr.empty() ? "" : ",") + std::to_string(q[i].bytes);
    }
    const int64_t mpeak = q[measured->peak].bytes;
    s += fmt::format(R"(<g class="measured" data-shift-ms="{:.4f}" data-t-ms="{}" data-bytes="{}" data-peak="{}" data-before="{}" data-after="{}">)",
                     mo->shift_ms, t_attr, b_attr, mpeak, mo->before, mo->after);
    s += svg::title(fmt::format("measured by headroom watch ({}): peak {} at t = {} ms of the watch, placed at the predicted peak",
                                measured->process ? "the watched process" : "the whole device", human_bytes(mpeak), q[measured->peak].t_ms));
    s += fmt::format(R"(<path fill="none" stroke="#fff" stroke-width="5" stroke-linejoin="round" d="{}"/>)", svg::path_d(mp));
    s += fmt::format(R"(<path class="measured-line" fill="none" stroke="{}" stroke-width="2.4" stroke-linejoin="round" d="{}"/>)",
                     kMeasuredColor, svg::path_d(mp));
    s += "</g>\n";
    labels.push_back({Y(static_cast<double>(mpeak)), measured->process ? "measured (process)" : "measured (device)",
                      human_bytes(mpeak) + " peak (NVML)", "measured"});
    curves.push_back(std::move(mp));
  }
  svg::spread_labels(labels, 28, y0 - 4);
  s += R"(<g class="margin-labels" font-size="11">)";
  for (const svg::MarginLabel& l : labels) {
    s += svg::text(x0 + pw + 8, l.y, l.head, fmt::format(R"(font-weight="600" data-label="{}")", l.style));
    s += svg::text(x0 + pw + 8, l.y + 13, l.value, R"(fill="#333")");
  }
  s += "</g>\n";

  // The peak: a point narrower than kMinPeakPx is drawn that wide (its stacked bytes, outlined)
  // and its label says how long it really lasts.
  {
    const Step& st = p.steps[static_cast<size_t>(peak.step)];
    const double left = SL(peak.first_step), right = SR(peak.last_step);
    double px = (left + right) / 2, py = Y(static_cast<double>(peak.total));
    const bool short_peak = right - left < kMinPeakPx;
    s += fmt::format(R"(<g class="peak-marker" data-step="{}" data-bytes="{}" data-width-px="{}"{}>)", peak.step, peak.total,
                     num(right - left), short_peak ? R"( data-widened="true")" : "");
    s += svg::title(fmt::format("peak {} ({} bytes) at step {}: {}, {}", human_bytes(peak.total), with_commas(peak.total),
                                peak.step, st.label, step_desc(st, micro)));
    if (short_peak) {
      double below = 0;
      for (Category c : order) {
        const int64_t v = peak.bytes[static_cast<size_t>(c)];
        if (v == 0) continue;
        s += svg::rect(px - kMinPeakPx / 2, Y(below + static_cast<double>(v)), kMinPeakPx, Y(below) - Y(below + static_cast<double>(v)),
                       fmt::format(R"(class="short-peak" fill="{}")", hex(c)));
        below += static_cast<double>(v);
      }
      s += svg::rect(px - kMinPeakPx / 2, py, kMinPeakPx, y0 + ph - py, R"(fill="none" stroke="#000" stroke-width="0.8")");
    }
    s += svg::line(px, py, px, y0 + ph, R"(stroke="#000" stroke-width="1" stroke-dasharray="2,2")");
    s += svg::circle(px, py, 5, R"(fill="#000" stroke="#fff" stroke-width="2")");
    std::string head = "peak " + human_bytes(peak.total);
    std::string where = step_desc(st, micro);
    std::string op = "at " + st.label;
    if (short_peak) {
      const double lasts = axis.end[static_cast<size_t>(peak.last_step)] - axis.start[static_cast<size_t>(peak.first_step)];
      where += axis.in_ms ? fmt::format(", lasts {} (drawn wider)", duration_text(lasts)) : " (drawn wider)";
    }
    const double w = std::max({svg::text_width(head, 14), svg::text_width(where, 12), svg::text_width(op, 12)});
    // The label's box (w + 6 by 48) goes where it covers no line: no horizontal line crosses it,
    // the stacked areas stay below it and every other line passes wholly above or below it.
    // Nearest to the marker first, right before left.
    auto clear = [&](double bx0, double bx1, double by0, double by1) {
      if (bx0 < x0 || bx1 > x0 + pw || by0 < y0) return false;
      for (double y : hlines) {
        if (y > by0 - 2 && y < by1 + 2) return false;
      }
      // The stacked total (curves[0]) must pass under the box, or the box would cover the areas;
      // a line may pass over or under it, but on one side all along (else it crosses the box).
      for (size_t k = 0; k < curves.size(); ++k) {
        bool above = false, below = false;
        const std::vector<svg::Point>& c = curves[k];
        for (size_t i = 0; i + 1 < c.size(); i += 2) {
          if (c[i + 1].x < bx0 || c[i].x > bx1) continue;
          const double y = c[i].y;
          if (y > by1 + 3) below = true;
          else if (y < by0 - 3 && k > 0) above = true;
          else return false;
        }
        if (above && below) return false;
      }
      return true;
    };
    // Candidates: beside the marker at every height, then slid away from it 16 px at a time (a
    // leader line then joins them), ordered by distance from the spot just above the marker.
    struct Spot {
      bool right;
      double dx, ty, cost;
    };
    std::vector<Spot> spots;
    const double want = py - 44;
    for (double dx = 0; dx <= pw; dx += 16) {
      for (double ty = y0 + 14; ty <= y0 + ph - 34; ty += 4) {
        for (bool r : {true, false}) spots.push_back({r, dx, ty, dx * dx + (ty - want) * (ty - want) + (r ? 0 : 1)});
      }
    }
    std::stable_sort(spots.begin(), spots.end(), [](const Spot& a, const Spot& b) { return a.cost < b.cost; });
    std::optional<Spot> spot;
    for (const Spot& c : spots) {
      const double bx0 = c.right ? px + 7 + c.dx : px - 13 - w - c.dx;
      if (clear(bx0, bx0 + w + 6, c.ty - 14, c.ty + 34)) {
        spot = c;
        break;
      }
    }
    const bool on_right = spot ? spot->right : px + 10 + w < x0 + pw;
    const double dx = spot ? spot->dx : 0;
    const double ty = spot ? spot->ty : (py - 44 >= y0 + 12 ? py - 44 : std::max(y0 + 14, py - 18));
    const double tx = on_right ? px + 10 + dx : px - 10 - dx;
    if (dx > 0) {
      s += svg::line(px, py, on_right ? tx - 3 : tx + 3, ty + 10, R"(stroke="#000" stroke-width="0.8")");
    }
    const char* anchor = on_right ? "start" : "end";
    s += svg::rect(on_right ? tx - 3 : tx - w - 3, ty - 14, w + 6, 48, R"(class="peak-label" fill="#fff" fill-opacity="0.85" rx="3")");
    s += svg::text(tx, ty, head, fmt::format(R"(class="halo" font-size="14" font-weight="700" text-anchor="{}")", anchor));
    s += svg::text(tx, ty + 15, where, fmt::format(R"(class="halo" font-size="12" text-anchor="{}")", anchor));
    s += svg::text(tx, ty + 29, op, fmt::format(R"(class="halo" font-size="12" text-anchor="{}")", anchor));
    s += "</g>\n";
  }

  // X axis: predicted time (or steps when the program cannot be timed).
  s += R"(<g class="x-axis" font-size="11" fill="#333">)";
  const double xstep = svg::nice_step(x_span, 10);
  for (int k = 0; k * xstep <= x_span * (1 + 1e-9); ++k) {
    const double v = k * xstep;
    s += svg::line(X(v), y0 + ph, X(v), y0 + ph + 4, R"(stroke="#888")");
    s += svg::text(X(v), y0 + ph + 16, fmt::format("{:g}", std::round(v * 1e6) / 1e6), R"(text-anchor="middle")");
  }
  std::string x_title =
      axis.in_ms ? fmt::format("predicted time (ms, roofline on {}; {} steps, setup takes no time)", axis.gpu,
                               with_commas(static_cast<int64_t>(n_steps)))
                 : fmt::format("simulated step ({} steps; this program has no time model)", with_commas(static_cast<int64_t>(n_steps)));
  s += svg::text(x0 + pw / 2, H - 8, x_title, R"(font-size="12" text-anchor="middle")");
  s += "</g>\n";

  // Hover targets, one per plotted point, on top of everything.
  s += R"(<g class="hovers">)";
  s += "\n";
  for (size_t i = 0; i < t.points.size(); ++i) {
    const TimelinePoint& pt = t.points[i];
    double left = SL(pt.first_step), right = SR(pt.last_step);
    std::string bytes;
    for (size_t c = 0; c < kCategoryCount; ++c) bytes += (c ? "," : "") + std::to_string(pt.bytes[c]);
    const Step& st = p.steps[static_cast<size_t>(pt.step)];
    std::string tip = fmt::format("step {} · {}\n{}\n{}live {} ({} bytes)", pt.step, st.label, step_desc(st, micro),
                                  axis.in_ms ? fmt::format("{:.3f}-{:.3f} ms · ", axis.start[static_cast<size_t>(pt.first_step)],
                                                           axis.end[static_cast<size_t>(pt.last_step)])
                                             : std::string(),
                                  human_bytes(pt.total), with_commas(pt.total));
    if (pt.first_step != pt.last_step) tip += fmt::format("\n(highest of steps {}-{})", pt.first_step, pt.last_step);
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      int64_t v = pt.bytes[static_cast<size_t>(*it)];
      if (v) tip += fmt::format("\n  {} {}", display_name(*it), human_bytes(v));
    }
    if (t.has_reserved) tip += fmt::format("\nreserved {}", human_bytes(pt.reserved));
    s += svg::rect_with(left, y0, right - left, ph,
                        fmt::format(R"(class="hover" data-step="{}" data-first-step="{}" data-last-step="{}" data-start="{:.4f}" data-end="{:.4f}" data-total="{}" data-bytes="{}"{})",
                                    pt.step, pt.first_step, pt.last_step, axis.start[static_cast<size_t>(pt.first_step)],
                                    axis.end[static_cast<size_t>(pt.last_step)], pt.total, bytes,
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
  if (mo) {
    s += fmt::format(R"(<span><span class="ln dashed" style="border-top-color:{}"></span>predicted device total (reserved + context)</span>)",
                     kPredictedTotalColor);
    s += fmt::format(R"(<span><span class="ln thick" style="border-top-color:{}"></span>measured by headroom watch, peak placed at the predicted peak</span>)",
                     kMeasuredColor);
  }
  s += "</div>\n";
  if (mo && (mo->before > 0 || mo->after > 0)) {
    s += fmt::format(R"(<p class="muted note-measured">{} of the {} measured samples fall outside the predicted run ({} before it, {} after it: process start, loading, other steps) and are not drawn.</p>)",
                     mo->before + mo->after, measured->samples.size(), mo->before, mo->after);
    s += "\n";
  }
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

std::string cards(const Estimate& e, const MeasuredSeries* measured) {
  std::string s = R"(<section class="cards">)";
  std::string when = std::string(phase_name(e.peak_phase));
  if (e.peak_iteration > 0) when += fmt::format(" of step {}", e.peak_iteration);
  s += card("peak (tensors)", human_bytes(e.peak_bytes), with_commas(e.peak_bytes) + " bytes, " + when);
  s += card("peak at", e.peak_op, "the op or autograd node running then", {}, true);
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
  if (measured && e.device) {
    const int64_t m = measured->samples[measured->peak].bytes, d = e.device->device_total_bytes;
    s += card(measured->process ? "measured (process)" : "measured (device)", human_bytes(m),
              fmt::format("NVML peak; predicted device total {} ({:+.1f}%)", human_bytes(d),
                          d > 0 ? (static_cast<double>(m) / static_cast<double>(d) - 1) * 100 : 0.0));
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
h1 .model{font-family:ui-monospace,"DejaVu Sans Mono",monospace;overflow-wrap:break-word}
h2{font-size:17px;margin:0 0 2px}
.sub{color:var(--muted);margin:2px 0 0}
.muted{color:var(--muted)}
.lead{margin:0 0 8px;color:#333}
section{margin:0 0 22px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:14px 0 20px}
.card{flex:1 1 150px;min-width:0;border:1px solid var(--rule);border-radius:6px;padding:7px 11px}
.card .k{font-size:11px;color:var(--muted);text-transform:uppercase;letter-spacing:.05em}
.card .v{font-size:19px;font-weight:650;overflow-wrap:break-word}
.card .d{font-size:12px;color:var(--muted)}
.card.fits{border-color:#009E73;background:#F0FAF6}
.card.fits .v{color:#00694d}
.card.nofit{border-color:#D55E00;background:#FDF3EC}
.card.nofit .v{color:#a34500}
.two{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,500px),1fr));gap:12px 28px;align-items:start}
.weights{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,560px),1fr));gap:12px 24px;align-items:start}
.two>*,.weights>*{min-width:0}
svg{display:block;overflow:visible;max-width:100%;height:auto}
.scroll{max-width:100%;overflow-x:auto}
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
code{font:12px/1.35 ui-monospace,"DejaVu Sans Mono",monospace;overflow-wrap:break-word}
.sw{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:5px;vertical-align:-1px}
.ln{display:inline-block;width:24px;height:0;margin-right:6px;vertical-align:4px;border-top:2px solid #000}
.ln.dashed{border-top-style:dashed}
.ln.dotted{border-top-style:dotted}
.ln.thick{border-top-width:4px}
.ln.cum{border-top-color:#D55E00}
.legend{display:flex;flex-wrap:wrap;gap:4px 16px;font-size:13px;margin:4px 0 0 76px}
p.legend{margin:6px 0 0 70px}
ul.notes{margin:4px 0 0;padding-left:20px}
@media (max-width:720px){main{padding:12px 10px 20px}h1{font-size:19px}.legend,p.legend{margin-left:0}th,td{padding:3px 4px}td.cat{white-space:normal}}
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
  const TimeAxis axis = time_axis(e, g);
  const MeasuredSeries* measured = options.measured && e.device ? &*options.measured : nullptr;

  const EstimateOptions& o = e.options;
  std::string title = fmt::format("{}: {}", o.model, subtitle(e));
  std::string s;
  s.reserve(64 * 1024 + t.points.size() * 600);
  s += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  s += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  s += "<meta name=\"generator\" content=\"headroom report\">\n";
  s += "<title>headroom: " + escape(title) + "</title>\n<style>" + kCss + "</style>\n</head>\n<body>\n<main>\n";
  s += fmt::format("<header><h1>headroom report: <span class=\"model\">{}</span></h1><p class=\"sub\">{}</p>\n", svg::breakable(o.model),
                   escape(subtitle(e)));
  s += fmt::format("<p class=\"sub\">{} parameters · weights {} · inputs {} · {} ops · {} simulated steps, {} allocation events</p></header>\n",
                   with_commas(e.parameter_count), human_bytes(e.weights_bytes), human_bytes(e.input_bytes), e.op_count,
                   with_commas(static_cast<int64_t>(p.steps.size())), with_commas(static_cast<int64_t>(p.events.size())));
  s += cards(e, measured);

  s += "<section>\n<h2>Memory over the simulated run</h2>\n";
  s += "<p class=\"lead\">Live tensor bytes stacked by category at each step's high-water mark";
  if (t.points.size() < p.steps.size()) {
    s += fmt::format(" ({} points: each the highest of about {} consecutive steps)", t.points.size(),
                     (p.steps.size() + t.points.size() - 1) / t.points.size());
  }
  s += axis.in_ms ? fmt::format(", against the time the roofline cost model predicts on {} (docs/planning.md; not validated "
                                "against a GPU): an op is as wide as it is long",
                                escape(axis.gpu))
                  : std::string(", against the simulated step");
  if (measured) {
    s += fmt::format(". The measured line is <code>{}</code> from <code>headroom watch</code>, moved in time so that its peak "
                     "sits at the predicted device total's peak (docs/gpu.md)",
                     escape(measured->path));
  }
  s += ". Hover the chart for a step's details.</p>\n";
  s += memory_chart(e, t, p, axis, measured);
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
  return svg::scrollable_tables(s);
}

Result<std::string> html_report(const EstimateOptions& options, const HtmlReportOptions& html) {
  if (html.measured && !options.gpu) {
    return Result<std::string>::failure(
        "--measured draws NVML readings over the predicted device total: it needs --gpu NAME (or --gpu-memory)");
  }
  EstimateOptions o = options;
  o.keep_program = true;
  // Generation: estimate() simulates two windows of forwards (the prefill with the first decode,
  // and the last decode), which give the peak of the whole loop. The page draws the whole loop
  // when it is short enough to simulate unrolled: every window is widened to all the forwards,
  // prefill then each decode (the unrolled peak equals the windows', HfGeneration tests).
  if (o.generation && o.generation->new_tokens <= kReportUnrolledTokens && o.graph_loader) {
    o.graph_loader = [loader = o.graph_loader](const BuildConfig& cfg) {
      BuildConfig c = cfg;
      if (c.generation) {
        c.generation->first = 0;
        c.generation->last = c.generation->new_tokens - 1;
      }
      return loader(c);
    };
  }
  Result<Estimate> e = estimate(o);
  if (!e.ok()) return Result<std::string>::failure(e.error());
  return capture_input_errors([&]() -> std::string {
    Graph g = build_graph(o, e.value().micro_batch);
    return html_report(e.value(), g, html);
  });
}

}  // namespace headroom
