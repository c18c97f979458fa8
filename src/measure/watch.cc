#include "measure/watch.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <thread>

#include "measure/process.h"
#include "util/file.h"
#include "util/format.h"

namespace headroom {

int64_t parse_interval_ms(const std::string& text) {
  std::string t = text;
  double scale = 0;
  if (t.size() > 2 && t.substr(t.size() - 2) == "ms") {
    scale = 1;
    t.resize(t.size() - 2);
  } else if (t.size() > 1 && t.back() == 's') {
    scale = 1000;
    t.pop_back();
  }
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (scale == 0 || t.empty() || end != t.c_str() + t.size() || !std::isfinite(v)) {
    throw InputError("--interval must be a duration like 100ms or 1s, got '" + text + "'");
  }
  double ms = v * scale;
  if (!(ms >= 1 && ms <= 60000) || ms != std::floor(ms)) {
    throw InputError("--interval must be a whole number of milliseconds from 1ms to 60s, got '" + text + "'");
  }
  return static_cast<int64_t>(ms);
}

SampleFormat sample_format_for(const std::string& path) {
  auto ends_with = [&](const std::string& suffix) {
    return path.size() > suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with(".csv")) return SampleFormat::Csv;
  if (ends_with(".jsonl")) return SampleFormat::Jsonl;
  throw InputError("-o " + path + ": the file name must end in .csv or .jsonl");
}

std::string sample_csv_header() {
  return "t_ms,device,device_used_bytes,device_total_bytes,process_used_bytes,gpu_util_pct,memory_util_pct\n";
}

std::string sample_row(const WatchSample& s, SampleFormat format) {
  if (format == SampleFormat::Csv) {
    auto opt = [](const auto& v) { return v ? std::to_string(*v) : std::string(); };
    std::optional<int> gpu, mem;
    if (s.utilization) {
      gpu = s.utilization->gpu_percent;
      mem = s.utilization->memory_percent;
    }
    return fmt::format("{},{},{},{},{},{},{}\n", s.t_ms, s.device, s.device_used_bytes, s.device_total_bytes,
                       opt(s.process_used_bytes), opt(gpu), opt(mem));
  }
  nlohmann::ordered_json j;
  j["t_ms"] = s.t_ms;
  j["device"] = s.device;
  j["device_used_bytes"] = s.device_used_bytes;
  j["device_total_bytes"] = s.device_total_bytes;
  j["process_used_bytes"] = s.process_used_bytes ? nlohmann::ordered_json(*s.process_used_bytes) : nlohmann::ordered_json();
  j["gpu_util_pct"] = s.utilization ? nlohmann::ordered_json(s.utilization->gpu_percent) : nlohmann::ordered_json();
  j["memory_util_pct"] = s.utilization ? nlohmann::ordered_json(s.utilization->memory_percent) : nlohmann::ordered_json();
  return j.dump() + "\n";
}

void add_to_peaks(const WatchSample& s, WatchResult& r) {
  auto it = std::find_if(r.devices.begin(), r.devices.end(), [&](const DevicePeak& d) { return d.device == s.device; });
  if (it == r.devices.end()) {
    DevicePeak d;
    d.device = s.device;
    d.used_peak_bytes = s.device_used_bytes;
    d.used_peak_t_ms = s.t_ms;
    r.devices.push_back(d);
    it = r.devices.end() - 1;
  } else if (s.device_used_bytes > it->used_peak_bytes) {
    it->used_peak_bytes = s.device_used_bytes;
    it->used_peak_t_ms = s.t_ms;
  }
  it->total_bytes = s.device_total_bytes;
  if (s.process_used_bytes && (!it->process_peak_bytes || *s.process_used_bytes > *it->process_peak_bytes)) {
    it->process_peak_bytes = s.process_used_bytes;
    it->process_peak_t_ms = s.t_ms;
  }
  r.last_t_ms = std::max(r.last_t_ms, s.t_ms);
}

namespace {

// The watched tree's memory on one device: NVML's per-process numbers of every pid in the tree.
// A process NVML does not list uses nothing there (0); a listed one without a number
// (NVML_VALUE_NOT_AVAILABLE) leaves the sum unknown.
std::optional<int64_t> tree_memory(const std::vector<GpuProcessMemory>& on_device, const std::vector<pid_t>& tree) {
  int64_t sum = 0;
  for (const GpuProcessMemory& p : on_device) {
    if (!std::binary_search(tree.begin(), tree.end(), static_cast<pid_t>(p.pid))) continue;
    if (!p.used_bytes) return std::nullopt;
    sum += *p.used_bytes;
  }
  return sum;
}

void sample_once(const Nvml& nvml, int64_t t_ms, std::optional<pid_t> root, WatchResult& r, std::ostream* rows,
                 SampleFormat format) {
  std::vector<pid_t> tree;
  if (root) tree = process_tree(*root);
  for (int d = 0; d < nvml.device_count(); ++d) {
    WatchSample s;
    s.t_ms = t_ms;
    s.device = d;
    GpuMemoryInfo m = nvml.memory(d);
    s.device_used_bytes = m.used_bytes;
    s.device_total_bytes = m.total_bytes;
    if (root) s.process_used_bytes = tree_memory(nvml.compute_processes(d), tree);
    s.utilization = nvml.utilization(d);
    add_to_peaks(s, r);
    if (rows != nullptr) *rows << sample_row(s, format) << std::flush;
  }
  ++r.samples;
}

}  // namespace

Result<WatchResult> watch(const WatchOptions& o, const Nvml& nvml, std::ostream* rows, SampleFormat format) {
  std::optional<pid_t> child;
  Result<WatchResult> out = capture_input_errors([&]() -> WatchResult {
    if (o.interval_ms < 1) throw InputError("--interval must be at least 1ms");
    if (o.pid && !o.command.empty()) throw InputError("give --pid or a command after --, not both");
    if (o.pid && !process_exists(*o.pid)) throw InputError("--pid " + std::to_string(*o.pid) + ": no such process");
    WatchResult r;
    r.interval_ms = o.interval_ms;
    r.driver_version = nvml.driver_version();
    for (int d = 0; d < nvml.device_count(); ++d) {
      DevicePeak p;
      p.device = d;
      p.name = nvml.device_name(d);
      p.used_peak_bytes = -1;  // the first sample sets every peak
      r.devices.push_back(p);
    }
    if (rows != nullptr && format == SampleFormat::Csv) *rows << sample_csv_header() << std::flush;
    std::optional<pid_t> root = o.pid;
    if (!o.command.empty()) root = child = spawn_command(o.command);
    r.watched_process = root.has_value();
    auto start = std::chrono::steady_clock::now();
    for (int64_t k = 0;; ++k) {
      std::this_thread::sleep_until(start + std::chrono::milliseconds(k * o.interval_ms));
      int64_t t_ms = k * o.interval_ms;
      sample_once(nvml, t_ms, root, r, rows, format);
      if (child) {
        if (std::optional<int> code = poll_child(*child)) {
          r.exit_code = code;
          child.reset();
          break;
        }
      } else if (o.pid && !process_exists(*o.pid)) {
        break;
      }
      if (o.max_samples && r.samples >= *o.max_samples) break;
      if (!child && o.interrupted && o.interrupted()) break;
    }
    if (child) {
      r.exit_code = wait_child(*child);
      child.reset();
    }
    return r;
  });
  // An NVML failure mid-run leaves the command running: wait for it rather than orphan it.
  if (child) wait_child(*child);
  return out;
}

Result<int64_t> predicted_device_total(const std::string& path) {
  return capture_input_errors([&]() -> int64_t {
    std::optional<std::string> text = read_file(path);
    if (!text) throw InputError("--compare " + path + ": cannot read the file");
    nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) throw InputError("--compare " + path + ": not a JSON object");
    auto it = j.find("device_total_bytes");
    if (it == j.end()) {
      throw InputError("--compare " + path + ": no device_total_bytes (write it with headroom estimate ... --gpu NAME --json)");
    }
    if (!it->is_number_integer() || it->get<int64_t>() <= 0) {
      throw InputError("--compare " + path + ": device_total_bytes is not a positive integer");
    }
    return it->get<int64_t>();
  });
}

std::string watch_summary(const WatchResult& r, std::optional<int64_t> predicted) {
  std::string s = fmt::format("{} samples every {} ms over {:.1f} s (NVML, driver {})\n", r.samples, r.interval_ms,
                              static_cast<double>(r.last_t_ms) / 1000.0, r.driver_version);
  std::optional<int64_t> measured;
  std::string measured_what;
  for (const DevicePeak& d : r.devices) {
    s += fmt::format("device {} ({}): peak used {} of {} at {:.1f} s\n", d.device, d.name, human_bytes(d.used_peak_bytes),
                     human_bytes(d.total_bytes), static_cast<double>(d.used_peak_t_ms) / 1000.0);
    if (r.watched_process) {
      if (d.process_peak_bytes) {
        s += fmt::format("  watched process peak: {} ({} bytes) at {:.1f} s\n", human_bytes(*d.process_peak_bytes),
                         with_commas(*d.process_peak_bytes), static_cast<double>(d.process_peak_t_ms) / 1000.0);
        if (!measured || *d.process_peak_bytes > *measured) {
          measured = d.process_peak_bytes;
          measured_what = "watched process peak";
        }
      } else {
        s += "  watched process peak: not reported by NVML\n";
      }
    } else if (!measured || d.used_peak_bytes > *measured) {
      measured = d.used_peak_bytes;
      measured_what = "device used peak";
    }
  }
  if (predicted) {
    if (measured && *measured > 0) {
      double err = static_cast<double>(*predicted - *measured) / static_cast<double>(*measured);
      s += fmt::format("predicted device total {} ({} bytes), measured {} {}: prediction {:+.1f}%\n",
                       human_bytes(*predicted), with_commas(*predicted), measured_what, human_bytes(*measured),
                       100.0 * err);
    } else {
      s += fmt::format("predicted device total {}; nothing measured to compare with\n", human_bytes(*predicted));
    }
  }
  if (r.exit_code) s += fmt::format("command exited with code {}\n", *r.exit_code);
  return s;
}

}  // namespace headroom
