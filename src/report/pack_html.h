// `headroom pack ... --html FILE`: the pack result (pack/pack.h) as one self-contained HTML page
// (inline CSS and SVG, no script, nothing fetched), in the style of the estimate report:
//   1. the cumulative savings curve of merging: total weight memory of all models after merging
//      the first k groups of the greedy merge plan, k = 0..n, with markers where 50/80/95% of the
//      possible saving is reached, the weights with free sharing only (bit-identical layers) as a
//      level, and with a GPU its capacity and the room left for weights;
//   2. free sharing apart: how far each model's weights could be checked and the groups of
//      bit-identical layers;
//   3. the per-model weight distribution (GEMEL's power law): cumulative share of layer memory
//      against the share of layers, largest first, one line per model;
//   4. the merge plan's largest groups, and residency with a GPU;
//   5. with --workload, the swap simulation: per policy and sharing choice the stalls, loads,
//      bytes moved, evictions, misses, and a lane of the GPU's time (execution, load stalls).
// A 0 B free saving is not coloured green; models with the same layer bytes are one curve.
// Deterministic: the same PackReport gives byte-identical HTML.
//
// The plotted data is in the markup, for tests and tools (docs/report.md):
//   <g class="savings" data-plot="x y w h" data-y-max="BYTES" data-groups="N">
//   <path class="savings-curve" data-weights="w0,...,wN" d="...">  one vertex per k = 0..N
//   <g class="threshold" data-fraction="0.5" data-groups="K" data-weights="BYTES">
//   <line class="free-sharing" data-bytes="B">, <line class="capacity" data-bytes="B">,
//   <line class="room" data-bytes="B">                      (lines where their value is on the scale)
//   <g class="distribution" data-plot="x y w h">
//   <path class="model-share" data-model="LABEL" data-bytes="b1,...,bL" d="...">  layer bytes
//         largest first; vertices at (i / L, cumulative share of the first i layers), i = 0..L;
//         data-model lists every model drawn by it ("a, a#2")
//   <tr class="sim-run" data-policy data-sharing data-stall-ns data-loads>, <g class="sim-lane">
#pragma once

#include <string>

#include "pack/pack.h"

namespace headroom {

std::string pack_html(const PackReport& r);

}  // namespace headroom
