#include "pack/workload.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "sim/device_catalog.h"
#include "util/file.h"
#include "util/format.h"
#include "util/json_input.h"

namespace headroom {
namespace {

using nlohmann::json;

void reject_unknown(const json& obj, const std::set<std::string>& known, const std::string& where) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (known.count(it.key()) == 0) throw InputError(fmt::format("{}: unknown key '{}'", where, it.key()));
  }
}

// Every number of a workload (ms, us, GB/s, requests per second, a fraction) is at most 1e9:
// 1e9 ms is the longest window (1e6 s), and the bound keeps every time in int64 nanoseconds.
constexpr double kMaxWorkloadNumber = 1e9;

double positive(const json& obj, const char* key, const std::string& where, bool allow_zero = false) {
  const json& v = obj.at(key);
  double d = v.is_number() ? v.get<double>() : -1;
  if (!v.is_number() || !std::isfinite(d) || d < 0 || (!allow_zero && d == 0) || d > kMaxWorkloadNumber) {
    throw InputError(fmt::format("{}: '{}' must be a {} number up to 1e9", where, key,
                                 allow_zero ? "non-negative" : "positive"));
  }
  return d;
}

std::optional<double> opt_positive(const json& obj, const char* key, const std::string& where, bool allow_zero = false) {
  if (!obj.contains(key)) return std::nullopt;
  return positive(obj, key, where, allow_zero);
}

int64_t size_field(const json& obj, const char* key, const std::string& where) {
  const json& v = obj.at(key);
  if (v.is_string()) {
    try {
      return parse_memory_size(v.get<std::string>());
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: '{}': {}", where, key, e.what()));
    }
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return v.get<int64_t>();
  throw InputError(fmt::format("{}: '{}' must be a size in bytes or a string such as \"16GiB\"", where, key));
}

WorkloadModel parse_model(const json& m, const std::string& where) {
  if (!m.is_object()) throw InputError(where + " must be an object");
  reject_unknown(m, {"model", "rate", "fps", "phase_ms", "arrivals_ms", "batch", "latency_ms", "exec_ms"}, where);
  WorkloadModel w;
  if (!m.contains("model") || !m.at("model").is_string()) throw InputError(where + ": 'model' (a string) is required");
  w.model = m.at("model").get<std::string>();
  std::string here = where + " (" + w.model + ")";
  w.rate = opt_positive(m, "rate", here);
  w.fps = opt_positive(m, "fps", here);
  if (m.contains("phase_ms")) w.phase_s = positive(m, "phase_ms", here, true) * 1e-3;
  if (m.contains("arrivals_ms")) {
    const json& a = m.at("arrivals_ms");
    if (!a.is_array()) throw InputError(here + ": 'arrivals_ms' must be an array of times");
    std::vector<double> times;
    for (const json& t : a) {
      if (!t.is_number() || t.get<double>() < 0 || !std::isfinite(t.get<double>()) ||
          t.get<double>() > kMaxWorkloadNumber) {
        throw InputError(here + ": 'arrivals_ms' must hold non-negative numbers up to 1e9");
      }
      if (!times.empty() && t.get<double>() * 1e-3 < times.back()) throw InputError(here + ": 'arrivals_ms' must be sorted");
      times.push_back(t.get<double>() * 1e-3);
    }
    w.arrivals_s = std::move(times);
  }
  int sources = (w.rate ? 1 : 0) + (w.fps ? 1 : 0) + (w.arrivals_s ? 1 : 0);
  if (sources != 1) throw InputError(here + ": give exactly one of 'rate', 'fps' or 'arrivals_ms'");
  if (m.contains("batch")) {
    const json& b = m.at("batch");
    if (!b.is_number_integer() || b.get<int64_t>() <= 0) throw InputError(here + ": 'batch' must be a positive integer");
    w.batch = b.get<int64_t>();
  }
  if (!m.contains("latency_ms")) throw InputError(here + ": 'latency_ms' (the latency target) is required");
  w.latency_target_s = positive(m, "latency_ms", here) * 1e-3;
  if (auto e = opt_positive(m, "exec_ms", here)) w.exec_s = *e * 1e-3;
  return w;
}

}  // namespace

Result<Workload> parse_workload(std::string_view text, const std::string& origin) {
  // Keys and model names are the file's bytes: InputError keeps a message quoting one on one line
  // (found by workload_json_fuzz: a key holding "\n").
  return capture_input_errors([&]() -> Workload {
    json j = parse_json_input(text, origin, /*allow_comments=*/true);
    if (!j.is_object()) throw InputError(origin + ": the workload must be a JSON object");
    reject_unknown(j, {"window_s", "seed", "gpu_memory", "weights_capacity", "exec_efficiency", "load", "models"}, origin);
    Workload w;
    w.origin = origin;
    if (!j.contains("window_s")) throw InputError(origin + ": 'window_s' is required");
    w.window_s = positive(j, "window_s", origin);
    if (w.window_s > 1e6) throw InputError(origin + ": 'window_s' must be at most 1e6 seconds");
    if (j.contains("seed")) {
      const json& s = j.at("seed");
      if (!s.is_number_unsigned()) throw InputError(origin + ": 'seed' must be a non-negative integer");
      w.seed = s.get<uint64_t>();
    }
    if (j.contains("gpu_memory")) w.gpu_memory = size_field(j, "gpu_memory", origin);
    if (j.contains("weights_capacity")) w.weights_capacity = size_field(j, "weights_capacity", origin);
    if (auto e = opt_positive(j, "exec_efficiency", origin)) {
      if (*e > 1) throw InputError(origin + ": 'exec_efficiency' must be in (0, 1]");
      w.exec_efficiency = e;
    }
    if (j.contains("load")) {
      const json& l = j.at("load");
      std::string where = origin + ": load";
      if (!l.is_object()) throw InputError(where + " must be an object");
      reject_unknown(l, {"fixed_ms", "per_tensor_us", "bandwidth_gb_per_s", "pinned", "pageable_factor"}, where);
      if (auto v = opt_positive(l, "fixed_ms", where, true)) w.load.fixed_s = *v * 1e-3;
      if (auto v = opt_positive(l, "per_tensor_us", where, true)) w.load.per_tensor_s = *v * 1e-6;
      if (auto v = opt_positive(l, "bandwidth_gb_per_s", where)) w.load.bandwidth_bytes_per_s = *v * 1e9;
      if (auto v = opt_positive(l, "pageable_factor", where)) {
        if (*v > 1) throw InputError(where + ": 'pageable_factor' must be in (0, 1]");
        w.load.pageable_factor = v;
      }
      if (l.contains("pinned")) {
        if (!l.at("pinned").is_boolean()) throw InputError(where + ": 'pinned' must be true or false");
        w.load.pinned = l.at("pinned").get<bool>();
      }
    }
    if (!j.contains("models") || !j.at("models").is_array() || j.at("models").empty()) {
      throw InputError(origin + ": 'models' must be a non-empty array");
    }
    std::set<std::string> names;
    for (size_t i = 0; i < j.at("models").size(); ++i) {
      WorkloadModel m = parse_model(j.at("models")[i], fmt::format("{}: models[{}]", origin, i));
      if (!names.insert(m.model).second) throw InputError(fmt::format("{}: model '{}' appears twice", origin, m.model));
      w.models.push_back(std::move(m));
    }
    return w;
  });
}

Result<Workload> read_workload_file(const std::string& path) {
  Result<std::string> text = read_input_file(path, "workload file", kMaxJsonFileBytes);
  if (!text.ok()) return Result<Workload>::failure(text.error());
  return parse_workload(text.value(), path);
}

}  // namespace headroom
