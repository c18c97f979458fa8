#include "measure/watch_samples.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "measure/watch.h"
#include "util/file.h"

namespace headroom {
namespace {

struct Row {
  int64_t t_ms = 0;
  int device = 0;
  int64_t used = 0, total = 0;
  std::optional<int64_t> process;
};

int64_t to_int(const std::string& s, const std::string& where, const char* column) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (s.empty() || used != s.size() || v < 0) throw InputError(fmt::format("{}: {} is not a whole number >= 0: '{}'", where, column, s));
  return v;
}

Row csv_row(const std::string& line, const std::string& where) {
  std::vector<std::string> f;
  std::stringstream ss(line);
  for (std::string cell; std::getline(ss, cell, ',');) f.push_back(cell);
  if (!line.empty() && line.back() == ',') f.emplace_back();
  if (f.size() != 7) throw InputError(fmt::format("{}: expected 7 columns as `headroom watch` writes, found {}", where, f.size()));
  Row r;
  r.t_ms = to_int(f[0], where, "t_ms");
  r.device = static_cast<int>(to_int(f[1], where, "device"));
  r.used = to_int(f[2], where, "device_used_bytes");
  r.total = to_int(f[3], where, "device_total_bytes");
  if (!f[4].empty()) r.process = to_int(f[4], where, "process_used_bytes");
  return r;
}

Row jsonl_row(const std::string& line, const std::string& where) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw InputError(where + ": not a JSON object");
  auto get = [&](const char* key) -> int64_t {
    if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() < 0) {
      throw InputError(fmt::format("{}: {} must be a whole number >= 0", where, key));
    }
    return j[key].get<int64_t>();
  };
  Row r;
  r.t_ms = get("t_ms");
  r.device = static_cast<int>(get("device"));
  r.used = get("device_used_bytes");
  r.total = get("device_total_bytes");
  if (j.contains("process_used_bytes") && !j["process_used_bytes"].is_null()) r.process = get("process_used_bytes");
  return r;
}

}  // namespace

Result<MeasuredSeries> parse_watch_samples(std::string_view text, const std::string& path) {
  return capture_input_errors([&]() -> MeasuredSeries {
    const SampleFormat format = sample_format_for(path);
    std::vector<Row> rows;
    std::stringstream ss{std::string(text)};
    std::string line;
    int64_t n = 0;
    const std::string header = sample_csv_header();
    while (std::getline(ss, line)) {
      ++n;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      const std::string where = fmt::format("--measured {} line {}", path, n);
      if (format == SampleFormat::Csv && n == 1) {
        if (line + "\n" != header) throw InputError(where + ": not a `headroom watch` CSV (expected the header " + header.substr(0, header.size() - 1) + ")");
        continue;
      }
      if (line.empty()) continue;
      Row r = format == SampleFormat::Csv ? csv_row(line, where) : jsonl_row(line, where);
      if (!rows.empty() && r.t_ms < rows.back().t_ms) throw InputError(where + ": t_ms goes back in time");
      rows.push_back(r);
    }
    if (rows.empty()) throw InputError("--measured " + path + ": no samples");
    // The device with the highest reading (ties: the lowest index), and its series.
    std::map<int, int64_t> most;
    bool any_process = false;
    for (const Row& r : rows) {
      most[r.device] = std::max(most[r.device], r.process.value_or(r.used));
      any_process = any_process || r.process.has_value();
    }
    MeasuredSeries m;
    m.path = path;
    m.process = any_process;
    m.device = most.begin()->first;
    for (const auto& [device, bytes] : most) {
      if (bytes > most[m.device]) m.device = device;
    }
    for (const Row& r : rows) {
      if (r.device != m.device) continue;
      // A watched process not on the GPU yet (or gone) reads as no row value: 0 bytes.
      m.samples.push_back({r.t_ms, any_process ? r.process.value_or(0) : r.used});
      m.device_total_bytes = r.total;
    }
    for (size_t i = 0; i < m.samples.size(); ++i) {
      if (m.samples[i].bytes > m.samples[m.peak].bytes) m.peak = i;
    }
    return m;
  });
}

Result<MeasuredSeries> read_watch_samples(const std::string& path) {
  Result<std::string> text = read_input_file(path, "watch file", int64_t{1} << 30);
  if (!text.ok()) return Result<MeasuredSeries>::failure(text.error());
  return parse_watch_samples(text.value(), path);
}

}  // namespace headroom
