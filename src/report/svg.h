// Small helpers for writing SVG and HTML by hand: escaping, numbers with a fixed number of
// decimals (so the same input gives byte-identical output on every machine), element builders,
// axis ticks in binary byte units, and a rough text-width estimate for laying out labels.
//
// Nothing here measures real glyphs: text_width() assumes an average sans-serif advance, which is
// enough to decide whether a label fits a band and to keep labels from overlapping.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace headroom::svg {

// Escapes & < > " ' for element content and attribute values.
std::string escape(std::string_view text);

// A coordinate or length with at most 2 decimals, trailing zeros trimmed: 12 -> "12",
// 12.5 -> "12.5", 1/3 -> "0.33", -0.001 -> "0".
std::string num(double v);

struct Point {
  double x = 0;
  double y = 0;
};

// Path data through the points: "M1,2L3,4" (and "Z" when closed). Empty for no points.
std::string path_d(const std::vector<Point>& points, bool close = false);

// Elements. `attrs` is pasted verbatim inside the tag (already escaped by the caller), e.g.
// R"(class="bar" fill="#0072B2")". text() escapes its content.
std::string rect(double x, double y, double w, double h, std::string_view attrs = {});
// A rect with content, e.g. a title(): <rect ...>children</rect>.
std::string rect_with(double x, double y, double w, double h, std::string_view attrs, std::string_view children);
std::string line(double x1, double y1, double x2, double y2, std::string_view attrs = {});
std::string circle(double cx, double cy, double r, std::string_view attrs = {});
std::string text(double x, double y, std::string_view content, std::string_view attrs = {});
// Escaped for HTML content, with a line-break opportunity (<wbr>) after each '/', '.', '_', '-'
// and ':' that is not last: file paths and dotted names then wrap between their parts on a narrow
// screen instead of inside a word.
std::string breakable(std::string_view name);
// One summary card of a page (key, value, detail; `cls` an extra class). `name_value`: the value is
// a name (an op), which may wrap after its dots, never inside a word.
std::string card(std::string_view key, std::string_view value, std::string_view detail, std::string_view cls = {},
                 bool name_value = false);
// A tooltip: <title>escaped</title> (browsers show it on hover, no script needed).
std::string title(std::string_view tooltip);

// Roughly how wide `s` renders in a sans-serif font of `font_px` pixels (0.58 em per character,
// a little generous for UI fonts, so a label judged to fit does fit).
double text_width(std::string_view s, double font_px);

// Axis ticks for 0..max_bytes in binary units: a step of 1, 2, 2.5 or 5 times a power of ten of
// the unit chosen for max_bytes (B, KiB, MiB, GiB, TiB), at most about `target` ticks.
struct ByteTicks {
  double unit_bytes = 1;     // 1, 1024, 1024^2, ...
  std::string unit;          // "B", "KiB", "MiB", "GiB", "TiB"
  double step_units = 1;     // tick step in `unit`
  double top_bytes = 1;      // the axis maximum: a whole number of steps >= max_bytes
  std::vector<double> values;  // tick positions in bytes, 0 .. top_bytes
};
ByteTicks byte_ticks(double max_bytes, int target = 6);
// "1.5 GiB", "512 MiB", "0 B" for a tick of `t`.
std::string tick_label(const ByteTicks& t, double bytes);

// A decimal "nice" step (1, 2 or 5 x 10^k) for about `target` ticks over 0..range.
double nice_step(double range, int target);
// The same for whole numbers (steps, groups): at least 1.
int64_t nice_count_step(int64_t range, int target);

// Labels in a chart's right margin: sorted by y and pushed down so that consecutive labels are
// at least `gap` pixels apart, the first at `top` or below.
struct MarginLabel {
  double y = 0;
  std::string head, value, style;
};
void spread_labels(std::vector<MarginLabel>& labels, double gap, double top);

// Every <table> of a page wrapped in <div class="scroll"> (overflow-x:auto in the shared style
// sheet): on a narrow screen a table wider than the page scrolls inside its box instead of being
// cut or widening the page.
std::string scrollable_tables(std::string_view html);

}  // namespace headroom::svg
