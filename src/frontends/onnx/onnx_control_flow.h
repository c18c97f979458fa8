// Control flow resolved at import time (If, Loop, Scan). torch.onnx writes an `If` where Python
// code branched on something the tracer could not prove constant: `x.squeeze(d)` of a dimension
// that is 1 only for the traced input becomes If(Shape(x)[d] == 1, Squeeze, Identity). Once the
// symbolic dimensions are bound, such a condition is Shape arithmetic that folds, and PyTorch would
// have run exactly one branch: the importer replaces the If by the nodes of that branch.
//
// A Loop whose trip count folds (torch.onnx's `for i in range(n)` over a size) is unrolled.
//
// Invariants after resolve_control_flow: the top-level graph has no node with a subgraph; every
// node of a taken branch keeps its name (module scopes, messages) and reads outer-scope tensors by
// their own names; a branch output becomes the If's output name (the node producing it is renamed,
// or an Identity is added when the branch passes an outer tensor or an initializer through).
// Conditions are folded with onnx_const.h's fold_node over the graph's constants and the static
// shapes of shape inference, the same values the lowering folds.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <functional>

namespace headroom::onnx_import {

// Checks the branches of every If and the body of every Loop and Scan (recursively) the way
// check_structure and check_attributes check the top-level graph: names without NUL bytes,
// default-domain schemas, attributes safe for ONNX's shape inference (which visits branches).
// InputError naming the node.
void check_branches(const onnx::GraphProto& g, int64_t opset);

// Bound on the nodes that unrolling loops may add to one model: per Loop or Scan, its trip count
// times the nodes of its body and of every subgraph inside it.
inline constexpr int64_t kMaxUnrolledNodes = 100000;

// Replaces each top-level If whose condition folds by the branch it takes, each Loop whose trip
// count folds (and whose body continues unconditionally: a Python `for`) by its body once per
// iteration, loop-carried values threaded, scan outputs concatenated on a new axis 0, and each
// Scan over inputs of static shape likewise (onnx_unroll.h).
// Repeats for control flow inside the new nodes and for conditions that fold only once an earlier
// node is resolved. Returns how many nodes were resolved. REQUIRES: check_structure and
// check_branches passed and the symbolic dimensions are bound (bind_dims). InputError naming the
// first node that cannot be resolved (a condition or trip count on runtime values, a value that
// is not a single number, a body that does not match its Loop, more than kMaxUnrolledNodes).
// `before_round`, when given, runs on the model at the start of every round, before shape
// inference (onnx_detection.h bounds data-dependent sizes there, so that conditions on them fold).
int resolve_control_flow(onnx::ModelProto& model, int64_t opset,
                         const std::function<void(onnx::ModelProto&)>& before_round = {});

}  // namespace headroom::onnx_import
