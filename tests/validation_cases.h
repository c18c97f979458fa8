// The validation harness's case records (validation/cases.py, as written into measured.json and
// measured_cuda.json) turned into estimate options, and the CUDA measurements
// (validation/cuda_run.py) checked against headroom's device prediction.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "estimate/estimate.h"

namespace headroom::testing {

// The CLI mapping of validation/README.md ("Mapping to the headroom CLI") for `device`.
EstimateOptions options_for_case(const nlohmann::json& c, const std::string& device);

struct CudaMeasuredCase {
  std::string id;
  EstimateOptions options;            // device cuda, with the measured GPU
  std::optional<std::string> skipped; // did not fit (out of memory): nothing to compare
  int64_t allocated_peak_bytes = 0;   // torch.cuda.max_memory_allocated
  int64_t reserved_peak_bytes = 0;    // torch.cuda.max_memory_reserved
  std::optional<int64_t> device_total_bytes;  // NVML's used memory of the process
};

struct CudaMeasurements {
  std::string gpu_name;
  int64_t gpu_memory_bytes = 0;
  std::vector<CudaMeasuredCase> cases;
};

// Reads a measured_cuda.json document; a missing or mistyped field is an InputError naming it.
Result<CudaMeasurements> parse_cuda_measurements(const nlohmann::json& doc);

// The bounds of issue 13 / docs/gpu.md: allocated within 1%, reserved within 3%, device total
// within 5%.
struct CudaBounds {
  double allocated = 0.01;
  double reserved = 0.03;
  double device_total = 0.05;
};

struct MetricCheck {
  std::string metric;  // "allocated", "reserved", "device total"
  int64_t measured = 0;
  int64_t predicted = 0;
  double error = 0;    // (predicted - measured) / measured
  double bound = 0;
  bool ok = false;
};

// One check per metric that was measured (device total only when NVML saw the process).
std::vector<MetricCheck> check_cuda_case(const CudaMeasuredCase& m, const DeviceMemory& predicted,
                                         const CudaBounds& bounds = {});

}  // namespace headroom::testing
