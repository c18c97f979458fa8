// Text and JSON of `headroom plan MODEL` (docs/planning.md; JSON contract in docs/json-schema.md):
// the chosen plan, its re-simulated peak and predicted step time against the unconstrained
// step, every strategy side by side, the numerics-changing options, and the per-layer decisions.
#pragma once

#include <string>

#include "plan/planner.h"

namespace headroom {

std::string plan_text(const Plan& plan);
std::string plan_json(const Plan& plan);

}  // namespace headroom
