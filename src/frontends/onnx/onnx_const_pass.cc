#include "frontends/onnx/onnx_const_pass.h"

#include <optional>
#include <vector>

#include "util/error.h"

namespace headroom::onnx_import {
namespace {

bool has_subgraph_op(const onnx::NodeProto& n) {
  return n.op_type() == "If" || n.op_type() == "Loop" || n.op_type() == "Scan";
}

}  // namespace

ConstantPass::ConstantPass(const onnx::GraphProto& g, int64_t opset, const TypeTable& types)
    : g_(g), opset_(opset), types_(types) {
  for (const onnx::TensorProto& t : g.initializer()) initializers_.emplace(t.name(), &t);
}

void ConstantPass::run_until(int end) {
  for (; next_ < end; ++next_) eval(g_.node(next_), next_);
}

const ConstTensor* ConstantPass::value(const std::string& name) {
  auto it = values_.find(name);
  if (it != values_.end()) return &it->second;
  auto init = initializers_.find(name);
  if (init == initializers_.end()) return nullptr;
  ConstTensor c = decode_tensor(*init->second, "initializer '" + name + "'");
  return &values_.emplace(name, std::move(c)).first->second;
}

const ConstTensor* ConstantPass::shape_of(const std::string& name) {
  if (const ConstTensor* v = value(name)) return v;
  auto t = types_.find(name);
  if (t == types_.end() || !t->second.static_shape()) return nullptr;
  ConstTensor s;
  s.elem = t->second.elem != 0 ? t->second.elem : static_cast<int32_t>(onnx::TensorProto::FLOAT);
  s.shape = t->second.dims;
  shapes_.push_back(std::move(s));
  return &shapes_.back();
}

void ConstantPass::eval(const onnx::NodeProto& node, int index) {
  if (!is_default_domain(node.domain()) || has_subgraph_op(node)) return;
  const bool shape_only = node.op_type() == "Shape" || node.op_type() == "Size";
  std::vector<const ConstTensor*> ins;
  for (const std::string& in : node.input()) {
    if (in.empty()) {
      ins.push_back(nullptr);
      continue;
    }
    const ConstTensor* v = shape_only ? shape_of(in) : value(in);
    if (v == nullptr) return;  // a runtime input: the node does not fold
    ins.push_back(v);
  }
  std::optional<std::vector<ConstTensor>> r;
  try {
    r = fold_node(node, opset_, ins);
  } catch (const InputError& e) {
    throw InputError(node_label(node, static_cast<size_t>(index)) + ": " + e.what());
  }
  if (!r) return;
  for (size_t k = 0; k < r->size() && k < static_cast<size_t>(node.output_size()); ++k) {
    const std::string& out = node.output(static_cast<int>(k));
    if (!out.empty()) values_[out] = std::move((*r)[k]);
  }
}

}  // namespace headroom::onnx_import
