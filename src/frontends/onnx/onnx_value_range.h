// Value ranges of the tensors of a top-level ONNX graph: for each tensor an interval [lo, hi]
// holding its elements, computed in node order (interval arithmetic). Sizes that come from
// tensor values rather than shapes (torchvision's mask pasting resizes each mask to its box's
// width and height) cannot be folded, but they can be bounded when the values are clamped on the
// way (clip_boxes_to_image's Max(x, 0) and Min(x, width)): the detection bounder
// (onnx_detection.h) reads the upper ends of these ranges.
//
// A range is kept per element for tensors of at most kMaxRangeElements elements with a static
// shape (shape vectors, one box's coordinates), and as one interval for the whole tensor
// otherwise. Values the pass cannot follow are unbounded (-inf, +inf) ([0, 1] for bool,
// [0, +inf) for unsigned types). Interval arithmetic forgets relations between values (x2 >= x0
// for a box), so its bounds hold but may be loose; they are never tighter than the truth.
//
// Invariant: a range, once computed, is never recomputed; like ConstantPass it reads a graph and
// a type table that stay unchanged while it runs, and it evaluates each node after `consts` has.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "frontends/onnx/onnx_const_pass.h"
#include "frontends/onnx/onnx_model.h"

namespace headroom::onnx_import {

inline constexpr int64_t kMaxRangeElements = 4096;

struct ValueRange {
  bool per_element = false;    // lo/hi hold one value per element (row-major), else one each
  std::vector<int64_t> shape;  // when per_element
  std::vector<double> lo, hi;
  double min() const;  // the smallest lo
  double max() const;  // the largest hi
};

class ValueRanges {
 public:
  ValueRanges(const onnx::GraphProto& g, int64_t opset, const TypeTable& types,
              ConstantPass& consts);

  // Evaluates the nodes before index `end` not evaluated yet. REQUIRES: consts.run_until(end).
  void run_until(int end);

  // The range of `name`: computed, or the unbounded range of its element type.
  ValueRange range(const std::string& name);

  // A folded value (ConstantPass), or nullptr.
  const ConstTensor* folded(const std::string& name);

 private:
  void eval(const onnx::NodeProto& node);
  ValueRange unbounded(const std::string& name) const;

  const onnx::GraphProto& g_;
  int64_t opset_;
  const TypeTable& types_;
  ConstantPass& consts_;
  std::unordered_map<std::string, ValueRange> ranges_;
  int next_ = 0;
};

}  // namespace headroom::onnx_import
