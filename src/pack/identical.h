// Layers whose weights are bit-identical share one copy for free: no retraining, no change to what
// any model computes. This is the free part of sharing, reported apart from the merge plan
// (merge_plan.h), whose merges change weights and need joint retraining.
//
// Rule. Two layers (pack/layers.h), of different models or of the same one, are identical when
// they own the same number of weights and, position by position (first-read order), the weights
// have the same dtype, shape and bytes. Op kind and geometry do not matter: only the memory is
// shared, each op still reads it as before. A layer is hashed when the values of all its weights
// are known (ir/weight_data.h: ONNX files that carry their weights); the 64-bit hash of its
// tensors' (dtype, shape, size, content hash) only proposes candidates: members of a group are
// confirmed by comparing their bytes with the group's first member (same_bytes), so a hash
// collision can never merge different weights.
//
// Saving. A group of k identical layers keeps one copy: (k - 1) x the layer's bytes. Groups are
// disjoint (a layer is in at most one), so savings add up; groups of zero bytes are dropped.
//
// Order (deterministic). Members by (model, layer index); groups by bytes saved, largest first,
// ties by their first member.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/weight_data.h"
#include "pack/layers.h"

namespace headroom {

struct IdenticalMember {
  int32_t model = 0;  // index into the models
  int32_t layer = 0;  // index into that model's ModelLayers::layers
};

struct IdenticalGroup {
  OpKind kind = OpKind::Opaque;  // of the first member
  int64_t layer_bytes = 0;       // one copy
  int32_t tensors = 0;
  std::vector<IdenticalMember> members;
  int64_t bytes_saved = 0;  // (members - 1) x layer_bytes
};

// How far a model's layers could be checked.
enum class WeightCheckStatus : uint8_t {
  NoValues,  // no weight values at all (a built-in architecture)
  Absent,    // a file without its weights (stripped, missing external data): no layer hashed
  Partial,   // some layers hashed
  Complete,  // every layer hashed
};
std::string_view weight_check_name(WeightCheckStatus s);  // "no_values", "absent", "partial", "complete"

struct WeightCheck {
  WeightCheckStatus status = WeightCheckStatus::NoValues;
  int32_t layers = 0;
  int32_t hashed_layers = 0;
  int32_t missing_tensors = 0;  // weights of unhashed layers without bytes
  std::string reason;           // why the first unhashed layer is not hashed; "" when none
};

struct IdenticalPlan {
  std::vector<IdenticalGroup> groups;
  int64_t saved_bytes = 0;    // sum of bytes_saved
  int64_t unshared_bytes = 0; // sum of the models' weights
  int64_t shared_bytes = 0;   // unshared - saved: the weights with free sharing only
  std::vector<WeightCheck> checks;  // per model
};

// `weights[m]` is model m's weight values, or nullptr when it has none.
// REQUIRES: weights.size() == models.size().
IdenticalPlan find_identical_layers(const std::vector<ModelLayers>& models,
                                    const std::vector<const WeightData*>& weights);

// A one-line description of a model's check for reports, e.g. "weights not present: identical-weight
// check skipped (external data file 'm.weights' is empty)".
std::string weight_check_text(const WeightCheck& c);

}  // namespace headroom
