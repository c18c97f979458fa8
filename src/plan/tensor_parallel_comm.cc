#include "plan/tensor_parallel_comm.h"

#include <cmath>

#include "util/checked.h"
#include "util/error.h"

namespace headroom {

StepCommunication tensor_parallel_communication(const Graph& g, int64_t tensor_parallel, int64_t micro_batches,
                                                int64_t activation_bytes, const Interconnect& link, bool sequence_parallel) {
  StepCommunication c;
  if (tensor_parallel <= 1) return c;
  for (const char* d : {"batch", "seq", "hidden", "layers"}) {
    HEADROOM_CHECK(g.dims.count(d) > 0, "a graph with a Megatron split records its transformer dims");
  }
  const int64_t message = checked_mul(checked_mul(checked_mul(g.dims.at("batch"), g.dims.at("seq"), "all-reduce size"),
                                                  g.dims.at("hidden"), "all-reduce size"),
                                      activation_bytes, "all-reduce size");
  const int64_t per_micro_batch = checked_add(checked_mul(4, g.dims.at("layers"), "all-reduces"), 2, "all-reduces");
  // Sequence parallelism: a reduce-scatter and an all-gather per all-reduce, the same bytes.
  const double calls = static_cast<double>(per_micro_batch) * static_cast<double>(micro_batches) * (sequence_parallel ? 2 : 1);
  const double t = static_cast<double>(tensor_parallel);
  // A ring all-reduce sends 2 (t-1)/t of the buffer per GPU; a reduce-scatter or an all-gather (t-1)/t.
  const double bytes = calls * static_cast<double>(message) * (sequence_parallel ? 1 : 2) * (t - 1) / t;
  c.bytes_per_gpu = static_cast<int64_t>(bytes);
  c.collectives = static_cast<int>(calls);
  c.ms = bytes / (link.intra_node_bytes_per_s * kCollectiveEfficiency) * 1e3 + calls * kCollectiveLatencyUs / 1e3;
  return c;
}

}  // namespace headroom
