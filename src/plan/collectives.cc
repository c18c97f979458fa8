#include "plan/collectives.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>

#include "util/error.h"

namespace headroom {

Interconnect default_interconnect(const GpuSpec& gpu, std::optional<double> override_bytes_per_s) {
  Interconnect ic;
  if (override_bytes_per_s) {
    ic.intra_node_bytes_per_s = ic.inter_node_bytes_per_s = *override_bytes_per_s;
    ic.description = fmt::format("--interconnect {:.4g} GB/s", *override_bytes_per_s / 1e9);
    return ic;
  }
  ic.intra_node_bytes_per_s = gpu.gpu_link_bytes_per_s.value_or(gpu.host_link.bandwidth_bytes_per_s);
  ic.inter_node_bytes_per_s = gpu.architecture == "hopper" || gpu.architecture == "blackwell" ? 50e9 : 25e9;
  ic.description = fmt::format("{} {:.4g} GB/s within 8 GPUs, InfiniBand {:.4g} GB/s between machines",
                               gpu.gpu_link_bytes_per_s ? "NVLink" : "PCIe", ic.intra_node_bytes_per_s / 1e9,
                               ic.inter_node_bytes_per_s / 1e9);
  return ic;
}

double parse_bandwidth(const std::string& option, const std::string& text) {
  struct Unit {
    const char* suffix;
    double bytes;
  };
  static const Unit units[] = {{"GB/s", 1e9}, {"Gb/s", 1e9 / 8}, {"MB/s", 1e6}, {"B/s", 1.0}};
  for (const Unit& u : units) {
    const std::string suffix = u.suffix;
    if (text.size() <= suffix.size() || text.compare(text.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    const std::string number = text.substr(0, text.size() - suffix.size());
    char* end = nullptr;
    const double v = std::strtod(number.c_str(), &end);
    if (end == number.c_str() || *end != '\0' || !std::isfinite(v) || v <= 0 || v * u.bytes > 1e15) break;
    return v * u.bytes;
  }
  throw InputError(option + " " + text + " is not a bandwidth (e.g. 100GB/s or 400Gb/s)");
}

StepCommunication step_communication(DataParallelEngine engine, int64_t param_bytes, int64_t grad_bytes,
                                     int64_t data_parallel, int64_t micro_batches, const Interconnect& link) {
  StepCommunication c;
  if (data_parallel <= 1) return c;
  const double d = static_cast<double>(data_parallel);
  const double k = static_cast<double>(micro_batches);
  const double p = static_cast<double>(param_bytes), g = static_cast<double>(grad_bytes);
  // Buffers that move, in units of "one reduce-scatter or all-gather of that many bytes".
  double moved = 0;
  switch (engine) {
    case DataParallelEngine::Ddp: moved = 2 * g; break;
    case DataParallelEngine::Zero1: moved = g + p; break;
    case DataParallelEngine::Zero2: moved = k * g + p; break;
    case DataParallelEngine::Zero3:
    case DataParallelEngine::FsdpFull: moved = k * (2 * p + g); break;
    case DataParallelEngine::FsdpGradOp: moved = k * (p + g); break;
  }
  const double bytes = moved * (d - 1) / d;
  const double bw = (data_parallel <= link.gpus_per_node ? link.intra_node_bytes_per_s : std::min(link.intra_node_bytes_per_s, link.inter_node_bytes_per_s)) *
                    kCollectiveEfficiency;
  c.bytes_per_gpu = static_cast<int64_t>(bytes);
  c.collectives = static_cast<int>(std::ceil(moved / static_cast<double>(kCollectiveBucketBytes)));
  c.ms = bytes / bw * 1e3 + c.collectives * kCollectiveLatencyUs / 1e3;
  return c;
}

}  // namespace headroom
