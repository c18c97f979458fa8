// Text and JSON of `headroom fit`: one row per GPU with the largest size that fits, the memory at
// that size and at the next one.
#pragma once

#include <string>
#include <vector>

#include "estimate/fit.h"

namespace headroom {

std::string fit_text(const EstimateOptions& o, const std::vector<FitResult>& results);
std::string fit_json(const EstimateOptions& o, const std::vector<FitResult>& results);

}  // namespace headroom
