// Text and JSON of `headroom fit`: one row per GPU with the largest size that fits, the memory at
// that size and at the next one. When nothing fits, the next steps (estimate/next_step.h) follow
// the table, each with its predicted device total.
#pragma once

#include <string>
#include <vector>

#include "estimate/fit.h"
#include "estimate/next_step.h"

namespace headroom {

std::string fit_text(const EstimateOptions& o, const std::vector<FitResult>& results,
                     const std::vector<NextStep>& next_steps = {});
std::string fit_json(const EstimateOptions& o, const std::vector<FitResult>& results,
                     const std::vector<NextStep>& next_steps = {});

}  // namespace headroom
