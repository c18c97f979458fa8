// Data-dependent sizes in detection exports, bounded from above. torchvision's detection models
// threshold scores (`torch.where(scores > t)` -> NonZero), suppress boxes (`batched_nms` ->
// NonMaxSuppression) and keep the best (`topk(min(k, n))`, `keep[:detections_per_img]`): how
// many rows survive depends on the values, which headroom never has. Each such count takes an
// upper bound, the estimate is then an upper bound, and the bound is stated as an assumption.
//
// The rule, applied before control flow is resolved and again after each round of it:
//   NonZero            at most every element of its input is nonzero: [rank, numel(input)];
//                      NonZeros of Equal(x, c) on one x and distinct constants c (an R-CNN's
//                      MultiScaleRoIAlign levels) partition x's elements and are bounded
//                      together: all of them in the last level, 0 in the others
//                      (onnx_level_partition.h);
//   NonMaxSuppression  at most batch x classes x min(boxes, max_output_boxes_per_class) rows
//                      (torchvision writes max_output_boxes_per_class as INT64_MAX: all boxes);
//   both               capped by --max-detections N when given (a user's statement that no
//                      more than N results survive any threshold or suppression);
//   what follows       (TopK's k = min(k, n), Slice ends, Reshape/Expand/ConstantOfShape/Range
//                      sizes) is shape arithmetic on the bounded sizes: it is folded and written
//                      into the file as constants, so that ONNX shape inference gives static
//                      shapes downstream. (The same is done for any node without a static
//                      output in a file with NonZero, NonMaxSuppression or TopK nodes: the
//                      RPN's k = min(pre_nms_top_n, anchors) folds without any bound.) The file's own limits (torchvision's
//                      detections_per_img as a Slice end, rpn_post_nms_top_n as a TopK k) then
//                      apply as written.
//   value-given sizes  a Resize whose `sizes`, a Slice whose starts/ends, a ConstantOfShape whose
//                      shape are computed from tensor values (torchvision's mask pasting
//                      resizes each mask to its box: _onnx_paste_mask_in_image) take the upper
//                      ends of those values' ranges (onnx_value_range.h: the boxes are clamped
//                      to the image by clip_boxes_to_image); a Slice at most keeps its input.
//                      Each such output's bound is stated; a value with no finite upper end
//                      still stops the import (no static shape).
//   If                 a condition that depends on a bounded size (`boxes.numel() == 0`) folds
//                      with the bound: with a positive bound the non-empty branch is taken.
//                      Each such If is stated. A condition that still does not fold is one
//                      line naming the node (onnx_control_flow.h).
//
// Invariants: bounds are static dims written as value_info of the bounded outputs (shape
// inference keeps a declared dimension where it infers none); materialized constants are new
// initializers named "<tensor>/headroom_bound" that replace only a node's shape-giving inputs.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace headroom::onnx_import {

// One bounded count: which node, its bound and where the bound comes from.
struct DetectionBound {
  std::string node;    // node_label: the node's name, or its op and index
  std::string op;      // NonZero, NonMaxSuppression
  int64_t bound = 0;   // results at most
  std::string reason;  // "its input's size", "--max-detections", ...
};

// One output whose shape was bounded from the ranges of the values that give it.
struct ShapeBound {
  std::string node;  // node_label
  std::string op;    // Resize, Slice, ConstantOfShape
  std::vector<int64_t> dims;
  std::string reason;
};

// What bounding did, for the report (Graph::notes) and for the option's check.
struct DetectionBounds {
  std::optional<int64_t> max_detections;  // --max-detections, when given
  bool has_data_dependent_ops = false;    // the file has NonZero / NonMaxSuppression nodes
  std::vector<DetectionBound> bounds;     // in node order, each node once
  std::vector<ShapeBound> shape_bounds;   // in order of bounding, each node once
  // One line per If whose condition a bound decided ("'If_12' (If): ... then branch").
  std::vector<std::string> decided_ifs;
};

// Whether `op` (default domain) is one whose output size depends on tensor values.
bool is_data_dependent_op(const std::string& op);

// One bounding pass over the top-level graph (repeats internally until nothing changes):
// bounds every NonZero and NonMaxSuppression output that has no static shape, materializes
// folded shape inputs of nodes without a static output, and records the Ifs whose condition a
// bound decides. REQUIRES: symbolic input dimensions bound (bind_dims). InputError naming the
// node for a bound that overflows or an input without a static shape.
void bound_data_dependent_sizes(onnx::ModelProto& model, int64_t opset, DetectionBounds& bounds);

// The notes a report states: "the estimate is an upper bound" and the assumptions. Empty when
// nothing was bounded. InputError when --max-detections was given for a model without
// data-dependent sizes.
std::vector<std::string> detection_notes(const DetectionBounds& bounds);

}  // namespace headroom::onnx_import
