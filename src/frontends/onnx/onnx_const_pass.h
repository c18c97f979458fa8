// The values of a top-level ONNX graph known at import time, computed in node order: constants,
// inline initializers, and what fold_node (onnx_const.h) derives from them and from static shapes
// (Shape and Size of any tensor whose shape inference gives a static shape), as the lowering
// folds them. Control flow (If, Loop, Scan) and other domains are never evaluated.
//
// Invariant: a value, once computed, is never recomputed; the pass reads the graph and the type
// table it was made with, which must outlive it and stay unchanged while it runs.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>

#include "frontends/onnx/onnx_const.h"
#include "frontends/onnx/onnx_model.h"

namespace headroom::onnx_import {

class ConstantPass {
 public:
  ConstantPass(const onnx::GraphProto& g, int64_t opset, const TypeTable& types);

  // Evaluates the nodes before index `end` not evaluated yet (each node once, in order).
  void run_until(int end);

  // A folded node output or an initializer (known when its data is inline and small); nullptr
  // for a runtime tensor.
  const ConstTensor* value(const std::string& name);

 private:
  // A stand-in carrying only the static shape of a runtime tensor (for Shape and Size).
  const ConstTensor* shape_of(const std::string& name);
  void eval(const onnx::NodeProto& node, int index);

  const onnx::GraphProto& g_;
  int64_t opset_;
  const TypeTable& types_;
  std::unordered_map<std::string, const onnx::TensorProto*> initializers_;
  std::unordered_map<std::string, ConstTensor> values_;
  std::deque<ConstTensor> shapes_;  // stable addresses
  int next_ = 0;
};

}  // namespace headroom::onnx_import
