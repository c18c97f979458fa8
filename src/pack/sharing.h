// Sharing choices for residency and the swap simulation, and the one rule that combines the free
// part (bit-identical layers, pack/identical.h) with the merge plan (pack/merge_plan.h) without
// counting a layer twice.
//
// Choices:
//   None    every model holds all its weights;
//   Free    bit-identical layers hold one copy (no retraining: what can be deployed today);
//   Merged  free sharing plus every merge of the plan (needs joint retraining).
//
// Rule (pools). For a set S of models, take the layers of the models in S as nodes and, for every
// group the choice uses (identical groups for Free; identical and merge groups for Merged), link
// the group's members that are in S. Each connected component with two or more layers is a pool:
// its layers hold one copy. Members of a group have equal bytes and tensor counts (identical:
// same bytes; merged: same configuration key), so a pool does too (HEADROOM_CHECK). Hence
//     weights(S) = sum over m in S of weights(m) - sum over pools of (layers in pool - 1) x bytes
// and a layer's weights count once however many groups make it shared: a layer in an identical
// group and in a merge group is in one pool. Consequences (tested): the saving with Merged is at
// least the larger of the free and merge-only savings and at most their sum; groups are restricted
// to S, so a pool never links two resident layers through a model that is not resident.
//
// Order (deterministic): pools by their first member (model, layer); members by (model, layer).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "pack/identical.h"
#include "pack/layers.h"
#include "pack/merge_plan.h"

namespace headroom {

enum class Sharing : uint8_t { None, Free, Merged };
inline constexpr Sharing kSharingChoices[] = {Sharing::None, Sharing::Free, Sharing::Merged};
// JSON keys of the simulation: "unshared", "free", "shared" (kept from before the free choice).
std::string_view sharing_key(Sharing s);
// Text report: "none", "free", "merged".
std::string_view sharing_label(Sharing s);

struct SharedPool {
  int64_t layer_bytes = 0;  // one copy
  int32_t tensors = 0;      // of one copy
  std::vector<IdenticalMember> members;  // two or more layers, by (model, layer)
};

// The pools of the models in `subset` (indices into `models`; duplicates ignored) under `s`.
// None gives no pools.
std::vector<SharedPool> shared_pools(const std::vector<ModelLayers>& models, const MergePlan& plan,
                                     const IdenticalPlan& identical, Sharing s, const std::vector<int32_t>& subset);

// weights(S) above.
int64_t weights_with_sharing(const std::vector<ModelLayers>& models, const MergePlan& plan,
                             const IdenticalPlan& identical, Sharing s, const std::vector<int32_t>& subset);

}  // namespace headroom
