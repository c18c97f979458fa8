#include "schedule/fsdp_units.h"

#include "schedule/transformer_blocks.h"
#include "util/checked.h"

namespace headroom {
namespace {

// The tensor owning the storage t views (a transpose of a weight reads the weight).
TensorId param_root(const Graph& g, TensorId t) {
  while (g.tensor(t).alias_of != kNone) t = g.tensor(t).alias_of;
  const Tensor& x = g.tensor(t);
  return x.tied_to != kNone ? x.tied_to : t;
}

}  // namespace

FsdpUnits fsdp_block_units(const Graph& g) {
  FsdpUnits r;
  const TransformerBlocks blocks = transformer_blocks(g);
  if (blocks.segments.empty()) return r;
  r.op_unit.assign(g.ops.size(), -1);
  for (size_t b = 0; b < blocks.segments.size(); ++b) {
    const CheckpointSegment& s = blocks.segments[b];
    r.units.push_back(FsdpUnit{blocks.container + "." + std::to_string(b), s.first, s.last, {}, 0});
    for (OpId o = s.first; o <= s.last; ++o) r.op_unit[static_cast<size_t>(o)] = static_cast<int>(b);
  }
  FsdpUnit root{"root", kNone, kNone, {}, 0};
  const int root_index = static_cast<int>(r.units.size());
  std::vector<int> unit_of_param(g.tensors.size(), -1);
  for (const Op& op : g.ops) {
    for (TensorId in : op.inputs) {
      const TensorId p = param_root(g, in);
      if (g.tensor(p).role != TensorRole::Parameter) continue;
      int& owner = unit_of_param[static_cast<size_t>(p)];
      int u = r.op_unit[static_cast<size_t>(op.id)];
      if (u < 0) {
        // An op outside the blocks reading a parameter runs in the root module.
        u = root_index;
        r.op_unit[static_cast<size_t>(op.id)] = u;
        if (root.first == kNone) root.first = op.id;
        root.last = op.id;
      }
      if (owner >= 0) continue;
      owner = u;
      FsdpUnit& unit = u == root_index ? root : r.units[static_cast<size_t>(u)];
      unit.params.push_back(p);
      unit.elements = checked_add(unit.elements, g.tensor(p).numel(), "FSDP unit elements");
    }
  }
  if (!root.params.empty()) {
    r.root = root_index;
    r.units.push_back(std::move(root));
  } else {
    for (int& u : r.op_unit) {
      if (u == root_index) u = -1;
    }
  }
  return r;
}

int64_t fsdp_padded_elements(int64_t elements, int world) {
  const int64_t per_rank = elements / world + (elements % world != 0 ? 1 : 0);
  return checked_mul(per_rank, static_cast<int64_t>(world), "FSDP unit elements");
}

}  // namespace headroom
