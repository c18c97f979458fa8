// A fake libnvidia-ml.so for the `headroom watch` tests: the same C symbols as NVML (the layouts of
// src/measure/nvml.cc), answering from a script instead of a GPU.
//
// FAKE_NVML_SCRIPT names a file with one line per sample of device 0 (blank lines and lines
// starting with '#' are skipped):
//     TOTAL USED GPU% MEM% [PID=BYTES ...]
// PID may be `child`: the lowest pid whose parent is this process (the command `watch` started).
// BYTES may be `na` (NVML_VALUE_NOT_AVAILABLE). Each nvmlDeviceGetMemoryInfo call on device 0
// moves to the next line (the last line repeats); the other calls answer from the current line.
// FAKE_NVML_DEVICES=N (default 1) sets the device count (devices past 0 repeat device 0's line);
// FAKE_NVML_FAIL=init makes nvmlInit_v2 fail with NVML_ERROR_DRIVER_NOT_LOADED (9);
// Built with FAKE_NVML_V1 defined (target fake_nvml_v1), it exports only the unversioned
// nvmlDeviceGetComputeRunningProcesses with the 16-byte nvmlProcessInfo_v1_t of old drivers.
#include <dirent.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Proc {
  std::string pid;  // a number or "child"
  unsigned long long bytes;
};
struct Line {
  unsigned long long total = 0, used = 0;
  unsigned gpu = 0, mem = 0;
  std::vector<Proc> procs;
};

std::vector<Line> g_lines;
size_t g_next = 0;     // the line the next memory call on device 0 returns
size_t g_current = 0;  // the line the other calls answer from

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

void load_script() {
  g_lines.clear();
  g_next = g_current = 0;
  std::ifstream f(env("FAKE_NVML_SCRIPT"));
  std::string text;
  while (std::getline(f, text)) {
    if (text.empty() || text[0] == '#') continue;
    std::istringstream in(text);
    Line l;
    in >> l.total >> l.used >> l.gpu >> l.mem;
    std::string p;
    while (in >> p) {
      size_t eq = p.find('=');
      std::string b = p.substr(eq + 1);
      l.procs.push_back({p.substr(0, eq), b == "na" ? ULLONG_MAX : std::stoull(b)});
    }
    g_lines.push_back(l);
  }
  if (g_lines.empty()) g_lines.push_back(Line{16ULL << 30, 0, 0, 0, {}});
}

unsigned child_pid() {
  unsigned best = 0;
  std::string me = std::to_string(getpid());
  if (DIR* d = opendir("/proc")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      std::ifstream st(std::string("/proc/") + e->d_name + "/stat");
      std::string s;
      std::getline(st, s);
      size_t close = s.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream rest(s.substr(close + 1));
      std::string state, ppid;
      rest >> state >> ppid;
      unsigned pid = static_cast<unsigned>(std::stoul(e->d_name));
      if (ppid == me && (best == 0 || pid < best)) best = pid;
    }
    closedir(d);
  }
  return best;
}

unsigned devices() {
  const char* n = env("FAKE_NVML_DEVICES");
  return *n ? static_cast<unsigned>(std::atoi(n)) : 1;
}

struct Memory {
  unsigned long long total, free, used;
};
struct Utilization {
  unsigned gpu, memory;
};
#ifdef FAKE_NVML_V1
struct ProcessInfo {
  unsigned pid;
  unsigned long long usedGpuMemory;
};
#else
struct ProcessInfo {
  unsigned pid;
  unsigned long long usedGpuMemory;
  unsigned gpuInstanceId, computeInstanceId;
};
#endif

intptr_t index_of(void* device) { return reinterpret_cast<intptr_t>(device) - 1; }

int processes(void* device, unsigned* count, ProcessInfo* infos) {
  if (index_of(device) < 0 || static_cast<unsigned>(index_of(device)) >= devices()) return 2;
  const Line& l = g_lines[g_current];
  std::vector<ProcessInfo> out;
  for (const Proc& p : l.procs) {
    unsigned pid = p.pid == "child" ? child_pid() : static_cast<unsigned>(std::stoul(p.pid));
    if (pid == 0) continue;
    ProcessInfo info{};
    info.pid = pid;
    info.usedGpuMemory = p.bytes;
    out.push_back(info);
  }
  if (*count < out.size()) {
    *count = static_cast<unsigned>(out.size());
    return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  }
  *count = static_cast<unsigned>(out.size());
  for (size_t i = 0; i < out.size(); ++i) infos[i] = out[i];
  return 0;
}

}  // namespace

extern "C" {

int nvmlInit_v2() {
  if (std::strcmp(env("FAKE_NVML_FAIL"), "init") == 0) return 9;
  load_script();
  return 0;
}
int nvmlShutdown() { return 0; }
const char* nvmlErrorString(int r) { return r == 0 ? "Success" : "Fake error"; }
int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = devices();
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if (index >= devices()) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = reinterpret_cast<void*>(static_cast<intptr_t>(index) + 1);
  return 0;
}
int nvmlDeviceGetName(void* device, char* name, unsigned length) {
  std::snprintf(name, length, "Fake GPU %ld", static_cast<long>(index_of(device)));
  return 0;
}
int nvmlSystemGetDriverVersion(char* version, unsigned length) {
  std::snprintf(version, length, "%s", "999.99");
  return 0;
}
int nvmlDeviceGetMemoryInfo(void* device, Memory* m) {
  if (index_of(device) == 0) {
    g_current = g_next;
    if (g_next + 1 < g_lines.size()) ++g_next;
  }
  const Line& l = g_lines[g_current];
  *m = Memory{l.total, l.total - l.used, l.used};
  return 0;
}
int nvmlDeviceGetUtilizationRates(void*, Utilization* u) {
  const Line& l = g_lines[g_current];
  *u = Utilization{l.gpu, l.mem};
  return 0;
}
#ifdef FAKE_NVML_V1
int nvmlDeviceGetComputeRunningProcesses(void* device, unsigned* count, ProcessInfo* infos) {
  return processes(device, count, infos);
}
#else
int nvmlDeviceGetComputeRunningProcesses_v2(void* device, unsigned* count, ProcessInfo* infos) {
  return processes(device, count, infos);
}
int nvmlDeviceGetComputeRunningProcesses_v3(void* device, unsigned* count, ProcessInfo* infos) {
  return processes(device, count, infos);
}
#endif

}  // extern "C"
