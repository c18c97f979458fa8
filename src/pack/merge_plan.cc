#include "pack/merge_plan.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "util/checked.h"
#include "util/error.h"

namespace headroom {
namespace {

LayerDistribution distribution_of(const ModelLayers& m) {
  LayerDistribution d;
  d.layers = static_cast<int32_t>(m.layers.size());
  std::vector<int64_t> bytes;
  for (const Layer& l : m.layers) bytes.push_back(l.bytes);
  std::sort(bytes.begin(), bytes.end(), std::greater<>());
  for (double f : {0.01, 0.10, 0.50}) {
    LayerDistribution::Top t;
    t.fraction = f;
    if (!bytes.empty()) {
      t.count = std::max<int32_t>(1, static_cast<int32_t>(std::ceil(f * static_cast<double>(bytes.size()) - 1e-9)));
      for (int32_t i = 0; i < t.count; ++i) t.bytes += bytes[static_cast<size_t>(i)];
      t.share = m.layer_bytes > 0 ? static_cast<double>(t.bytes) / static_cast<double>(m.layer_bytes) : 0.0;
    }
    d.top.push_back(t);
  }
  return d;
}

}  // namespace

MergePlan plan_merges(const std::vector<ModelLayers>& models) {
  MergePlan plan;
  // (config, occurrence) -> group under construction. Models are visited in order, so members
  // come out sorted by model index.
  std::map<std::pair<std::string, int32_t>, MergeGroup> by_key;
  for (size_t mi = 0; mi < models.size(); ++mi) {
    const ModelLayers& m = models[mi];
    plan.unshared_bytes = checked_add(plan.unshared_bytes, m.weights_bytes, "weights of all models");
    std::map<std::string, int32_t> seen;  // config -> occurrences so far in this model
    for (size_t li = 0; li < m.layers.size(); ++li) {
      const Layer& l = m.layers[li];
      int32_t j = seen[l.config]++;
      MergeGroup& g = by_key[{l.config, j}];
      if (g.members.empty()) {
        g.config = l.config;
        g.occurrence = j;
        g.kind = l.kind;
        g.layer_bytes = l.bytes;
        g.tensors = l.tensors;
      }
      HEADROOM_CHECK(g.layer_bytes == l.bytes, "equal configurations with different bytes: " + l.config);
      g.members.push_back({static_cast<int32_t>(mi), static_cast<int32_t>(li)});
    }
    plan.distributions.push_back(distribution_of(m));
  }
  for (auto& [key, g] : by_key) {
    if (g.members.size() < 2) continue;
    g.bytes_saved = checked_mul(static_cast<int64_t>(g.members.size() - 1), g.layer_bytes, "bytes saved");
    plan.groups.push_back(std::move(g));
  }
  std::sort(plan.groups.begin(), plan.groups.end(), [](const MergeGroup& a, const MergeGroup& b) {
    if (a.bytes_saved != b.bytes_saved) return a.bytes_saved > b.bytes_saved;
    if (a.config != b.config) return a.config < b.config;
    return a.occurrence < b.occurrence;
  });
  for (const MergeGroup& g : plan.groups) {
    plan.saved_bytes = checked_add(plan.saved_bytes, g.bytes_saved, "bytes saved");
    plan.cumulative_saved.push_back(plan.saved_bytes);
  }
  plan.shared_bytes = plan.unshared_bytes - plan.saved_bytes;
  for (double f : {0.50, 0.80, 0.95}) {
    SavingThreshold t;
    t.fraction = f;
    if (plan.saved_bytes > 0) {
      // The first prefix with cumulative * 100 >= f% * total, in integers to avoid rounding.
      int64_t pct = static_cast<int64_t>(std::lround(f * 100));
      for (size_t i = 0; i < plan.cumulative_saved.size(); ++i) {
        if (checked_mul(plan.cumulative_saved[i], 100, "saving") >= checked_mul(plan.saved_bytes, pct, "saving")) {
          t.groups = static_cast<int32_t>(i + 1);
          break;
        }
      }
    }
    plan.thresholds.push_back(t);
  }
  return plan;
}

}  // namespace headroom
