// NVML (the NVIDIA Management Library behind nvidia-smi), loaded at run time with dlopen so that
// headroom builds and runs on machines without NVIDIA packages. Only the handful of calls `watch`
// needs are declared here, by hand, after NVIDIA's documented C API (NVML API Reference,
// https://docs.nvidia.com/deploy/nvml-api/): nvmlInit_v2, nvmlShutdown, nvmlDeviceGetCount_v2,
// nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetName, nvmlDeviceGetMemoryInfo,
// nvmlDeviceGetComputeRunningProcesses(_v3, _v2, v1), nvmlDeviceGetUtilizationRates,
// nvmlSystemGetDriverVersion.
//
// Invariants: a loaded Nvml has called nvmlInit_v2 successfully and calls nvmlShutdown once when
// destroyed; every failure of the library (missing, no GPU, call error) is an InputError whose
// one line names the call and NVML's return code.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "util/error.h"

namespace headroom {

// HEADROOM_NVML_LIBRARY overrides the library path (the tests point it at a fake NVML).
inline constexpr const char* kNvmlLibraryEnv = "HEADROOM_NVML_LIBRARY";
inline constexpr const char* kNvmlDefaultLibrary = "libnvidia-ml.so.1";

struct GpuProcessMemory {
  uint32_t pid = 0;
  std::optional<int64_t> used_bytes;  // unset: NVML_VALUE_NOT_AVAILABLE (e.g. no permission)
};

struct GpuMemoryInfo {
  int64_t total_bytes = 0;
  int64_t used_bytes = 0;
};

struct GpuUtilization {
  int gpu_percent = 0;     // share of the last sample period a kernel was running
  int memory_percent = 0;  // share of it device memory was being read or written
};

class Nvml {
 public:
  // Loads the library (`path`, or HEADROOM_NVML_LIBRARY, or libnvidia-ml.so.1) and initializes
  // it. InputError when it cannot be loaded, lacks a symbol, or finds no GPU.
  static std::unique_ptr<Nvml> load(const std::string& path = "");
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  int device_count() const { return device_count_; }
  std::string driver_version() const;
  std::string device_name(int index) const;
  GpuMemoryInfo memory(int index) const;
  // Compute processes on the device, sorted by pid.
  std::vector<GpuProcessMemory> compute_processes(int index) const;
  // Unset when the device does not support utilization counters.
  std::optional<GpuUtilization> utilization(int index) const;

  struct Api;  // the resolved function pointers (nvml.cc)

 private:
  Nvml() = default;
  void* handle_ = nullptr;
  bool initialized_ = false;
  std::unique_ptr<Api> api_;
  int device_count_ = 0;
};

}  // namespace headroom
