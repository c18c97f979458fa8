#include "sim/device_catalog.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "sim/gpus_json.h"  // generated from data/gpus.json
#include "util/error.h"
#include "util/file.h"
#include "util/format.h"
#include "util/json_input.h"
#include "util/suggest.h"

namespace headroom {

namespace {

using nlohmann::json;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

const json& field(const json& entry, const char* key, std::string_view where) {
  auto it = entry.find(key);
  if (it == entry.end()) throw InputError(fmt::format("{}: missing field '{}'", where, key));
  return *it;
}

// Every number of a catalog entry (GB/s, TFLOPS, MiB, a PCIe generation or lane count) is far
// below 1e9; the bound keeps products and casts to int finite and defined.
constexpr double kMaxCatalogNumber = 1e9;

double number(const json& entry, const char* key, std::string_view where) {
  const json& v = field(entry, key, where);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0 ||
      v.get<double>() > kMaxCatalogNumber) {
    throw InputError(fmt::format("{}: '{}' must be a non-negative number up to 1e9", where, key));
  }
  return v.get<double>();
}

double positive_number(const json& entry, const char* key, std::string_view where) {
  double v = number(entry, key, where);
  if (v <= 0) throw InputError(fmt::format("{}: '{}' must be positive", where, key));
  return v;
}

int whole_number(const json& entry, const char* key, std::string_view where) {
  double v = positive_number(entry, key, where);
  if (v != std::floor(v)) throw InputError(fmt::format("{}: '{}' must be a whole number", where, key));
  return static_cast<int>(v);
}

std::optional<double> optional_number(const json& entry, const char* key, std::string_view where) {
  const json& v = field(entry, key, where);
  if (v.is_null()) return std::nullopt;
  return number(entry, key, where);
}

std::string text(const json& entry, const char* key, std::string_view where) {
  const json& v = field(entry, key, where);
  if (!v.is_string()) throw InputError(fmt::format("{}: '{}' must be a string", where, key));
  return v.get<std::string>();
}

GpuSpec parse_entry(const json& e, std::string_view origin, size_t index) {
  if (!e.is_object()) throw InputError(fmt::format("{}: gpus[{}] is not an object", origin, index));
  GpuSpec g;
  std::string where = fmt::format("{}: gpus[{}]", origin, index);
  g.name = text(e, "name", where);
  where = fmt::format("{}: GPU '{}'", origin, g.name);
  const json& aliases = field(e, "aliases", where);
  if (!aliases.is_array()) throw InputError(where + ": 'aliases' must be an array of strings");
  for (const json& a : aliases) {
    if (!a.is_string()) throw InputError(where + ": 'aliases' must be an array of strings");
    g.aliases.push_back(a.get<std::string>());
  }
  g.architecture = text(e, "architecture", where);
  static const std::array<std::string_view, 6> kArchitectures = {"volta", "turing", "ampere",
                                                                 "ada",   "hopper", "blackwell"};
  if (std::find(kArchitectures.begin(), kArchitectures.end(), g.architecture) ==
      kArchitectures.end()) {
    throw InputError(fmt::format("{}: unknown architecture '{}'", where, g.architecture));
  }
  g.multiprocessors = whole_number(e, "multiprocessors", where);
  g.max_threads_per_multiprocessor = whole_number(e, "max_threads_per_multiprocessor", where);
  const double mib = number(e, "memory_mib", where);
  if (mib <= 0 || mib != static_cast<double>(static_cast<int64_t>(mib)) || mib > (1LL << 40)) {
    throw InputError(fmt::format("{}: 'memory_mib' must be a positive whole number", where));
  }
  g.memory_bytes = static_cast<int64_t>(mib) * (1LL << 20);
  g.memory_nominal = text(e, "memory_nominal", where);
  g.memory_bandwidth_bytes_per_s = positive_number(e, "memory_bandwidth_gb_per_s", where) * 1e9;
  g.fp32_flops = positive_number(e, "fp32_tflops", where) * 1e12;
  auto tflops = [&](const char* key) -> std::optional<double> {
    std::optional<double> v = optional_number(e, key, where);
    if (v) *v *= 1e12;
    return v;
  };
  g.tf32_flops = tflops("tf32_tflops");
  g.fp16_flops = tflops("fp16_tflops");
  g.bf16_flops = tflops("bf16_tflops");
  g.fp8_flops = tflops("fp8_tflops");
  const json& link = field(e, "host_link", where);
  if (!link.is_object()) throw InputError(where + ": 'host_link' must be an object");
  g.host_link.kind = text(link, "kind", where + " host_link");
  if (g.host_link.kind == "pcie") {
    g.host_link.generation = whole_number(link, "generation", where + " host_link");
    g.host_link.lanes = whole_number(link, "lanes", where + " host_link");
  } else if (g.host_link.kind != "nvlink-c2c") {
    throw InputError(fmt::format("{}: host_link kind must be 'pcie' or 'nvlink-c2c', got '{}'",
                                 where, g.host_link.kind));
  }
  g.host_link.bandwidth_bytes_per_s =
      positive_number(link, "bandwidth_gb_per_s", where + " host_link") * 1e9;
  if (auto gl = e.find("gpu_link"); gl != e.end()) {
    if (!gl->is_object()) throw InputError(where + ": 'gpu_link' must be an object");
    if (text(*gl, "kind", where + " gpu_link") != "nvlink") throw InputError(where + ": gpu_link kind must be 'nvlink'");
    g.gpu_link_bytes_per_s = positive_number(*gl, "bandwidth_gb_per_s", where + " gpu_link") * 1e9;
  }
  g.source = text(e, "source", where);
  if (g.source.empty()) throw InputError(where + ": 'source' must name the datasheet");
  if (auto n = e.find("notes"); n != e.end() && n->is_string()) g.notes = n->get<std::string>();
  return g;
}

}  // namespace

std::string normalize_gpu_name(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c == ' ' || c == '-' || c == '_' || c == '\t') continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  for (std::string_view prefix : {"nvidia", "tesla", "geforce"}) {
    if (out.size() > prefix.size() && out.compare(0, prefix.size(), prefix) == 0) {
      out.erase(0, prefix.size());
    }
  }
  return out;
}

DeviceCatalog DeviceCatalog::from_json(std::string_view text_in, std::string_view origin) {
  json doc = parse_json_input(text_in, std::string(origin));
  if (!doc.is_object() || !doc.contains("gpus") || !doc["gpus"].is_array()) {
    throw InputError(fmt::format("{}: expected an object with a 'gpus' array", origin));
  }
  DeviceCatalog cat;
  const json& gpus = doc["gpus"];
  for (size_t i = 0; i < gpus.size(); ++i) cat.gpus_.push_back(parse_entry(gpus[i], origin, i));
  for (size_t i = 0; i < cat.gpus_.size(); ++i) {
    const GpuSpec& g = cat.gpus_[i];
    std::vector<std::string> keys = {normalize_gpu_name(g.name)};
    for (const std::string& a : g.aliases) keys.push_back(normalize_gpu_name(a));
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    for (std::string& k : keys) {
      if (k.empty())
        throw InputError(fmt::format("{}: GPU '{}' has an empty name", origin, g.name));
      cat.index_.push_back({std::move(k), i});
    }
  }
  std::sort(cat.index_.begin(), cat.index_.end());
  for (size_t i = 1; i < cat.index_.size(); ++i) {
    if (cat.index_[i].first == cat.index_[i - 1].first) {
      throw InputError(fmt::format("{}: '{}' names both '{}' and '{}'", origin, cat.index_[i].first,
                                   cat.gpus_[cat.index_[i - 1].second].name,
                                   cat.gpus_[cat.index_[i].second].name));
    }
  }
  return cat;
}

DeviceCatalog DeviceCatalog::from_file(const std::string& path) {
  Result<std::string> text = read_input_file(path, "GPU catalog", kMaxJsonFileBytes);
  if (!text.ok()) throw InputError(text.error());
  return from_json(text.value(), path);  // InputError keeps names from the file on one line
}

const DeviceCatalog& DeviceCatalog::builtin() {
  static const DeviceCatalog catalog = from_json(generated::kGpusJson, "data/gpus.json");
  return catalog;
}

const GpuSpec* DeviceCatalog::try_find(std::string_view name) const {
  const std::string key = normalize_gpu_name(name);
  auto it =
      std::lower_bound(index_.begin(), index_.end(), key,
                       [](const auto& entry, const std::string& k) { return entry.first < k; });
  if (it == index_.end() || it->first != key) return nullptr;
  return &gpus_[it->second];
}

const GpuSpec& DeviceCatalog::find(std::string_view name) const {
  if (const GpuSpec* g = try_find(name)) return *g;
  // Suggestions are made on lookup keys (so "a100 80" is near "a100sxm480gb") and shown as the
  // canonical names they belong to.
  std::vector<std::string> keys;
  for (const auto& [k, i] : index_) keys.push_back(k);
  const std::string near = suggestion_suffix(normalize_gpu_name(name), keys);
  std::vector<std::string> names;
  for (size_t pos = near.find('\''); pos != std::string::npos;) {
    size_t end = near.find('\'', pos + 1);
    if (end == std::string::npos) break;
    if (const GpuSpec* g = try_find(near.substr(pos + 1, end - pos - 1))) {
      if (std::find(names.begin(), names.end(), g->name) == names.end()) names.push_back(g->name);
    }
    pos = near.find('\'', end + 1);
  }
  std::string suffix;
  for (size_t i = 0; i < names.size(); ++i) {
    suffix += (i == 0 ? " (did you mean '" : " or '") + names[i] + "'";
  }
  if (!suffix.empty()) suffix += "?)";
  std::string all;
  for (const GpuSpec& g : gpus_) all += (all.empty() ? "" : ", ") + g.name;
  throw InputError(fmt::format("unknown GPU '{}'{}; known GPUs: {}", name, suffix, all));
}

int64_t parse_memory_size(std::string_view input) {
  auto fail = [&]() -> InputError {
    return InputError(fmt::format(
        "cannot read memory size '{}': expected a number and a unit such as 24GiB, 80GB or "
        "16000MiB (B, KB, MB, GB, TB = powers of 1000; KiB, MiB, GiB, TiB = powers of 1024)",
        input));
  };
  auto too_large = [&]() -> InputError {
    return InputError(fmt::format("memory size '{}' is too large", input));
  };
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  size_t i = 0;
  auto skip_spaces = [&] {
    while (i < input.size() && std::isspace(static_cast<unsigned char>(input[i]))) ++i;
  };
  skip_spaces();
  // digits [. digits]: the whole part, and the fraction as frac / scale.
  int64_t whole = 0, frac = 0, scale = 1;
  size_t digits = 0;
  while (i < input.size() && std::isdigit(static_cast<unsigned char>(input[i]))) {
    if (whole > (kMax - 9) / 10) throw too_large();
    whole = whole * 10 + (input[i] - '0');
    ++i;
    ++digits;
  }
  if (i < input.size() && input[i] == '.') {
    ++i;
    while (i < input.size() && std::isdigit(static_cast<unsigned char>(input[i]))) {
      if (scale < 1000000000000LL) {  // digits past 1e-12 of a unit cannot change a byte count
        frac = frac * 10 + (input[i] - '0');
        scale *= 10;
      }
      ++i;
      ++digits;
    }
  }
  if (digits == 0) throw fail();
  skip_spaces();
  std::string unit = lower(input.substr(i));
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.back()))) unit.pop_back();
  static const std::array<std::pair<std::string_view, int64_t>, 10> kUnits = {{
      {"", 1},
      {"b", 1},
      {"kb", 1000LL},
      {"mb", 1000LL * 1000},
      {"gb", 1000LL * 1000 * 1000},
      {"tb", 1000LL * 1000 * 1000 * 1000},
      {"kib", 1LL << 10},
      {"mib", 1LL << 20},
      {"gib", 1LL << 30},
      {"tib", 1LL << 40},
  }};
  // A bare number is ambiguous (`--gpu-memory 24` meant 24 GiB, not 24 bytes); only 0 needs no unit.
  if (unit.empty() && (whole != 0 || frac != 0)) {
    throw InputError(fmt::format("memory size '{}' has no unit: write e.g. {}GiB or {}GB (B, KB, MB, GB, TB = "
                                 "powers of 1000; KiB, MiB, GiB, TiB = powers of 1024)",
                                 input, whole, whole));
  }
  int64_t multiplier = -1;
  for (const auto& [name, m] : kUnits) {
    if (unit == name) multiplier = m;
  }
  if (multiplier < 0) throw fail();
  if (whole > kMax / multiplier) throw too_large();
  // frac / scale of a unit, rounded to the nearest byte; frac < scale <= 1e12 and multiplier
  // <= 2^40, so the product needs more than 64 bits: long double keeps it exact enough
  // (the result is below one unit).
  const long double part = static_cast<long double>(frac) * static_cast<long double>(multiplier) /
                           static_cast<long double>(scale);
  const int64_t rounded = static_cast<int64_t>(part + 0.5L);
  if (whole * multiplier > kMax - rounded) throw too_large();
  return whole * multiplier + rounded;
}

}  // namespace headroom
