// Text and JSON of `headroom fit`: one row per GPU with the largest size that fits, the memory at
// that size and at the next one. When nothing fits, the next steps (estimate/next_step.h) follow
// the table, each with its predicted device total.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>
#include <vector>

#include "estimate/fit.h"
#include "estimate/gpu_ranking.h"
#include "estimate/next_step.h"

namespace headroom {

// `next_steps`: when nothing fits. `ranking` (fit --objective): the GPUs ordered by cost, time or
// memory left, after the fit rows.
std::string fit_text(const EstimateOptions& o, const std::vector<FitResult>& results,
                     const std::vector<NextStep>& next_steps = {}, const std::optional<Ranking>& ranking = std::nullopt);
std::string fit_json(const EstimateOptions& o, const std::vector<FitResult>& results,
                     const std::vector<NextStep>& next_steps = {}, const std::optional<Ranking>& ranking = std::nullopt);
// The ranking alone: a table (text) and its JSON array.
std::string ranking_text(const Ranking& ranking);
nlohmann::ordered_json ranking_json(const Ranking& ranking);

}  // namespace headroom
