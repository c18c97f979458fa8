// gpu_ranking: every GPU a model fits, ordered by what the user optimizes: cost per unit of work
// (price x time, per 1k samples or per 1M tokens), step time, or memory left. Each GPU's row
// comes from the same estimate() as `estimate --gpu` (memory from the simulation, time from the
// roofline, cost/run_time.h) at one batch: the batch given, else the largest that fits that GPU
// (fit's answer, so each GPU is compared at its own best throughput).
//
// Invariant: rows that fit come first; within them the objective orders, ties broken by GPU name;
// rows that do not fit follow, by name. A row without a price ranks after priced rows for cost.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cost/price_catalog.h"
#include "estimate/estimate.h"
#include "estimate/fit.h"

namespace headroom {

enum class Objective : uint8_t { Cost, Time, Memory };
std::string_view objective_name(Objective o);
std::optional<Objective> parse_objective(std::string_view s);

struct RankedGpu {
  std::string gpu;
  bool fits = false;
  int64_t batch = 0;                 // the batch the row is estimated at (0: nothing fits)
  double step_ms = 0;
  Throughput throughput;
  int64_t device_total_bytes = 0;
  int64_t headroom_bytes = 0;        // usable memory left at that batch (negative: short by)
  std::optional<GpuPrice> price;
  std::optional<double> cost;        // USD per cost_units of work
  double cost_units = 0;             // 1,000 samples or 1,000,000 tokens
  std::string cost_unit;             // "1k samples" or "1M tokens"
};

// The ranked table with the objective that ordered it.
struct Ranking {
  Objective objective = Objective::Memory;
  std::vector<RankedGpu> rows;
};

struct RankRequest {
  Objective objective = Objective::Memory;
  std::map<std::string, double> price_overrides;
  bool batch_given = false;  // rank at EstimateOptions::batch, else at each GPU's largest fitting batch
};

// `runs`: per GPU, the estimate options with that GPU applied and fit's result for it (same order
// as the table fit prints). Bad input comes back as a failed Result with one line.
Result<std::vector<RankedGpu>> rank_gpus(const RankRequest& request, const std::vector<EstimateOptions>& runs,
                                         const std::vector<FitResult>& fits);

}  // namespace headroom
