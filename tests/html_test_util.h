// Helpers for the tests of the HTML pages (html_report_test, plan_html_test, pack_html_test):
// reading the plotted data back from the markup, the build's artifact folder, and laying a page
// out in headless Chromium at several widths, measured from its DOM.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace headroom::testing {

// The attributes of every <element ...> whose class is `cls` (values are unescaped only for
// &quot; and &amp;, enough for the names used here).
using Attrs = std::map<std::string, std::string>;
std::vector<Attrs> elements(const std::string& html, const std::string& element, const std::string& cls);
// Every number in a text (path data, "x y w h").
std::vector<double> numbers(const std::string& text);
// "1,2,3" -> {1, 2, 3}.
std::vector<int64_t> int_list(const std::string& text);

// <build>/test-artifacts, created.
std::string artifact_dir();

// The Chromium binary: $HEADROOM_CHROMIUM, else chromium or chromium-browser on PATH; "" if none.
std::string find_chromium();
// Width and height from a PNG's IHDR chunk (0, 0 when the file is not a PNG).
std::pair<uint32_t, uint32_t> png_size(const std::string& bytes);

// The widths every page is checked at: a phone, a laptop, a 4K-class monitor.
inline constexpr int kLayoutWidths[] = {390, 1280, 2560};

// Lays `html` (a page file) out in headless Chromium at `width` CSS pixels, inside an iframe of
// that width in a harness page (headless windows are at least 500 px wide) whose script, after
// load, measures the page from its DOM and writes what it finds into the harness's DOM, read back
// with --dump-dom. The page itself stays script-free. Returns the problems found, one line each:
//   - horizontal scroll: the document is wider than the viewport;
//   - overlapping text: two rendered text boxes (HTML text line boxes from Range.getClientRects,
//     SVG <text> bounding boxes) intersect by more than 1 px both ways;
//   - label over a line: an SVG <text> box crosses a named horizontal line (<line class=...>:
//     capacity, budget, ...);
//   - mid-word break: a text node wraps between two characters that are neither white space nor
//     '-' or '/' (names break only at the <wbr> the pages put after dots, a node boundary).
// Also keeps the screenshot at `png` (width x 2000) and fails (gtest) when Chromium does not run
// or logs a console message.
std::vector<std::string> layout_problems(const std::string& html, int width, const std::string& png);

// layout_problems at every kLayoutWidths width, screenshots `<stem>-<width>.png` beside the page;
// each problem is a gtest failure naming the width.
void expect_clean_layout(const std::string& html, const std::string& stem);

}  // namespace headroom::testing
