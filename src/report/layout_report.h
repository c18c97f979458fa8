// Text and JSON of `plan MODEL --gpus N`: the ranked data-parallel layouts (per-GPU device total,
// micro-batch x accumulation, compute, communication, step time, throughput) and the engines
// that do not fit, with why.
#pragma once

#include <string>

#include "plan/layout_search.h"

namespace headroom {

std::string layout_text(const LayoutPlan& plan);
std::string layout_json(const LayoutPlan& plan);

}  // namespace headroom
