#include "report/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace headroom::svg {

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double v) {
  std::string s = fmt::format("{:.2f}", v);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  if (s == "-0" || s.empty()) s = "0";
  return s;
}

std::string path_d(const std::vector<Point>& points, bool close) {
  std::string d;
  d.reserve(points.size() * 14);
  for (size_t i = 0; i < points.size(); ++i) {
    d += i == 0 ? 'M' : 'L';
    d += num(points[i].x);
    d += ',';
    d += num(points[i].y);
  }
  if (close && !points.empty()) d += 'Z';
  return d;
}

namespace {
std::string with_attrs(std::string_view attrs) { return attrs.empty() ? "" : " " + std::string(attrs); }
}  // namespace

std::string rect(double x, double y, double w, double h, std::string_view attrs) {
  return fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}"{}/>)", num(x), num(y), num(std::max(0.0, w)),
                     num(std::max(0.0, h)), with_attrs(attrs));
}

std::string rect_with(double x, double y, double w, double h, std::string_view attrs, std::string_view children) {
  return fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}"{}>{}</rect>)", num(x), num(y), num(std::max(0.0, w)),
                     num(std::max(0.0, h)), with_attrs(attrs), children);
}

std::string line(double x1, double y1, double x2, double y2, std::string_view attrs) {
  return fmt::format(R"(<line x1="{}" y1="{}" x2="{}" y2="{}"{}/>)", num(x1), num(y1), num(x2), num(y2),
                     with_attrs(attrs));
}

std::string circle(double cx, double cy, double r, std::string_view attrs) {
  return fmt::format(R"(<circle cx="{}" cy="{}" r="{}"{}/>)", num(cx), num(cy), num(r), with_attrs(attrs));
}

std::string text(double x, double y, std::string_view content, std::string_view attrs) {
  return fmt::format(R"(<text x="{}" y="{}"{}>{}</text>)", num(x), num(y), with_attrs(attrs), escape(content));
}

std::string title(std::string_view tooltip) { return "<title>" + escape(tooltip) + "</title>"; }

double text_width(std::string_view s, double font_px) {
  // Count UTF-8 code points, not bytes.
  size_t chars = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++chars;
  }
  return static_cast<double>(chars) * font_px * 0.58;
}

ByteTicks byte_ticks(double max_bytes, int target) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  ByteTicks t;
  if (!(max_bytes > 0)) max_bytes = 1;
  if (target < 1) target = 1;
  int u = 0;
  while (u < 4 && max_bytes >= std::ldexp(1.0, 10 * (u + 1))) ++u;
  t.unit_bytes = std::ldexp(1.0, 10 * u);
  t.unit = kUnits[u];
  double m = max_bytes / t.unit_bytes;
  double raw = m / target;
  double p10 = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * p10;
  for (double f : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (f * p10 >= raw * (1 - 1e-9)) {
      step = f * p10;
      break;
    }
  }
  if (u == 0 && step < 1) step = 1;  // no fractional bytes
  t.step_units = step;
  double steps = std::ceil(m / step - 1e-9);
  if (steps < 1) steps = 1;
  t.top_bytes = steps * step * t.unit_bytes;
  for (int i = 0; i <= static_cast<int>(steps); ++i) t.values.push_back(i * step * t.unit_bytes);
  return t;
}

std::string tick_label(const ByteTicks& t, double bytes) {
  if (bytes == 0) return "0";
  return num(bytes / t.unit_bytes) + " " + t.unit;
}

double nice_step(double range, int target) {
  const double raw = std::max(range / target, 1e-9);
  const double p10 = std::pow(10.0, std::floor(std::log10(raw)));
  for (double f : {1.0, 2.0, 5.0}) {
    if (f * p10 >= raw) return f * p10;
  }
  return 10 * p10;
}

int64_t nice_count_step(int64_t range, int target) {
  // max(range, target) / target = max(range / target, 1): never a step below one.
  const double range_at_least_target = std::max(static_cast<double>(range), static_cast<double>(target));
  return std::max<int64_t>(1, static_cast<int64_t>(nice_step(range_at_least_target, target)));
}

void spread_labels(std::vector<MarginLabel>& labels, double gap, double top) {
  std::stable_sort(labels.begin(), labels.end(), [](const MarginLabel& a, const MarginLabel& b) { return a.y < b.y; });
  double next = top;
  for (MarginLabel& l : labels) {
    l.y = std::max(l.y, next);
    next = l.y + gap;
  }
}

std::string breakable(std::string_view name) {
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    out += escape(name.substr(i, 1));
    const char c = name[i];
    if (i + 1 < name.size() && (c == '/' || c == '.' || c == '_' || c == '-' || c == ':')) out += "<wbr>";
  }
  return out;
}

std::string scrollable_tables(std::string_view html) {
  std::string out;
  out.reserve(html.size() + 1024);
  size_t pos = 0;
  for (size_t at = html.find("<table", pos); at != std::string_view::npos; at = html.find("<table", pos)) {
    const size_t end = html.find("</table>", at);
    if (end == std::string_view::npos) break;
    out += html.substr(pos, at - pos);
    out += "<div class=\"scroll\">";
    out += html.substr(at, end + 8 - at);
    out += "</div>";
    pos = end + 8;
  }
  out += html.substr(pos);
  return out;
}

std::string card(std::string_view key, std::string_view value, std::string_view detail, std::string_view cls,
                 bool name_value) {
  return fmt::format(R"(<div class="card{}"><div class="k">{}</div><div class="v">{}</div><div class="d">{}</div></div>)",
                     cls.empty() ? "" : " " + std::string(cls), escape(key), name_value ? breakable(value) : escape(value),
                     escape(detail));
}

}  // namespace headroom::svg
