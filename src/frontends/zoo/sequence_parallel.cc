#include "frontends/zoo/sequence_parallel.h"

#include "util/error.h"

namespace headroom {

namespace {
constexpr int64_t kSequenceAxis = 1;  // [batch, seq, ...]
}

SequenceParallel::SequenceParallel(const BuildConfig& cfg) {
  if (!cfg.sequence_parallel) return;
  if (cfg.tensor_parallel <= 1) {
    throw InputError("--sequence-parallel needs --tensor-parallel T > 1 (Megatron shards the sequence over the tensor-parallel ranks)");
  }
  ranks_ = cfg.tensor_parallel;
}

TensorId SequenceParallel::gather_for_linear(GraphBuilder& b, const std::string& name, TensorId shard) const {
  if (!on()) return shard;
  return b.all_gather(name, shard, kSequenceAxis, ranks_, /*into_buffer=*/true);
}

TensorId SequenceParallel::scatter(GraphBuilder& b, const std::string& name, TensorId full) const {
  if (!on()) return full;
  return b.reduce_scatter(name, full, kSequenceAxis, ranks_);
}

}  // namespace headroom
