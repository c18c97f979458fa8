// `headroom watch`: samples GPU memory through NVML at a fixed rate while a command runs (or a
// pid lives, or until interrupted), streams the samples to a CSV or JSONL file and summarizes the
// peaks, optionally beside the device total an `estimate --gpu --json` predicted.
//
// Invariants: sample k is due at k * interval after the start and carries that due time (t_ms),
// so the same NVML readings give byte-identical files; rows are ordered by time, then device.
// The watched memory of a process is the sum NVML reports for it and its descendants (the CUDA
// context may belong to a child of the command started, e.g. under a shell or a launcher).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "measure/nvml.h"
#include "util/error.h"

namespace headroom {

enum class SampleFormat { Csv, Jsonl };

struct WatchOptions {
  int64_t interval_ms = 100;
  std::optional<pid_t> pid;            // --pid: watch a running process
  std::vector<std::string> command;    // -- COMMAND ARGS: start it and watch it
  std::optional<int64_t> max_samples;  // stop sampling after this many (a command still runs to its end)
  // Polled between samples; true stops sampling (the CLI sets it on SIGINT/SIGTERM when no
  // command runs: a command receives the terminal's signal itself and ends the watch by exiting).
  std::function<bool()> interrupted;
};

struct WatchSample {
  int64_t t_ms = 0;
  int device = 0;
  int64_t device_used_bytes = 0;
  int64_t device_total_bytes = 0;
  std::optional<int64_t> process_used_bytes;  // only when a process is watched
  std::optional<GpuUtilization> utilization;
};

struct DevicePeak {
  int device = 0;
  std::string name;
  int64_t total_bytes = 0;
  int64_t used_peak_bytes = 0;
  int64_t used_peak_t_ms = 0;
  std::optional<int64_t> process_peak_bytes;  // the watched process tree's peak on this device
  int64_t process_peak_t_ms = 0;
};

struct WatchResult {
  std::string driver_version;
  int64_t interval_ms = 0;
  int64_t samples = 0;  // sampling rounds (one row per device each)
  int64_t last_t_ms = 0;
  bool watched_process = false;
  std::vector<DevicePeak> devices;
  std::optional<int> exit_code;  // the command's (exit code, or 128 + signal)
};

// "100ms", "1s", "0.5s": InputError unless between 1 ms and 60 s.
int64_t parse_interval_ms(const std::string& text);
// From the file name: .csv or .jsonl, else InputError.
SampleFormat sample_format_for(const std::string& path);

std::string sample_csv_header();
std::string sample_row(const WatchSample& s, SampleFormat format);

// Adds one sample to the peaks (first time reaching a peak wins).
void add_to_peaks(const WatchSample& s, WatchResult& result);

// Runs the watch: starts the command or checks the pid (InputError: unknown pid, command that
// cannot start), samples every interval, writes each row to `rows` when given (flushed, so the
// file can be followed while it grows). NVML errors while sampling are InputErrors.
Result<WatchResult> watch(const WatchOptions& options, const Nvml& nvml, std::ostream* rows, SampleFormat format);

// The predicted device total of an `estimate --gpu NAME --json` output; InputError when the
// file is not such an output.
Result<int64_t> predicted_device_total(const std::string& estimate_json_path);

// The summary printed at the end: peaks per device, the watched process's peak, the comparison
// with the prediction when given, the command's exit code.
std::string watch_summary(const WatchResult& r, std::optional<int64_t> predicted_device_total);

}  // namespace headroom
