#include "schedule/pipeline_plan.h"

#include <string>
#include <unordered_map>
#include <vector>

#include "util/error.h"

namespace headroom {

MemoryPlan plan_for_rank(const Graph& model, const Graph& rank, const MemoryPlan& plan) {
  MemoryPlan out;
  out.checkpoint_impl = plan.checkpoint_impl;
  if (plan.checkpoints.empty()) return out;
  // Ops the split copies into every stage (masks, position ids) may appear once per chunk on an
  // interleaved rank; a block's ops appear once.
  std::unordered_map<std::string, std::vector<OpId>> by_name;
  for (const Op& op : rank.ops) by_name[op.name].push_back(op.id);
  auto on_rank = [&](OpId model_op) -> const std::vector<OpId>* {
    auto it = by_name.find(model.op(model_op).name);
    return it == by_name.end() ? nullptr : &it->second;
  };
  for (const CheckpointSegment& r : plan.checkpoints) {
    const std::string range = model.op(r.first).name + ".." + model.op(r.last).name;
    int present = 0;
    for (OpId o = r.first; o <= r.last; ++o) present += on_rank(o) != nullptr ? 1 : 0;
    if (present == 0) continue;  // another stage's region
    const int length = static_cast<int>(r.last - r.first + 1);
    const std::vector<OpId>* first = on_rank(r.first);
    bool whole = present == length && first != nullptr && first->size() == 1;
    const OpId start = whole ? first->front() : kNone;
    // Consecutive on the rank, op for op, as in the model.
    for (int i = 0; whole && i < length; ++i) {
      const OpId here = static_cast<OpId>(start + i);
      whole = here < static_cast<OpId>(rank.ops.size()) && rank.op(here).name == model.op(r.first + i).name;
    }
    if (!whole) {
      throw InputError("checkpoint region " + range +
                       " crosses a pipeline stage boundary (a stage checkpoints only the layers it holds: --checkpoint blocks or attention)");
    }
    out.checkpoints.push_back({start, static_cast<OpId>(start + length - 1)});
  }
  return out;
}

}  // namespace headroom
