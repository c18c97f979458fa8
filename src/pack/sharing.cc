#include "pack/sharing.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>

#include "util/checked.h"
#include "util/error.h"

namespace headroom {

std::string_view sharing_key(Sharing s) {
  switch (s) {
    case Sharing::None: return "unshared";
    case Sharing::Free: return "free";
    case Sharing::Merged: return "shared";
  }
  return "?";
}

std::string_view sharing_label(Sharing s) {
  switch (s) {
    case Sharing::None: return "none";
    case Sharing::Free: return "free";
    case Sharing::Merged: return "merged";
  }
  return "?";
}

std::vector<SharedPool> shared_pools(const std::vector<ModelLayers>& models, const MergePlan& plan,
                                     const IdenticalPlan& identical, Sharing s, const std::vector<int32_t>& subset) {
  std::vector<SharedPool> pools;
  if (s == Sharing::None) return pools;
  std::vector<bool> in(models.size(), false);
  for (int32_t m : subset) in.at(static_cast<size_t>(m)) = true;
  // Node ids of the layers of the models in the subset, in (model, layer) order.
  std::vector<size_t> first(models.size() + 1, 0);
  for (size_t m = 0; m < models.size(); ++m) first[m + 1] = first[m] + (in[m] ? models[m].layers.size() : 0);
  auto node = [&](int32_t model, int32_t layer) { return first[static_cast<size_t>(model)] + static_cast<size_t>(layer); };
  std::vector<size_t> parent(first.back());
  std::iota(parent.begin(), parent.end(), size_t{0});
  auto find = [&](size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  auto link = [&](const std::vector<IdenticalMember>& members) {
    std::optional<size_t> root;
    for (const IdenticalMember& mb : members) {
      if (!in[static_cast<size_t>(mb.model)]) continue;
      size_t x = find(node(mb.model, mb.layer));
      if (!root) {
        root = x;
      } else if (x != *root) {
        // The smaller id stays the root, so a pool's root is its first member.
        size_t lo = std::min(x, *root), hi = std::max(x, *root);
        parent[hi] = lo;
        root = lo;
      }
    }
  };
  for (const IdenticalGroup& g : identical.groups) link(g.members);
  if (s == Sharing::Merged) {
    for (const MergeGroup& g : plan.groups) {
      std::vector<IdenticalMember> members;
      for (const GroupMember& mb : g.members) members.push_back({mb.model, mb.layer});
      link(members);
    }
  }
  std::map<size_t, SharedPool> by_root;  // ordered by root = first member
  for (size_t m = 0; m < models.size(); ++m) {
    if (!in[m]) continue;
    for (size_t l = 0; l < models[m].layers.size(); ++l) {
      const Layer& layer = models[m].layers[l];
      SharedPool& p = by_root[find(node(static_cast<int32_t>(m), static_cast<int32_t>(l)))];
      if (p.members.empty()) {
        p.layer_bytes = layer.bytes;
        p.tensors = layer.tensors;
      }
      HEADROOM_CHECK(p.layer_bytes == layer.bytes && p.tensors == layer.tensors,
                     "layers sharing one copy differ in size: " + layer.name);
      p.members.push_back({static_cast<int32_t>(m), static_cast<int32_t>(l)});
    }
  }
  for (auto& [root, p] : by_root) {
    if (p.members.size() >= 2) pools.push_back(std::move(p));
  }
  return pools;
}

int64_t weights_with_sharing(const std::vector<ModelLayers>& models, const MergePlan& plan,
                             const IdenticalPlan& identical, Sharing s, const std::vector<int32_t>& subset) {
  std::vector<bool> in(models.size(), false);
  int64_t total = 0;
  for (int32_t m : subset) {
    if (in.at(static_cast<size_t>(m))) continue;
    in[static_cast<size_t>(m)] = true;
    total = checked_add(total, models[static_cast<size_t>(m)].weights_bytes, "weights of a model set");
  }
  for (const SharedPool& p : shared_pools(models, plan, identical, s, subset)) {
    total -= checked_mul(static_cast<int64_t>(p.members.size() - 1), p.layer_bytes, "bytes saved");
  }
  return total;
}

}  // namespace headroom
