// Text and JSON of `headroom plan MODEL` (docs/planning.md; JSON contract in docs/json-schema.md):
// the chosen plan, its re-simulated peak and predicted step time against the unconstrained
// step, every strategy side by side, the numerics-changing options, and the per-layer decisions.
#pragma once

#include <string>

#include "plan/planner.h"

namespace headroom {

// How much slower than the baseline, in percent (0 without a baseline time).
inline double overhead_pct(double ms, double baseline_ms) { return baseline_ms > 0 ? (ms / baseline_ms - 1.0) * 100.0 : 0.0; }

std::string plan_text(const Plan& plan);
std::string plan_json(const Plan& plan);

}  // namespace headroom
