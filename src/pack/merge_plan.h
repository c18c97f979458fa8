// The merge plan: which layers of several models could share one copy of their weights (GEMEL,
// Padmanabhan et al., NSDI 2023), how much each merge saves, and in which order to try them.
//
// Rule. Layers of different models merge when their configuration keys (pack/layers.h) are equal.
// Layers of the same model never merge with each other: GEMEL merges across models, and a model
// that used one weight for two of its own layers would be a different architecture (ALBERT-style
// tying), not the model it was trained as. So when model m has c_m layers of configuration K, the
// j-th of them (execution order) joins group (K, j) together with the j-th K-layer of every other
// model that has more than j of them. Group (K, j) with members in k models keeps one copy and
// saves (k - 1) x the layer's bytes; summed over j, configuration K saves
//     bytes(K) x (sum_m c_m - max_m c_m)
// (the shared pool needs max_m c_m copies of K: one model's worth). Groups with one member are
// not candidates. Pairing by occurrence order matches layers at similar depths.
//
// Order. Groups are merged greedily, largest saving first (GEMEL: memory per layer follows a power
// law, so a few merges give most of the saving); ties break on the configuration key, then j.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pack/layers.h"

namespace headroom {

struct GroupMember {
  int32_t model = 0;  // index into the models given to plan_merges
  int32_t layer = 0;  // index into that model's ModelLayers::layers
};

struct MergeGroup {
  std::string config;   // the shared configuration key
  int32_t occurrence = 0;  // j: the j-th layer of this configuration in each member model
  OpKind kind = OpKind::Opaque;
  int64_t layer_bytes = 0;  // one copy
  int32_t tensors = 0;      // tensors of one copy
  std::vector<GroupMember> members;  // one per model, by model index
  int64_t bytes_saved = 0;  // (members - 1) * layer_bytes
};

// Share of a model's layer memory held by its largest layers.
struct LayerDistribution {
  int32_t layers = 0;
  struct Top {
    double fraction = 0;   // 0.01, 0.10, 0.50 of the layers
    int32_t count = 0;     // max(1, ceil(fraction * layers))
    int64_t bytes = 0;
    double share = 0;      // bytes / layer bytes
  };
  std::vector<Top> top;
};

struct SavingThreshold {
  double fraction = 0;  // of the possible saving
  int32_t groups = 0;   // the fewest greedy groups that reach it (0 when there is nothing to save)
};

struct MergePlan {
  std::vector<MergeGroup> groups;  // greedy order
  int64_t unshared_bytes = 0;      // sum of the models' weights
  int64_t saved_bytes = 0;         // every group merged
  int64_t shared_bytes = 0;        // unshared - saved
  std::vector<int64_t> cumulative_saved;  // [i]: saving after merging groups 0..i
  std::vector<SavingThreshold> thresholds;  // 50%, 80%, 95%
  std::vector<LayerDistribution> distributions;  // per model
};

MergePlan plan_merges(const std::vector<ModelLayers>& models);

}  // namespace headroom
