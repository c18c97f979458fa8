#include "measure/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace headroom {

namespace {

// Types and constants of nvml.h, as the NVML API Reference documents them.
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
constexpr unsigned long long NVML_VALUE_NOT_AVAILABLE = ULLONG_MAX;
constexpr unsigned NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96;
constexpr unsigned NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80;

struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlUtilization_t {
  unsigned int gpu, memory;
};
// nvmlProcessInfo_t as taken by nvmlDeviceGetComputeRunningProcesses_v3, and
// nvmlProcessInfo_v2_t of the _v2 call: the same 24-byte layout.
struct nvmlProcessInfo_v2_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
// nvmlProcessInfo_v1_t of the unversioned call (drivers before R470).
struct nvmlProcessInfo_v1_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
};

}  // namespace

struct Nvml::Api {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;  // optional
  nvmlReturn_t (*device_count)(unsigned*) = nullptr;
  nvmlReturn_t (*handle_by_index)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*driver_version)(char*, unsigned) = nullptr;
  // One of the three, the newest the library has (processes_v2_layout: _v3 or _v2).
  nvmlReturn_t (*processes)(nvmlDevice_t, unsigned*, void*) = nullptr;
  bool processes_v2_layout = true;
};

namespace {

template <typename Fn>
Fn symbol(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

}  // namespace

std::unique_ptr<Nvml> Nvml::load(const std::string& path) {
  std::string lib = path;
  if (lib.empty()) {
    const char* env = std::getenv(kNvmlLibraryEnv);
    lib = env != nullptr && *env != '\0' ? env : kNvmlDefaultLibrary;
  }
  void* handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    throw InputError("no NVML: cannot load " + lib + " (is the NVIDIA driver installed?)");
  }
  std::unique_ptr<Nvml> n(new Nvml());
  n->handle_ = handle;
  n->api_ = std::make_unique<Api>();
  Api& a = *n->api_;
  auto need = [&](auto& fn, const char* name) {
    fn = symbol<std::remove_reference_t<decltype(fn)>>(handle, name);
    if (fn == nullptr) throw InputError("NVML library " + lib + " has no " + name);
  };
  need(a.init, "nvmlInit_v2");
  need(a.shutdown, "nvmlShutdown");
  need(a.device_count, "nvmlDeviceGetCount_v2");
  need(a.handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
  need(a.name, "nvmlDeviceGetName");
  need(a.memory, "nvmlDeviceGetMemoryInfo");
  need(a.utilization, "nvmlDeviceGetUtilizationRates");
  need(a.driver_version, "nvmlSystemGetDriverVersion");
  a.error_string = symbol<const char* (*)(nvmlReturn_t)>(handle, "nvmlErrorString");
  using ProcessesFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*, void*);
  a.processes = symbol<ProcessesFn>(handle, "nvmlDeviceGetComputeRunningProcesses_v3");
  if (a.processes == nullptr) a.processes = symbol<ProcessesFn>(handle, "nvmlDeviceGetComputeRunningProcesses_v2");
  if (a.processes == nullptr) {
    a.processes_v2_layout = false;
    need(a.processes, "nvmlDeviceGetComputeRunningProcesses");
  }
  nvmlReturn_t r = a.init();
  if (r != NVML_SUCCESS) throw InputError("no GPU: nvmlInit_v2 failed with NVML error " + std::to_string(r));
  n->initialized_ = true;  // from here the destructor shuts NVML down
  unsigned count = 0;
  r = a.device_count(&count);
  if (r != NVML_SUCCESS) throw InputError("no GPU: nvmlDeviceGetCount_v2 failed with NVML error " + std::to_string(r));
  if (count == 0) throw InputError("no GPU: NVML sees no device");
  n->device_count_ = static_cast<int>(std::min<unsigned>(count, INT_MAX));
  return n;
}

Nvml::~Nvml() {
  if (initialized_) api_->shutdown();
  if (handle_ != nullptr) dlclose(handle_);
}

namespace {

[[noreturn]] void nvml_failed(const Nvml::Api& a, const char* call, nvmlReturn_t r) {
  std::string why = a.error_string != nullptr ? a.error_string(r) : "";
  throw InputError(std::string(call) + " failed with NVML error " + std::to_string(r) + (why.empty() ? "" : " (" + why + ")"));
}

nvmlDevice_t device(const Nvml::Api& a, int index) {
  nvmlDevice_t d = nullptr;
  nvmlReturn_t r = a.handle_by_index(static_cast<unsigned>(index), &d);
  if (r != NVML_SUCCESS) nvml_failed(a, "nvmlDeviceGetHandleByIndex_v2", r);
  return d;
}

}  // namespace

std::string Nvml::driver_version() const {
  char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  nvmlReturn_t r = api_->driver_version(buf, sizeof buf);
  if (r != NVML_SUCCESS) nvml_failed(*api_, "nvmlSystemGetDriverVersion", r);
  return std::string(buf, strnlen(buf, sizeof buf));
}

std::string Nvml::device_name(int index) const {
  char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  nvmlReturn_t r = api_->name(device(*api_, index), buf, sizeof buf);
  if (r != NVML_SUCCESS) nvml_failed(*api_, "nvmlDeviceGetName", r);
  return std::string(buf, strnlen(buf, sizeof buf));
}

GpuMemoryInfo Nvml::memory(int index) const {
  nvmlMemory_t m{};
  nvmlReturn_t r = api_->memory(device(*api_, index), &m);
  if (r != NVML_SUCCESS) nvml_failed(*api_, "nvmlDeviceGetMemoryInfo", r);
  auto clamp = [](unsigned long long v) { return static_cast<int64_t>(std::min<unsigned long long>(v, INT64_MAX)); };
  return GpuMemoryInfo{clamp(m.total), clamp(m.used)};
}

std::optional<GpuUtilization> Nvml::utilization(int index) const {
  nvmlUtilization_t u{};
  nvmlReturn_t r = api_->utilization(device(*api_, index), &u);
  if (r == NVML_ERROR_NOT_SUPPORTED) return std::nullopt;
  if (r != NVML_SUCCESS) nvml_failed(*api_, "nvmlDeviceGetUtilizationRates", r);
  return GpuUtilization{static_cast<int>(u.gpu), static_cast<int>(u.memory)};
}

namespace {

template <typename Info>
std::vector<GpuProcessMemory> read_processes(const Nvml::Api& a, nvmlDevice_t d) {
  // The documented protocol: ask with a buffer; INSUFFICIENT_SIZE returns the count needed.
  // Processes can start between two calls, so the buffer has slack and the call is retried.
  std::vector<Info> infos(8);
  for (int attempt = 0; attempt < 8; ++attempt) {
    unsigned count = static_cast<unsigned>(infos.size());
    nvmlReturn_t r = a.processes(d, &count, infos.data());
    if (r == NVML_SUCCESS) {
      std::vector<GpuProcessMemory> out;
      for (unsigned i = 0; i < count && i < infos.size(); ++i) {
        GpuProcessMemory p;
        p.pid = infos[i].pid;
        if (infos[i].usedGpuMemory != NVML_VALUE_NOT_AVAILABLE) {
          p.used_bytes = static_cast<int64_t>(std::min<unsigned long long>(infos[i].usedGpuMemory, INT64_MAX));
        }
        out.push_back(p);
      }
      std::sort(out.begin(), out.end(), [](const GpuProcessMemory& x, const GpuProcessMemory& y) { return x.pid < y.pid; });
      return out;
    }
    if (r == NVML_ERROR_NOT_SUPPORTED) return {};
    if (r != NVML_ERROR_INSUFFICIENT_SIZE) nvml_failed(a, "nvmlDeviceGetComputeRunningProcesses", r);
    infos.resize(std::max<size_t>(count, infos.size()) * 2);
  }
  nvml_failed(a, "nvmlDeviceGetComputeRunningProcesses", NVML_ERROR_INSUFFICIENT_SIZE);
}

}  // namespace

std::vector<GpuProcessMemory> Nvml::compute_processes(int index) const {
  nvmlDevice_t d = device(*api_, index);
  return api_->processes_v2_layout ? read_processes<nvmlProcessInfo_v2_t>(*api_, d)
                                   : read_processes<nvmlProcessInfo_v1_t>(*api_, d);
}

}  // namespace headroom
