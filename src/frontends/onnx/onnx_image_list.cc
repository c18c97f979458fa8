#include "frontends/onnx/onnx_image_list.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "frontends/onnx/onnx_const.h"
#include "frontends/onnx/onnx_model.h"
#include "util/error.h"

namespace headroom::onnx_import {
namespace {

using onnx::NodeProto;
using onnx::TensorProto;

// How far the normalization may go before the Unsqueeze (torchvision: Sub, Div).
constexpr int kMaxDepth = 8;

bool is_float_elem_type(int32_t elem) {
  return elem == TensorProto::FLOAT || elem == TensorProto::FLOAT16 ||
         elem == TensorProto::DOUBLE || elem == TensorProto::BFLOAT16;
}

// The int64 values of a Constant node's or an initializer's tensor, when inline and well formed.
std::optional<std::vector<int64_t>> int_values(const TensorProto& t) {
  try {
    ConstTensor c = decode_tensor(t, "Unsqueeze axes");
    if (!c.known || c.is_float()) return std::nullopt;
    return c.ints;
  } catch (const InputError&) {
    return std::nullopt;  // the import reports a malformed tensor with its own message
  }
}

}  // namespace

std::optional<std::vector<int64_t>> image_list_input(const onnx::GraphProto& g,
                                                     const onnx::ValueInfoProto& input) {
  const auto& type = input.type().tensor_type();
  if (!type.has_shape() || type.shape().dim_size() != 3 || !is_float_elem_type(type.elem_type()))
    return std::nullopt;
  std::vector<int64_t> dims;
  for (const auto& d : type.shape().dim()) {
    if (d.value_case() != onnx::TensorShapeProto_Dimension::kDimValue || d.dim_value() <= 0)
      return std::nullopt;
    dims.push_back(d.dim_value());
  }
  if (dims[0] != 1 && dims[0] != 3) return std::nullopt;

  // Constant axes: Constant nodes' values and initializers.
  std::unordered_map<std::string, const TensorProto*> constants;
  for (const TensorProto& t : g.initializer()) constants[t.name()] = &t;
  std::unordered_map<std::string, std::vector<const NodeProto*>> readers;
  for (const NodeProto& n : g.node()) {
    if (n.op_type() == "Constant" && n.output_size() == 1) {
      for (const auto& a : n.attribute()) {
        if (a.name() == "value" && a.has_t()) constants[n.output(0)] = &a.t();
      }
    }
    for (const std::string& in : n.input()) readers[in].push_back(&n);
  }
  static const std::unordered_set<std::string> kElementwise = {"Sub", "Div", "Mul",
                                                              "Add", "Cast", "Identity"};
  std::vector<std::string> frontier = {input.name()};
  std::unordered_set<std::string> seen = {input.name()};
  for (int depth = 0; depth <= kMaxDepth && !frontier.empty(); ++depth) {
    std::vector<std::string> next;
    for (const std::string& t : frontier) {
      for (const NodeProto* n : readers[t]) {
        if (!is_default_domain(n->domain())) continue;
        if (n->op_type() == "Unsqueeze" && n->input_size() > 0 && n->input(0) == t) {
          std::optional<std::vector<int64_t>> axes;
          for (const auto& a : n->attribute()) {
            if (a.name() == "axes") axes = std::vector<int64_t>(a.ints().begin(), a.ints().end());
          }
          if (!axes && n->input_size() > 1) {
            auto c = constants.find(n->input(1));
            if (c != constants.end()) axes = int_values(*c->second);
          }
          if (axes && axes->size() == 1 && (*axes)[0] == 0) return dims;
        }
        if (kElementwise.count(n->op_type()) == 0) continue;
        for (const std::string& o : n->output()) {
          if (!o.empty() && seen.insert(o).second) next.push_back(o);
        }
      }
    }
    frontier = std::move(next);
  }
  return std::nullopt;
}

std::string image_list_text(const std::string& input, const std::vector<int64_t>& image) {
  std::string shape = "[";
  for (size_t k = 0; k < image.size(); ++k) shape += (k ? "," : "") + std::to_string(image[k]);
  shape += "]";
  return "one image (input '" + input + "' " + shape +
         ", which the graph unsqueezes to a batch of one: an image-list export, as torchvision's "
         "detection models are)";
}

}  // namespace headroom::onnx_import
