#include "report/fit_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "report/estimate_report.h"
#include "util/format.h"

namespace headroom {
namespace {

std::string axis_name(FitAxis a) { return a == FitAxis::Batch ? "batch" : "seq"; }

nlohmann::ordered_json point_json(const FitPoint& p, FitAxis axis) {
  nlohmann::ordered_json j;
  j[axis_name(axis)] = p.value;
  j["peak_bytes"] = p.peak_bytes;
  device_json(p.device, j);
  return j;
}

// The GPU the steps were evaluated on: the largest of those tried (fit_all's caller's choice).
std::string next_steps_text(const std::vector<FitResult>& results, const std::vector<NextStep>& steps) {
  const FitResult* on = nullptr;
  for (const FitResult& r : results) {
    if (r.next && (!on || r.next->device.capacity_bytes > on->next->device.capacity_bytes)) on = &r;
  }
  if (!on) return "";
  std::string s = fmt::format("\nNothing fits. Next steps on {} at {} {}, as headroom predicts them:\n", on->gpu,
                              axis_name(on->axis), on->next->value);
  size_t width = 0;
  for (const NextStep& n : steps) width = std::max(width, n.change.size());
  for (const NextStep& n : steps) {
    s += fmt::format("  {:<{}} {:>10}  {:<13} {}\n", n.change, width, human_bytes(n.device_total_bytes),
                     n.fits ? "fits" : "does not fit", n.note);
  }
  return s;
}

}  // namespace

std::string ranking_text(const Ranking& k) {
  std::string s = fmt::format("\nranked by {} (time: roofline, docs/performance.md; prices: data/gpu_prices.json or --price)\n",
                              k.objective == Objective::Cost ? "cost per unit of work" : k.objective == Objective::Time ? "throughput" : "memory left");
  s += fmt::format("{:<4} {:<18} {:>6} {:>10} {:>18} {:>10} {:>22} {:>12}\n", "rank", "gpu", "batch", "step", "throughput", "USD/h",
                   "cost", "memory left");
  int rank = 0;
  for (const RankedGpu& r : k.rows) {
    if (!r.fits) {
      s += fmt::format("{:<4} {:<18} {:>6} {:>10} {:>18} {:>10} {:>22} {:>12}\n", "-", r.gpu, "-", "-", "-", "-", "-", "does not fit");
      continue;
    }
    std::string rate = r.throughput.value >= 100 ? with_commas(static_cast<int64_t>(std::llround(r.throughput.value)))
                                                  : fmt::format("{:.3g}", r.throughput.value);
    std::string price = r.price ? fmt::format("{:.2f}{}", r.price->usd_per_hour, r.price->provider == "--price" ? "*" : "") : "-";
    std::string cost = r.cost ? fmt::format("${:.3g} / {}", *r.cost, r.cost_unit) : "no price";
    s += fmt::format("{:<4} {:<18} {:>6} {:>10} {:>18} {:>10} {:>22} {:>12}\n", ++rank, r.gpu, r.batch,
                     human_duration_ms(r.step_ms), rate + " " + r.throughput.unit, price, cost, human_bytes(r.headroom_bytes));
  }
  s += "prices: the cheapest on-demand listing per GPU (provider and date in --json); * = --price\n";
  return s;
}

nlohmann::ordered_json ranking_json(const Ranking& k) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const RankedGpu& r : k.rows) {
    nlohmann::ordered_json row;
    row["gpu"] = r.gpu;
    row["fits"] = r.fits;
    row["batch"] = r.batch;
    row["step_time_ms"] = r.step_ms;
    row["throughput"] = {{"value", r.throughput.value}, {"unit", r.throughput.unit}};
    row["device_total_bytes"] = r.device_total_bytes;
    row["headroom_bytes"] = r.headroom_bytes;
    if (r.price) {
      row["price"] = {{"usd_per_hour", r.price->usd_per_hour}, {"provider", r.price->provider}, {"date", r.price->date},
                      {"source", r.price->source}};
    } else {
      row["price"] = nullptr;
    }
    if (r.cost) row["cost"] = {{"usd", *r.cost}, {"per", r.cost_unit}};
    else row["cost"] = nullptr;
    rows.push_back(row);
  }
  return {{"objective", std::string(objective_name(k.objective))}, {"gpus", rows}};
}

std::string fit_text(const EstimateOptions& o, const std::vector<FitResult>& results,
                     const std::vector<NextStep>& next_steps, const std::optional<Ranking>& ranking) {
  std::string axis = results.empty() ? "batch" : axis_name(results[0].axis);
  std::string s = fmt::format("headroom fit: {}, {}, {}, largest {} that fits", o.model,
                              o.mode == RunMode::Training ? "training (" + std::string(optimizer_name(o.optimizer)) + ")" : "inference",
                              precision_name(o.precision), axis);
  if (o.parallel.given()) s += ", " + describe_layout(o.parallel);
  double margin = 0;
  for (const FitResult& r : results) {
    const FitPoint* p = r.at_max ? &*r.at_max : (r.next ? &*r.next : nullptr);
    if (p) margin = 1.0 - static_cast<double>(p->device.usable_bytes) / static_cast<double>(p->device.capacity_bytes);
  }
  if (margin > 0.0005) {
    s += fmt::format(" with a {:.0f}% margin (kept free: fragmentation drift over long runs, other processes, library growth; --margin 0% turns it off)",
                     100.0 * margin);
  }
  s += "\n\n";
  s += fmt::format("{:<18} {:>10} {:>8} {:>12} {:>12}   {}\n", "gpu", "memory", "max " + axis, "total at max",
                   "at max+1", "");
  for (const FitResult& r : results) {
    std::string cap = r.at_max ? human_bytes(r.at_max->device.capacity_bytes)
                               : (r.next ? human_bytes(r.next->device.capacity_bytes) : "");
    if (r.max_value == 0) {
      s += fmt::format("{:<18} {:>10} {:>8} {:>12} {:>12}   does not fit at {} {}: needs {}\n", r.gpu, cap, "-", "-",
                       "-", axis, r.next ? r.next->value : 1, r.next ? human_bytes(r.next->device.device_total_bytes) : "");
      continue;
    }
    std::string next = r.next ? human_bytes(r.next->device.device_total_bytes) : "-";
    std::string why = r.limited ? "search limit" : (!r.limit_reason.empty() ? r.limit_reason : "");
    if (r.fails_below) why += fmt::format("{}note: {} {} does not fit (allocator rounding)", why.empty() ? "" : "; ", axis, r.fails_below);
    s += fmt::format("{:<18} {:>10} {:>8} {:>12} {:>12}   {}\n", r.gpu, cap, r.max_value,
                     human_bytes(r.at_max->device.device_total_bytes), next, why);
  }
  if (!next_steps.empty()) s += next_steps_text(results, next_steps);
  if (ranking) s += ranking_text(*ranking);
  return s;
}

std::string fit_json(const EstimateOptions& o, const std::vector<FitResult>& results,
                     const std::vector<NextStep>& next_steps, const std::optional<Ranking>& ranking) {
  nlohmann::ordered_json j;
  j["model"] = o.model;
  j["mode"] = o.mode == RunMode::Training ? "train" : "infer";
  j["precision"] = std::string(precision_name(o.precision));
  if (o.parallel.given()) j["layout"] = describe_layout(o.parallel);
  j["margin"] = o.gpu ? o.gpu->margin : 0.0;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const FitResult& r : results) {
    nlohmann::ordered_json row;
    row["gpu"] = r.gpu;
    row[r.axis == FitAxis::Batch ? "max_batch" : "max_seq"] = r.max_value;
    row["fits"] = r.max_value > 0;
    row["at_max"] = r.at_max ? point_json(*r.at_max, r.axis) : nlohmann::ordered_json(nullptr);
    row["next"] = r.next ? point_json(*r.next, r.axis) : nlohmann::ordered_json(nullptr);
    row["search_limited"] = r.limited;
    row["fails_below"] = r.fails_below;
    row["evaluations"] = r.evaluations;
    rows.push_back(row);
  }
  if (results.size() == 1) {
    j["gpu"] = rows[0]["gpu"];
    for (auto it = rows[0].begin(); it != rows[0].end(); ++it) j[it.key()] = it.value();
  } else {
    j["gpus"] = rows;
  }
  if (!next_steps.empty()) {
    nlohmann::ordered_json steps = nlohmann::ordered_json::array();
    for (const NextStep& n : next_steps) {
      steps.push_back({{"what", n.what}, {"change", n.change}, {"fits", n.fits},
                       {"device_total_bytes", n.device_total_bytes}, {"note", n.note}});
    }
    j["next_steps"] = steps;
  }
  if (ranking) j["ranking"] = ranking_json(*ranking);
  return j.dump(2) + "\n";
}

}  // namespace headroom
