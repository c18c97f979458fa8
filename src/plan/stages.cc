#include "plan/stages.h"

#include <algorithm>
#include <limits>

namespace headroom {

std::vector<Stage> chain_stages(const Graph& g, int max_stages) {
  // The model's forward: ops before the first loss op.
  OpId model_end = static_cast<OpId>(g.ops.size());
  for (const Op& op : g.ops) {
    if (op.stage == OpStage::Loss) {
      model_end = op.id;
      break;
    }
  }
  if (model_end == 0) return {};
  // Last forward read of each storage (returned outputs: past the end). Python holds do not
  // count: a tensor a caller merely keeps alive (ResNet's layer input while its blocks run) is
  // no data dependence, and a segment boundary there costs nothing extra.
  const OpId never = std::numeric_limits<OpId>::max();
  std::vector<OpId> last_use(g.tensors.size(), kNone);
  auto use = [&](TensorId t, OpId at) {
    TensorId root = g.storage_root(t);
    last_use[static_cast<size_t>(root)] = std::max(last_use[static_cast<size_t>(root)], at);
  };
  for (const Op& op : g.ops) {
    for (TensorId in : op.inputs) use(in, op.id);
  }
  for (TensorId t : g.outputs) use(t, never);
  // crossing[i]: activation storages made at or before op i and used after it.
  std::vector<int> count_delta(static_cast<size_t>(model_end) + 1, 0);
  std::vector<int64_t> bytes_delta(static_cast<size_t>(model_end) + 1, 0);
  for (const Tensor& t : g.tensors) {
    if (t.producer == kNone || t.alias_of != kNone || t.producer >= model_end) continue;
    OpId end = std::min(last_use[static_cast<size_t>(t.id)], model_end);
    if (end <= t.producer) continue;
    count_delta[static_cast<size_t>(t.producer)] += 1;
    count_delta[static_cast<size_t>(end)] -= 1;
    bytes_delta[static_cast<size_t>(t.producer)] += t.bytes();
    bytes_delta[static_cast<size_t>(end)] -= t.bytes();
  }
  std::vector<int> crossing(static_cast<size_t>(model_end));
  std::vector<int64_t> crossing_bytes(static_cast<size_t>(model_end));
  int c = 0;
  int64_t b = 0;
  for (OpId i = 0; i < model_end; ++i) {
    c += count_delta[static_cast<size_t>(i)];
    b += bytes_delta[static_cast<size_t>(i)];
    crossing[static_cast<size_t>(i)] = c;
    crossing_bytes[static_cast<size_t>(i)] = b;
  }
  // Cut after op i where the fewest storages cross, counted in the body of the model (its middle
  // 80 %): a prologue (BERT's mask computation) may have fewer than the repeated blocks, whose
  // boundaries (hidden state and mask) are what we want.
  int fewest = std::numeric_limits<int>::max();
  const OpId body_first = model_end / 10, body_end = std::max<OpId>(body_first + 1, model_end - model_end / 10);
  for (OpId i = body_first; i < body_end && i + 1 < model_end; ++i) fewest = std::min(fewest, crossing[static_cast<size_t>(i)]);
  std::vector<Stage> stages;
  Stage cur{0, kNone, 0};
  for (OpId i = 0; i < model_end; ++i) {
    // Never right before an in-place op: re-running it in a recomputation would overwrite the
    // segment's saved input.
    const bool inplace_next = i + 1 < model_end && g.op(i + 1).attrs.inplace;
    const bool cut = i + 1 == model_end || (crossing[static_cast<size_t>(i)] <= fewest && !inplace_next);
    if (!cut) continue;
    cur.last = i;
    stages.push_back(cur);
    cur = Stage{i + 1, kNone, crossing_bytes[static_cast<size_t>(i)]};
  }
  if (static_cast<int>(stages.size()) <= max_stages || max_stages < 1) return stages;
  // Merge evenly into max_stages groups.
  std::vector<Stage> merged;
  const size_t n = stages.size();
  for (int k = 0; k < max_stages; ++k) {
    size_t from = n * static_cast<size_t>(k) / static_cast<size_t>(max_stages);
    size_t to = n * static_cast<size_t>(k + 1) / static_cast<size_t>(max_stages);
    if (to <= from) continue;
    merged.push_back(Stage{stages[from].first, stages[to - 1].last, stages[from].boundary_bytes});
  }
  return merged;
}

}  // namespace headroom
