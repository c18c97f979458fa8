#include "frontends/onnx/onnx_level_partition.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "frontends/onnx/onnx_const.h"
#include "util/checked.h"

namespace headroom::onnx_import {
namespace {

using onnx::NodeProto;

// The value of a one-element constant given by a Constant node or an inline initializer.
std::optional<double> scalar_constant(const std::string& name,
                                      const std::unordered_map<std::string, const NodeProto*>& producer,
                                      const std::unordered_map<std::string, const onnx::TensorProto*>& inits) {
  const onnx::TensorProto* t = nullptr;
  if (auto i = inits.find(name); i != inits.end()) {
    t = i->second;
  } else if (auto p = producer.find(name); p != producer.end() && p->second->op_type() == "Constant" &&
                                           is_default_domain(p->second->domain())) {
    t = NodeAttrs(*p->second).t("value");
  }
  if (t == nullptr) return std::nullopt;
  ConstTensor c = decode_tensor(*t, name, /*max_elements=*/1);
  if (!c.known || c.size() != 1) return std::nullopt;
  return c.as_double(0);
}

}  // namespace

std::vector<LevelPartition> find_level_partitions(const onnx::GraphProto& g, const TypeTable& types) {
  std::unordered_map<std::string, const NodeProto*> producer;
  for (const NodeProto& n : g.node()) {
    for (const std::string& o : n.output()) producer[o] = &n;
  }
  std::unordered_map<std::string, const onnx::TensorProto*> inits;
  for (const onnx::TensorProto& t : g.initializer()) inits[t.name()] = &t;
  auto static_dims = [&](const std::string& name) -> const std::vector<int64_t>* {
    auto t = types.find(name);
    return t != types.end() && t->second.static_shape() ? &t->second.dims : nullptr;
  };

  // x -> (NonZero output, level) in node order; std::map keeps the groups in name order.
  std::map<std::string, std::vector<std::pair<std::string, double>>> by_rows;
  for (const NodeProto& n : g.node()) {
    if (n.op_type() != "NonZero" || !is_default_domain(n.domain()) || n.input_size() != 1 ||
        n.output_size() < 1 || n.output(0).empty() || static_dims(n.output(0)) != nullptr) {
      continue;
    }
    auto eq = producer.find(n.input(0));
    if (eq == producer.end() || eq->second->op_type() != "Equal" || !is_default_domain(eq->second->domain()) ||
        eq->second->input_size() != 2) {
      continue;
    }
    const NodeProto& e = *eq->second;
    // Either side may be the constant.
    for (int side = 0; side < 2; ++side) {
      const std::string& x = e.input(side);
      const std::string& c = e.input(1 - side);
      std::optional<double> level = scalar_constant(c, producer, inits);
      if (!level || scalar_constant(x, producer, inits)) continue;
      const std::vector<int64_t>* xd = static_dims(x);
      const std::vector<int64_t>* ed = static_dims(e.output(0));
      if (xd == nullptr || ed == nullptr || *xd != *ed) break;  // x must keep its shape through the Equal
      by_rows[x].push_back({n.output(0), *level});
      break;
    }
  }

  std::vector<LevelPartition> out;
  for (const auto& [x, members] : by_rows) {
    LevelPartition p;
    p.rows = x;
    for (const auto& [nz, level] : members) {
      if (std::find(p.levels.begin(), p.levels.end(), level) == p.levels.end()) p.levels.push_back(level);
      p.level_of[nz] = level;
    }
    if (p.levels.size() < 2) continue;
    p.total = 1;
    for (int64_t d : *static_dims(x)) p.total = checked_mul(p.total, d, "'" + x + "': its size");
    p.worst_level = p.levels.back();  // see the header: the worst vertex simulated
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace headroom::onnx_import
