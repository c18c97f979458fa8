#include "estimate/gpu_ranking.h"

#include <algorithm>

namespace headroom {

std::string_view objective_name(Objective o) {
  switch (o) {
    case Objective::Cost: return "cost";
    case Objective::Time: return "time";
    case Objective::Memory: return "memory";
  }
  return "?";
}

std::optional<Objective> parse_objective(std::string_view s) {
  for (Objective o : {Objective::Cost, Objective::Time, Objective::Memory}) {
    if (objective_name(o) == s) return o;
  }
  return std::nullopt;
}

namespace {

RankedGpu rank_one(const RankRequest& req, const EstimateOptions& run, const FitResult& fit) {
  RankedGpu r;
  r.gpu = fit.gpu;
  r.price = price_for(fit.gpu, req.price_overrides);
  r.batch = req.batch_given ? run.batch : fit.max_value;
  if (r.batch == 0) return r;  // nothing fits
  EstimateOptions o = run;
  o.batch = r.batch;
  o.top_tensors = 0;
  o.run_length.reset();
  if (o.micro_batch && r.batch % *o.micro_batch != 0) o.micro_batch.reset();
  Result<Estimate> e = estimate(o);
  if (!e.ok()) throw InputError(e.error());
  const Estimate& est = e.value();
  r.fits = est.device && est.device->fits;
  if (est.device) {
    r.device_total_bytes = est.device->device_total_bytes;
    r.headroom_bytes = est.device->headroom_bytes;
  }
  if (!est.time) {
    throw InputError("--objective needs a catalog GPU on one device (--gpu NAME or --gpu all, without --gpus): time comes from its roofline");
  }
  {
    r.step_ms = est.time->step.total_ms;
    r.throughput = est.time->throughput;
    const bool tokens = r.throughput.unit == "tokens/s";
    r.cost_units = tokens ? 1e6 : 1e3;
    r.cost_unit = tokens ? "1M tokens" : "1k samples";
    if (r.price && r.throughput.value > 0) r.cost = cost_per_units(r.price->usd_per_hour, r.throughput.value, r.cost_units);
  }
  return r;
}

// Whether a orders before b under the objective (both fit).
bool better(Objective objective, const RankedGpu& a, const RankedGpu& b) {
  switch (objective) {
    case Objective::Cost:
      if (a.cost.has_value() != b.cost.has_value()) return a.cost.has_value();
      if (a.cost && *a.cost != *b.cost) return *a.cost < *b.cost;
      break;
    case Objective::Time:
      // Time per unit of work: the batches differ between GPUs, so compare throughput.
      if (a.throughput.value != b.throughput.value) return a.throughput.value > b.throughput.value;
      break;
    case Objective::Memory:
      if (a.headroom_bytes != b.headroom_bytes) return a.headroom_bytes > b.headroom_bytes;
      break;
  }
  return a.gpu < b.gpu;
}

}  // namespace

Result<std::vector<RankedGpu>> rank_gpus(const RankRequest& req, const std::vector<EstimateOptions>& runs,
                                         const std::vector<FitResult>& fits) {
  return capture_input_errors([&]() -> std::vector<RankedGpu> {
    HEADROOM_CHECK(runs.size() == fits.size(), "one fit per run");
    std::vector<RankedGpu> rows;
    for (size_t i = 0; i < runs.size(); ++i) rows.push_back(rank_one(req, runs[i], fits[i]));
    std::stable_sort(rows.begin(), rows.end(), [&](const RankedGpu& a, const RankedGpu& b) {
      if (a.fits != b.fits) return a.fits;
      if (!a.fits) return a.gpu < b.gpu;
      return better(req.objective, a, b);
    });
    return rows;
  });
}

}  // namespace headroom
