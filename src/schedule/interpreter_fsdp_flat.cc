// FSDP's persistent FlatParameter shards (PyTorch 1.13 torch/distributed/fsdp/flat_param.py):
// FlatParamHandle flattens a unit's parameters into one FlatParameter and _shard keeps rank r's
// chunk of it, _get_shard: torch.flatten(flat).chunk(world_size)[r], padded (F.pad) to
// chunks[0].numel() = ceil(elements / dp). The module's parameters are views of it, so one rank
// holds ceil(unit elements / dp) elements per unit, not ceil(numel / dp) per parameter (the sum of
// the latter is up to one element per parameter larger, less one). The gradient shard is the
// unit's (reduce-scattered into zeros_like(chunks[0])), and torch.optim, given
// model.parameters(), sees one parameter per unit: Adam's moments (and its `step`) are per unit.
//
// The units: --fsdp-wrap block, fsdp_units.h's (each block and the root); --fsdp-wrap param, the
// parameters of each op (the first op reading a parameter owns it). Only the sharded strategies
// (FULL_SHARD, SHARD_GRAD_OP) without CPU offload are flattened here: NO_SHARD's flat parameter
// is the unit unpadded (the same elements as its parameters) and CPUOffload keeps its own
// parameter-wise host path (interpreter_offload.cc).
//
// The unit's first parameter in graph order carries the flat shard's storage, its gradient shard
// and its optimizer state; the others read the carrier's buffer (as a tied parameter does).
#include <algorithm>
#include <vector>

#include "schedule/interpreter.h"

namespace headroom::schedule_detail {

void Interpreter::init_fsdp_flat() {
  const Sharding& s = o_.sharding;
  flat_of_.clear();
  if (s.engine != ShardingEngine::Fsdp || !s.params_sharded() || s.offload_params) return;
  flat_of_.assign(g_.tensors.size(), -1);
  auto add_flat = [&](const std::vector<TensorId>& params) {
    std::vector<TensorId> members;
    for (TensorId p : params) {
      if (flat_of_[static_cast<size_t>(p)] < 0) members.push_back(p);
    }
    if (members.empty()) return;
    const int f = static_cast<int>(flat_numel_.size());
    int64_t elements = 0;
    for (TensorId p : members) {
      flat_of_[static_cast<size_t>(p)] = f;
      elements += g_.tensor(p).numel();
    }
    flat_numel_.push_back(elements);
    flat_rep_.push_back(*std::min_element(members.begin(), members.end()));
  };
  if (block_units()) {
    for (const FsdpUnit& u : fsdp_units_.units) add_flat(u.params);
  } else {
    for (const Op& op : g_.ops) add_flat(op_params_[static_cast<size_t>(op.id)]);
  }
}

}  // namespace headroom::schedule_detail
