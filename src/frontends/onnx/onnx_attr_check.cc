#include "frontends/onnx/onnx_attr_check.h"

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "frontends/onnx/onnx_model.h"
#include "util/error.h"

namespace headroom::onnx_import {
namespace {

// Ops whose `pads` are a convolution or pooling window's (Pad's own `pads` may be negative).
bool windowed(const std::string& op) {
  static const std::set<std::string> kOps = {"Conv",    "ConvInteger", "QLinearConv", "ConvTranspose",
                                             "AveragePool", "MaxPool",  "LpPool",      "MaxUnpool"};
  return kOps.count(op) > 0;
}

std::string list_text(const std::vector<int64_t>& v) {
  std::string r = "[";
  for (size_t i = 0; i < v.size() && i < 8; ++i) r += (i ? "," : "") + std::to_string(v[i]);
  return r + (v.size() > 8 ? ",...]" : "]");
}

class NodeCheck {
 public:
  NodeCheck(const onnx::NodeProto& node, size_t index)
      : node_(node), attrs_(node), label_(node_label(node, index)) {}

  void run() {
    const std::string& op = node_.op_type();
    auto kernel = positive_ints("kernel_shape");
    auto strides = positive_ints("strides");
    auto dilations = positive_ints("dilations");
    size_t rank = kernel ? kernel->size() : strides ? strides->size() : dilations ? dilations->size() : 0;
    same_length("strides", strides, rank);
    same_length("dilations", dilations, rank);
    if (windowed(op)) {
      auto pads = bounded_ints("pads", 0);
      if (pads && rank > 0 && pads->size() != 2 * rank)
        fail("pads", list_text(*pads) + " has " + std::to_string(pads->size()) +
                         " values, expected " + std::to_string(2 * rank) + " (two per axis)");
      bounded_ints("output_padding", 0);
      bounded_ints("output_shape", 0);
    }
    positive_int("group");
    positive_int("blocksize");
    if (auto scales = attrs_.floats("scales")) {
      for (double s : *scales) {
        if (!std::isfinite(s) || s <= 0 || s > static_cast<double>(kMaxWindowValue))
          fail("scales", "holds " + std::to_string(s) + "; each scale must be a positive finite number");
      }
    }
    axes("axes", -kMaxAxis);
    axes("perm", 0);
  }

 private:
  [[noreturn]] void fail(const char* attr, const std::string& why) const {
    throw InputError(label_ + " attribute '" + attr + "' " + why);
  }

  std::optional<std::vector<int64_t>> bounded_ints(const char* name, int64_t min) const {
    auto v = attrs_.ints(name);
    if (!v) return v;
    for (int64_t x : *v) {
      if (x < min || x > kMaxWindowValue)
        fail(name, list_text(*v) + " holds " + std::to_string(x) + "; each value must be in [" +
                       std::to_string(min) + ", " + std::to_string(kMaxWindowValue) + "]");
    }
    return v;
  }
  std::optional<std::vector<int64_t>> positive_ints(const char* name) const {
    return bounded_ints(name, 1);
  }
  void same_length(const char* name, const std::optional<std::vector<int64_t>>& v, size_t rank) const {
    if (v && v->size() != rank)
      fail(name, list_text(*v) + " has " + std::to_string(v->size()) + " values, expected " +
                     std::to_string(rank) + " (one per spatial axis)");
  }
  void positive_int(const char* name) const {
    if (!attrs_.has(name)) return;
    int64_t v = attrs_.i(name, 1);
    if (v < 1 || v > kMaxWindowValue)
      fail(name, "is " + std::to_string(v) + "; it must be in [1, " + std::to_string(kMaxWindowValue) + "]");
  }
  void axes(const char* name, int64_t min) const {
    auto v = attrs_.ints(name);
    if (!v) return;
    std::set<int64_t> seen;
    for (int64_t a : *v) {
      if (a < min || a >= kMaxAxis)
        fail(name, list_text(*v) + " holds axis " + std::to_string(a) + ", out of range");
      if (!seen.insert(a).second)
        fail(name, list_text(*v) + " repeats axis " + std::to_string(a));
    }
  }

  const onnx::NodeProto& node_;
  NodeAttrs attrs_;
  std::string label_;
};

}  // namespace

void check_attributes(const onnx::GraphProto& g) {
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& node = g.node(i);
    if (!is_default_domain(node.domain())) continue;
    try {
      NodeCheck(node, static_cast<size_t>(i)).run();
    } catch (const InputError& e) {
      const std::string what = e.what();
      // A wrongly typed attribute (NodeAttrs) does not name the node yet.
      if (what.rfind("node ", 0) == 0) throw;
      throw InputError(node_label(node, static_cast<size_t>(i)) + " " + what);
    }
  }
}

}  // namespace headroom::onnx_import
