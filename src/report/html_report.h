// `headroom report`: one self-contained HTML page (inline CSS and SVG, no script, nothing fetched
// from the network) that shows an Estimate:
//   1. memory over the simulated run: live bytes stacked by category against predicted time (the
//      cost model's step times, TimeAxis), the forward / backward / optimizer phases of each
//      training step shaded and labelled, the peak marked (at least kMinPeakPx wide, its label
//      where no line crosses it), with a GPU the device capacity and the caching allocator's
//      reserved bytes, and with a watch file the measured memory over the predicted device total;
//   2. the breakdown at the peak and the largest buffers alive then, with the op that made each;
//   3. weight memory per layer (parameters and buffers grouped by module prefix), sorted
//      descending, with the cumulative share.
// The page reflows from 360 to 2560 px (the shared style sheet, html_page_css). The output is
// deterministic: the same estimate gives byte-identical HTML (no timestamps; every sort breaks
// ties on an id or a name; numbers have fixed decimals).
//
// The plotted data is also in the markup, for tests and tools (docs/report.md):
//   <g class="timeline" data-plot="x y w h" data-y-max="BYTES" data-steps="N" data-x-unit="ms"
//      data-x-max="MS">
//   <rect class="hover" data-step="S" data-first-step="A" data-last-step="B" data-start="MS"
//         data-end="MS" data-total="T" data-bytes="b0,...,b8" data-reserved="R">  one per plotted
//         point (bytes in Category order)
//   <path class="area" data-category="weights" d="...">  drawn as steps: two vertices per point
//         (its run's left and right edge) along the upper edge left to right, then the lower edge back
//   <g class="peak-marker" data-step="S" data-bytes="PEAK" data-width-px="W" [data-widened="true"]>
//   <path class="predicted-total" data-bytes="B">, <g class="measured" data-shift-ms="MS"
//         data-t-ms="..." data-bytes="..." data-peak="B" data-before="N" data-after="N">
//   <rect class="weight-bar" data-group="layer1.0.conv1" data-bytes="B">
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "estimate/estimate.h"
#include "measure/watch_samples.h"
#include "ir/graph.h"
#include "schedule/program.h"
#include "util/error.h"

namespace headroom {

struct HtmlReportOptions {
  // Most points the memory chart plots (the plot is about 900 pixels wide: 450 points keep even a
  // one-step peak 2 pixels wide). Programs with more steps are downsampled: consecutive steps are
  // grouped in runs of ceil(steps / max_points) and each run plots its highest step, so the peak
  // always survives. REQUIRES: >= 2.
  size_t max_points = 450;
  // `report --measured FILE` (measure/watch_samples.h): drawn over the predicted device total
  // (reserved + CUDA context + NCCL), its peak placed at the predicted one. Needs a GPU (the
  // pipeline below refuses it without one); ignored by html_report(Estimate) without a device.
  std::optional<MeasuredSeries> measured;
};

// The chart's x axis: when each program step starts and ends. In milliseconds on the roofline
// cost model of cost/cost_model.h (step_times, the GPU given with --gpu when the catalog has it,
// else the planner's default), so an op's width is its predicted duration and setup steps take
// no time. A program whose steps are not all ops of `g` (generation: its program is a window of
// forwards' graph, not `g`) falls back to the step index (step s spans [s, s + 1)).
struct TimeAxis {
  bool in_ms = false;
  std::string gpu;                 // the GPU that times the steps (in_ms only)
  std::vector<double> start, end;  // one per Program::steps, in axis units
  double total = 0;                // end of the last step
};
TimeAxis time_axis(const Estimate& e, const Graph& g);

// One plotted point of the memory chart.
struct TimelinePoint {
  int32_t step = 0;          // index into Program::steps: the step whose state is plotted
  int32_t first_step = 0;    // the run of steps this point stands for (== step without
  int32_t last_step = 0;     //   downsampling)
  CategoryBytes bytes{};     // live bytes per category at `step`'s high-water mark
  int64_t total = 0;         // their sum
  int64_t reserved = 0;      // most bytes the caching allocator reserved during first..last_step
};

struct Timeline {
  std::vector<TimelinePoint> points;
  size_t peak_point = 0;      // the first point with the largest total
  int64_t reserved_peak = 0;  // 0 without a GPU
  bool has_reserved = false;
};

// The memory chart's data. A step's high-water mark is the state with the most live bytes during
// the step, its start included (a step that only frees shows what it started with); ties go to
// the earliest state. With `allocator`, the program is also replayed on PyTorch's caching
// allocator with those options and `reserved` is filled in.
Timeline memory_timeline(const Program& p, const CachingAllocatorOptions* allocator, size_t max_points);

// Weight bytes per module: parameters and buffers grouped by their name without its last
// component ("layer1.0.conv1.weight" -> "layer1.0.conv1"; a name without a dot is its own group),
// tied parameters once, sorted by bytes descending then name.
struct WeightGroup {
  std::string module;
  int64_t bytes = 0;
  int64_t parameters = 0;  // elements of trainable parameters (buffers excluded)
  int32_t tensors = 0;
};
std::vector<WeightGroup> weight_groups(const Graph& g);

// The page. REQUIRES: `e` was made with EstimateOptions::keep_program (a non-empty program) and `g`
// is the graph it simulated (build_graph(e.options, e.micro_batch)).
std::string html_report(const Estimate& e, const Graph& g, const HtmlReportOptions& options = {});

// The whole pipeline for the CLI and the Python package: estimate with keep_program, rebuild the
// graph, render. A measured series without a GPU in `options` is an InputError (nothing to
// compare it with), checked before anything runs. Generation of at most kReportUnrolledTokens new
// tokens is drawn whole (prefill, then every decode step); longer runs show the window holding
// the peak, as the estimate simulates it.
inline constexpr int64_t kReportUnrolledTokens = 64;
Result<std::string> html_report(const EstimateOptions& options, const HtmlReportOptions& html = {});

// The page's style sheet, shared with the pack page (report/pack_html.h).
std::string_view html_page_css();

}  // namespace headroom
