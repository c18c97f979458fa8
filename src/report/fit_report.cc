#include "report/fit_report.h"

#include <fmt/format.h>

#include <algorithm>

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

std::string fit_text(const EstimateOptions& o, const std::vector<FitResult>& results,
                     const std::vector<NextStep>& next_steps) {
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
  return s;
}

std::string fit_json(const EstimateOptions& o, const std::vector<FitResult>& results,
                     const std::vector<NextStep>& next_steps) {
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
  return j.dump(2) + "\n";
}

}  // namespace headroom
