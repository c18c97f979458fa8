// Counts that partition one tensor's elements. torchvision's MultiScaleRoIAlign
// (torchvision/ops/poolers.py: _multiscale_roi_align, LevelMapper) assigns each proposal a
// feature level and runs RoiAlign per level on `torch.where(levels == l)[0]`; the export writes
// NonZero(Equal(levels, l)) once per level, all reading the same `levels` tensor. Since the
// constants l differ, the sets {i : levels[i] == l} are disjoint: the counts sum to at most
// numel(levels), where bounding each count alone would give every level all the rows.
//
// Recognised from the graph, not from names: NonZero nodes (default domain) whose input is an
// Equal of one and the same tensor `x` with a one-element constant (a Constant node's value or
// an inline initializer), on at least two distinct constants, where the Equal keeps x's shape.
// NonZero nodes reading Equals with the same constant count the same set (the same level).
//
// Which split is the worst: at any moment of a program the bytes alive are a sum of terms
// proportional to each level's count, so over all splits with sum N the peak is reached at a
// split that puts all N rows in one level (a vertex of the simplex). The import takes one
// vertex, the last level in node order (LevelPartition::worst_level), and does not simulate the
// others inside one import. For torchvision's export the last level is the worst vertex found:
// its rows are scattered into the merged result last (_onnx_merge_levels), beside the previous
// result and the new one; docs/onnx.md gives the simulated peaks of the first and last vertex
// of each catalog R-CNN. The output states the split.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "frontends/onnx/onnx_model.h"

namespace headroom::onnx_import {

// One group of level counts over the same tensor.
struct LevelPartition {
  std::string rows;          // x: the tensor whose values pick the level
  int64_t total = 0;         // numel(x): the counts of the levels sum to at most this
  std::vector<double> levels;  // the distinct constants, in node order of their first NonZero
  double worst_level = 0;    // the level that takes all rows (the last)
  // NonZero node output -> its level's constant.
  std::unordered_map<std::string, double> level_of;
};

// The partitions among the NonZero nodes of `g` whose outputs have no static shape in `types`
// and whose x has a static shape. Groups with fewer than two distinct levels are left out (each
// such count keeps its own bound).
std::vector<LevelPartition> find_level_partitions(const onnx::GraphProto& g, const TypeTable& types);

}  // namespace headroom::onnx_import
