// Reading back what `headroom watch -o FILE` wrote (measure/watch.h: sample_csv_header and
// sample_row, CSV or JSONL by the file name), for `headroom report --measured FILE`: one memory
// series over time to draw over the predicted timeline.
//
// Which series: the device with the highest reading; on it the watched process tree's memory
// when the file has it (a command or --pid was watched), else the device's used memory (which
// counts every process on the GPU). Invariants: samples are sorted by time, one per sampling
// round; a file that is not a watch file (header, column count, numbers, non-decreasing time) is
// an InputError naming the file and line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.h"

namespace headroom {

struct MeasuredSample {
  int64_t t_ms = 0;
  int64_t bytes = 0;
};

struct MeasuredSeries {
  std::string path;             // as given, for the page
  int device = 0;
  bool process = false;         // process_used_bytes (true) or device_used_bytes (false)
  int64_t device_total_bytes = 0;
  std::vector<MeasuredSample> samples;
  size_t peak = 0;              // index of the first sample with the most bytes
};

// `text` is the file's content; `path` names it in messages and picks the format (.csv, .jsonl).
Result<MeasuredSeries> parse_watch_samples(std::string_view text, const std::string& path);
Result<MeasuredSeries> read_watch_samples(const std::string& path);

}  // namespace headroom
