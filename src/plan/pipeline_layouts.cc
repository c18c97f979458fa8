#include "plan/pipeline_layouts.h"

#include <fmt/format.h>

#include "util/checked.h"

namespace headroom {

std::vector<PipelineShape> pipeline_shapes(int blocks, int64_t gpus, int gpus_per_node,
                                           std::vector<std::pair<std::string, std::string>>& rejected) {
  std::vector<PipelineShape> out;
  if (blocks < 2) return out;
  for (int64_t p = 2; p <= blocks && p <= gpus; p *= 2) {
    const std::string family = fmt::format("PP {}", p);
    if (blocks % p != 0) {
      rejected.emplace_back(family, fmt::format("{} stages do not divide the {} layers (Megatron splits them evenly)", p, blocks));
      continue;
    }
    if (gpus % p != 0) {
      rejected.emplace_back(family, fmt::format("{} GPUs are not a multiple of pipeline-parallel {}", gpus, p));
      continue;
    }
    for (int64_t t = 1; t <= 8 && t <= gpus_per_node && t * p <= gpus; t *= 2) {
      if (gpus % (t * p) == 0) out.push_back({p, t});
    }
  }
  return out;
}

std::vector<int64_t> pipeline_virtual_stages(int blocks, int64_t stages) {
  std::vector<int64_t> out;
  if (stages <= 1 || blocks % stages != 0) return out;
  const int64_t per_stage = blocks / stages;
  for (int64_t v : {2, 4}) {
    if (per_stage % v == 0) out.push_back(v);
  }
  return out;
}

PipelineOverhead pipeline_overhead(double forward_backward_ms, int64_t stages, int64_t virtual_stages, int64_t micro_batches,
                                   int64_t activation_bytes, int64_t gpus, const Interconnect& link) {
  PipelineOverhead o;
  if (stages <= 1) return o;
  o.bubble_ms = forward_backward_ms * static_cast<double>(stages - 1) / static_cast<double>(virtual_stages * micro_batches);
  // Interleaving sends v times as often (each chunk boundary is a stage boundary).
  o.p2p_bytes = checked_mul(checked_mul(2 * virtual_stages, micro_batches, "p2p sends"), activation_bytes, "p2p bytes");
  const bool same_machine = gpus / stages < link.gpus_per_node;
  const double bandwidth = same_machine ? link.intra_node_bytes_per_s : link.inter_node_bytes_per_s;
  o.p2p_ms = static_cast<double>(o.p2p_bytes) / (bandwidth * kCollectiveEfficiency) * 1e3 +
             static_cast<double>(2 * virtual_stages * micro_batches) * kCollectiveLatencyUs / 1e3;
  return o;
}

}  // namespace headroom
