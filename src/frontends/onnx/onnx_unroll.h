// Unrolling of ONNX loops into straight-line nodes (for onnx_control_flow.cc): a Loop with a
// static trip count and a Scan over statically shaped inputs become their body once per
// iteration. Each copy's node outputs get the suffix "/iterK"; loop-carried (state) values are
// read from the previous copy's outputs; scan outputs are the Concat, on the output's scan axis,
// of the iterations' values unsqueezed there. Node names are kept (module scopes).
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "frontends/onnx/onnx_model.h"

namespace headroom::onnx_import {

// Renames every occurrence of a tensor name in `g` and the subgraphs below it.
void rename_all(onnx::GraphProto& g, const std::unordered_map<std::string, std::string>& to);

// Adds a subgraph's initializer `t` to `top` unless `top` already holds one of that name with the
// same bytes: each unrolled copy of a body holding a nested initializer (in an If branch or an
// inner loop's body) brings the same constant again, and one constant serves every copy. A
// same-named initializer with other contents is added, for check_structure to report twice.
void add_initializer_once(onnx::GraphProto& top, const onnx::TensorProto& t);

// The nodes that replace `node` (a Loop) when it runs `trips` iterations. `budget`: how many
// nodes unrolling may still add (decremented); InputError naming `label` when the body does not
// match the Loop, its continue condition is computed (a `while`), or the budget runs out. Body
// initializers are appended to `top`.
std::vector<onnx::NodeProto> unrolled_loop(const onnx::NodeProto& node, int64_t trips,
                                           const std::string& label, int64_t opset,
                                           onnx::GraphProto& top, int64_t& budget);

// The nodes that replace `node` (a Scan): the trip count is the scan inputs' length on their
// scan axes, from `types` (static shapes after binding). InputError naming `label` when a scan
// input's shape is not static, lengths differ, axes are out of range, or the budget runs out.
std::vector<onnx::NodeProto> unrolled_scan(const onnx::NodeProto& node, const TypeTable& types,
                                           const std::string& label, int64_t opset,
                                           onnx::GraphProto& top, int64_t& budget);

}  // namespace headroom::onnx_import
