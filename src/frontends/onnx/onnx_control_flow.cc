#include "frontends/onnx/onnx_control_flow.h"

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "frontends/onnx/onnx_attr_check.h"
#include "frontends/onnx/onnx_const.h"
#include "frontends/onnx/onnx_const_pass.h"
#include "frontends/onnx/onnx_model.h"
#include "frontends/onnx/onnx_unroll.h"
#include "util/error.h"

namespace headroom::onnx_import {
namespace {

using onnx::AttributeProto;
using onnx::GraphProto;
using onnx::NodeProto;

bool is_if(const NodeProto& n) { return n.op_type() == "If" && is_default_domain(n.domain()); }

bool is_loop(const NodeProto& n) { return n.op_type() == "Loop" && is_default_domain(n.domain()); }

bool is_scan(const NodeProto& n) { return n.op_type() == "Scan" && is_default_domain(n.domain()); }

bool is_graph_attr(const AttributeProto& a) {
  return a.type() == AttributeProto::GRAPH || a.type() == AttributeProto::GRAPHS;
}

const GraphProto& branch_of(const NodeProto& node, bool then, const std::string& label) {
  const char* name = then ? "then_branch" : "else_branch";
  for (const AttributeProto& a : node.attribute()) {
    if (a.name() == name && a.type() == AttributeProto::GRAPH) return a.g();
  }
  throw InputError(label + " has no " + name + " graph");
}

// The nodes that replace `node` (an If) when it takes `then`: the branch's nodes with its
// outputs renamed to the If's, plus an Identity per output the branch passes through.
std::vector<NodeProto> taken_branch(const NodeProto& node, bool then, const std::string& label,
                                    GraphProto& top) {
  GraphProto branch = branch_of(node, then, label);
  if (branch.output_size() != node.output_size()) {
    throw InputError(label + ": its " + (then ? "then" : "else") + " branch has " +
                     std::to_string(branch.output_size()) + " outputs for the If's " +
                     std::to_string(node.output_size()));
  }
  if (branch.input_size() != 0) {
    throw InputError(label + ": its " + std::string(then ? "then" : "else") +
                     " branch declares inputs (If branches take none)");
  }
  if (branch.sparse_initializer_size() != 0) {
    throw InputError(label + ": sparse initializers in a branch are not supported");
  }
  std::unordered_set<std::string> produced;
  for (const NodeProto& n : branch.node()) {
    for (const std::string& o : n.output()) produced.insert(o);
  }
  std::unordered_map<std::string, std::string> rename;
  std::vector<std::pair<std::string, std::string>> pass_through;  // (If output, branch value)
  for (int k = 0; k < node.output_size(); ++k) {
    const std::string& src = branch.output(k).name();
    const std::string& dst = node.output(k);
    if (dst.empty()) continue;  // an output no one reads
    if (!src.empty() && produced.count(src) && !rename.count(src))
      rename.emplace(src, dst);
    else
      pass_through.emplace_back(dst, src);
  }
  rename_all(branch, rename);
  for (const onnx::TensorProto& t : branch.initializer()) add_initializer_once(top, t);
  std::vector<NodeProto> nodes(branch.node().begin(), branch.node().end());
  for (const auto& [dst, src] : pass_through) {
    if (src.empty()) throw InputError(label + ": a branch output has an empty name");
    NodeProto id;
    id.set_op_type("Identity");
    id.set_name(node.name());
    auto r = rename.find(src);
    id.add_input(r != rename.end() ? r->second : src);
    id.add_output(dst);
    nodes.push_back(std::move(id));
  }
  return nodes;
}

}  // namespace

void check_branches(const GraphProto& g, int64_t opset) {
  for (int i = 0; i < g.node_size(); ++i) {
    const NodeProto& node = g.node(i);
    for (const AttributeProto& a : node.attribute()) {
      if (!is_graph_attr(a)) continue;
      const std::string label = node_label(node, static_cast<size_t>(i));
      if (!(is_if(node) || is_loop(node) || is_scan(node)) || a.type() != AttributeProto::GRAPH) {
        throw InputError(label +
                         " has a subgraph (control flow other than If, Loop and Scan is "
                         "not supported)");
      }
      const GraphProto& sub = a.g();
      check_names(sub);
      for (const onnx::TensorProto& t : sub.initializer()) check_initializer(t);
      for (int j = 0; j < sub.node_size(); ++j)
        check_node_schema(sub.node(j), node_label(sub.node(j), static_cast<size_t>(j)), opset);
      check_attributes(sub);
      check_branches(sub, opset);
    }
  }
}

int resolve_control_flow(onnx::ModelProto& model, int64_t opset,
                         const std::function<void(onnx::ModelProto&)>& before_round) {
  int resolved = 0;
  int64_t budget = kMaxUnrolledNodes;
  for (;;) {
    if (before_round) before_round(model);
    GraphProto& g = *model.mutable_graph();
    std::vector<int> flow;
    for (int i = 0; i < g.node_size(); ++i) {
      if (is_if(g.node(i)) || is_loop(g.node(i)) || is_scan(g.node(i))) flow.push_back(i);
    }
    if (flow.empty()) return resolved;
    TypeTable types = infer_types(model);
    ConstantPass pass(g, opset, types);
    std::map<int, std::vector<NodeProto>> replaced;  // node index -> the nodes replacing it
    int first_open = -1;
    std::string why_open;
    for (int i : flow) {
      pass.run_until(i);
      const NodeProto& node = g.node(i);
      const std::string label = node_label(node, static_cast<size_t>(i));
      // A single known value of input `slot`, or nothing when it does not fold.
      auto folded = [&](int slot, const char* what) -> std::optional<double> {
        const ConstTensor* v = pass.value(node.input(slot));
        if (v == nullptr || !v->known) return std::nullopt;
        if (v->size() != 1) {
          throw InputError(label + ": its " + what + " '" + node.input(slot) + "' has " +
                           std::to_string(v->size()) + " values, not one");
        }
        return v->as_double(0);
      };
      auto open = [&](const std::string& why) {
        if (first_open < 0) {
          first_open = i;
          why_open = label + ": " + why;
        }
      };
      if (is_if(node)) {
        std::optional<double> cond = folded(0, "condition");
        if (!cond) {
          open("its condition '" + node.input(0) +
               "' depends on runtime values and does not fold at import time (an If is "
               "imported only when its condition is shape arithmetic or constants)");
          continue;
        }
        replaced[i] = taken_branch(node, *cond != 0.0, label, g);
        continue;
      }
      if (is_scan(node)) {
        replaced[i] = unrolled_scan(node, types, label, opset, g, budget);
        continue;
      }
      // Loop: a trip count that folds, and a start condition that is absent or folds.
      std::optional<double> trips =
          node.input_size() > 0 && !node.input(0).empty() ? folded(0, "trip count") : std::nullopt;
      if (!trips) {
        open("its trip count " +
             (node.input_size() > 0 && !node.input(0).empty() ? "'" + node.input(0) + "' " : "") +
             "does not fold at import time (only loops with a static trip count unroll)");
        continue;
      }
      std::optional<double> start = 1.0;
      if (node.input_size() > 1 && !node.input(1).empty()) start = folded(1, "condition");
      if (!start) {
        open("its condition '" + node.input(1) + "' does not fold at import time");
        continue;
      }
      if (!(*trips >= 0 && *trips <= static_cast<double>(kMaxUnrolledNodes))) {  // NaN too
        throw InputError(label + ": its trip count '" + node.input(0) + "' is outside [0, " +
                         std::to_string(kMaxUnrolledNodes) + "]");
      }
      const int64_t n = *start != 0.0 ? static_cast<int64_t>(*trips) : 0;
      replaced[i] = unrolled_loop(node, n, label, opset, g, budget);
    }
    if (replaced.empty()) throw InputError(why_open);
    std::unordered_set<std::string> stale;
    std::vector<NodeProto> nodes;
    nodes.reserve(static_cast<size_t>(g.node_size()));
    for (int i = 0; i < g.node_size(); ++i) {
      auto r = replaced.find(i);
      if (r == replaced.end()) {
        nodes.push_back(std::move(*g.mutable_node(i)));
        continue;
      }
      for (const std::string& o : g.node(i).output()) stale.insert(o);
      for (NodeProto& n : r->second) nodes.push_back(std::move(n));
      ++resolved;
    }
    g.clear_node();
    for (NodeProto& n : nodes) *g.add_node() = std::move(n);
    // What shape inference gave the replaced nodes' outputs (a merge of both branches, a loop's
    // unknown trip count) is stale now.
    auto* vi = g.mutable_value_info();
    for (int k = vi->size(); k-- > 0;) {
      if (stale.count(vi->Get(k).name())) vi->DeleteSubrange(k, 1);
    }
  }
}

}  // namespace headroom::onnx_import
