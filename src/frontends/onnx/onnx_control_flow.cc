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
#include "frontends/onnx/onnx_model.h"
#include "util/error.h"

namespace headroom::onnx_import {
namespace {

using onnx::AttributeProto;
using onnx::GraphProto;
using onnx::NodeProto;

bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

bool is_if(const NodeProto& n) { return n.op_type() == "If" && is_default_domain(n.domain()); }

bool is_loop(const NodeProto& n) { return n.op_type() == "Loop" && is_default_domain(n.domain()); }

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

// The values of the top-level graph known at import time, computed in node order: constants,
// inline initializers, and what fold_node derives from them and from static shapes (Shape and
// Size of any tensor whose shape inference gives a static shape), as the lowering folds them.
class ConstantPass {
 public:
  ConstantPass(const GraphProto& g, int64_t opset, const TypeTable& types)
      : g_(g), opset_(opset), types_(types) {
    for (const onnx::TensorProto& t : g.initializer()) initializers_.emplace(t.name(), &t);
  }

  // Runs nodes [0, end) and returns the value of `name` afterwards, if it is known.
  void run_until(int end) {
    for (; next_ < end; ++next_) eval(g_.node(next_), next_);
  }

  const ConstTensor* value(const std::string& name) {
    auto it = values_.find(name);
    if (it != values_.end()) return &it->second;
    auto init = initializers_.find(name);
    if (init == initializers_.end()) return nullptr;
    ConstTensor c = decode_tensor(*init->second, "initializer '" + name + "'");
    return &values_.emplace(name, std::move(c)).first->second;
  }

 private:
  // A stand-in carrying only the static shape of a runtime tensor (for Shape and Size).
  const ConstTensor* shape_of(const std::string& name) {
    if (const ConstTensor* v = value(name)) return v;
    auto t = types_.find(name);
    if (t == types_.end() || !t->second.static_shape()) return nullptr;
    ConstTensor s;
    s.elem = t->second.elem != 0 ? t->second.elem : static_cast<int32_t>(onnx::TensorProto::FLOAT);
    s.shape = t->second.dims;
    shapes_.push_back(std::move(s));
    return &shapes_.back();
  }

  void eval(const NodeProto& node, int index) {
    if (!is_default_domain(node.domain()) || is_if(node) || is_loop(node)) return;
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

  const GraphProto& g_;
  int64_t opset_;
  const TypeTable& types_;
  std::unordered_map<std::string, const onnx::TensorProto*> initializers_;
  std::unordered_map<std::string, ConstTensor> values_;
  std::deque<ConstTensor> shapes_;  // stable addresses
  int next_ = 0;
};

// Renames every occurrence of a tensor name in `g` and the subgraphs below it.
void rename_all(GraphProto& g, const std::unordered_map<std::string, std::string>& to) {
  auto fix = [&](std::string* name) {
    auto it = to.find(*name);
    if (it != to.end()) *name = it->second;
  };
  for (NodeProto& n : *g.mutable_node()) {
    for (std::string& in : *n.mutable_input()) fix(&in);
    for (std::string& out : *n.mutable_output()) fix(&out);
    for (AttributeProto& a : *n.mutable_attribute()) {
      if (a.has_g()) rename_all(*a.mutable_g(), to);
      for (GraphProto& sub : *a.mutable_graphs()) rename_all(sub, to);
    }
  }
  for (onnx::ValueInfoProto& o : *g.mutable_output()) fix(o.mutable_name());
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
  for (onnx::TensorProto& t : *branch.mutable_initializer()) *top.add_initializer() = std::move(t);
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


NodeProto constant_node(const std::string& name, const std::string& output, int32_t elem,
                        int64_t value, bool scalar) {
  NodeProto c;
  c.set_op_type("Constant");
  c.set_name(name);
  c.add_output(output);
  AttributeProto* a = c.add_attribute();
  a->set_name("value");
  a->set_type(AttributeProto::TENSOR);
  onnx::TensorProto* t = a->mutable_t();
  t->set_data_type(elem);
  if (!scalar) t->add_dims(1);
  if (elem == onnx::TensorProto::BOOL)
    t->add_int32_data(value != 0);
  else
    t->add_int64_data(value);
  return c;
}

// Whether the body's continue condition is the incoming one (cond_in passed through, directly or
// by an Identity) or a constant true: a `for` loop, which only the trip count ends.
bool continues_unconditionally(const GraphProto& body, int64_t opset) {
  const std::string& cond_in = body.input(1).name();
  const std::string& cond_out = body.output(0).name();
  if (cond_out == cond_in) return true;
  for (const NodeProto& n : body.node()) {
    if (n.output_size() == 0 || n.output(0) != cond_out) continue;
    if (n.op_type() == "Identity" && n.input_size() == 1 && n.input(0) == cond_in) return true;
    if (n.op_type() != "Constant") return false;
    std::optional<std::vector<ConstTensor>> v = fold_node(n, opset, {});
    return v && v->at(0).known && v->at(0).size() == 1 && v->at(0).as_double(0) != 0.0;
  }
  return false;
}

// The nodes that replace a Loop of `trips` iterations: the body once per iteration, its
// loop-carried values threaded from one copy to the next, each scan output the Concat of the
// iterations' values unsqueezed on a new axis 0. `budget` counts the nodes unrolling may still add.
std::vector<NodeProto> unrolled_loop(const NodeProto& node, int64_t trips,
                                     const std::string& label, int64_t opset, GraphProto& top,
                                     int64_t& budget) {
  const GraphProto* body_ptr = nullptr;
  for (const AttributeProto& a : node.attribute()) {
    if (a.name() == "body" && a.type() == AttributeProto::GRAPH) body_ptr = &a.g();
  }
  if (body_ptr == nullptr) throw InputError(label + " has no body graph");
  const GraphProto& body = *body_ptr;
  const int carried = node.input_size() - 2;
  if (carried < 0 || body.input_size() != carried + 2 || body.output_size() < carried + 1 ||
      node.output_size() != body.output_size() - 1) {
    throw InputError(label + ": its body's inputs and outputs do not match the Loop's (" +
                     std::to_string(body.input_size()) + " body inputs and " +
                     std::to_string(body.output_size()) + " body outputs for " +
                     std::to_string(node.input_size()) + " Loop inputs and " +
                     std::to_string(node.output_size()) + " outputs)");
  }
  const int scans = body.output_size() - 1 - carried;
  if (trips > 0 && !continues_unconditionally(body, opset)) {
    throw InputError(label + ": its body's continue condition '" + body.output(0).name() +
                     "' depends on runtime values (only loops that the trip count ends unroll)");
  }
  if (trips == 0 && scans > 0) {
    throw InputError(label + ": zero iterations leave its scan outputs without a shape");
  }
  if (body.sparse_initializer_size() != 0)
    throw InputError(label + ": sparse initializers in a loop body are not supported");
  const int64_t per_trip = body.node_size() + 2 + scans;
  if (trips > budget / std::max<int64_t>(1, per_trip)) {
    throw InputError(label + ": unrolling " + std::to_string(trips) + " iterations of its " +
                     std::to_string(body.node_size()) + "-node body goes past the bound of " +
                     std::to_string(kMaxUnrolledNodes) + " unrolled nodes");
  }
  budget -= trips * per_trip;
  for (const onnx::TensorProto& t : body.initializer()) *top.add_initializer() = t;

  const std::string base = node.output_size() > 0 && !node.output(0).empty()
                               ? node.output(0)
                               : node.name() + "/loop";
  std::vector<std::string> state;
  for (int j = 0; j < carried; ++j) {
    if (node.input(j + 2).empty()) throw InputError(label + ": a loop-carried input is empty");
    state.push_back(node.input(j + 2));
  }
  std::vector<std::vector<std::string>> scanned(static_cast<size_t>(scans));
  std::vector<NodeProto> nodes;
  for (int64_t k = 0; k < trips; ++k) {
    const std::string tag = "/iter" + std::to_string(k);
    std::unordered_map<std::string, std::string> rename;
    const std::string iter = base + tag + "/iteration_num";
    const std::string cond = base + tag + "/cond";
    nodes.push_back(constant_node(node.name(), iter, onnx::TensorProto::INT64, k, true));
    nodes.push_back(constant_node(node.name(), cond, onnx::TensorProto::BOOL, 1, true));
    if (!body.input(0).name().empty()) rename[body.input(0).name()] = iter;
    if (!body.input(1).name().empty()) rename[body.input(1).name()] = cond;
    for (int j = 0; j < carried; ++j) rename[body.input(j + 2).name()] = state[static_cast<size_t>(j)];
    for (const NodeProto& n : body.node()) {
      for (const std::string& o : n.output()) {
        if (!o.empty()) rename[o] = o + tag;
      }
    }
    GraphProto copy = body;
    copy.clear_initializer();
    rename_all(copy, rename);
    for (NodeProto& n : *copy.mutable_node()) nodes.push_back(std::move(n));
    for (int j = 0; j < carried; ++j) state[static_cast<size_t>(j)] = copy.output(j + 1).name();
    for (int s = 0; s < scans; ++s)
      scanned[static_cast<size_t>(s)].push_back(copy.output(1 + carried + s).name());
  }
  for (int j = 0; j < carried; ++j) {
    if (node.output(j).empty()) continue;
    NodeProto id;
    id.set_op_type("Identity");
    id.set_name(node.name());
    id.add_input(state[static_cast<size_t>(j)]);
    id.add_output(node.output(j));
    nodes.push_back(std::move(id));
  }
  // Scan outputs stack the iterations' values on a new leading axis (ONNX Loop's definition):
  // Unsqueeze(axis 0) each, then Concat on axis 0.
  const std::string axes = base + "/scan_axes";
  if (scans > 0 && opset >= 13)
    nodes.push_back(constant_node(node.name(), axes, onnx::TensorProto::INT64, 0, false));
  for (int s = 0; s < scans; ++s) {
    const std::string& out = node.output(carried + s);
    if (out.empty()) continue;
    NodeProto cat;
    cat.set_op_type("Concat");
    cat.set_name(node.name());
    AttributeProto* axis = cat.add_attribute();
    axis->set_name("axis");
    axis->set_type(AttributeProto::INT);
    axis->set_i(0);
    for (size_t k = 0; k < scanned[static_cast<size_t>(s)].size(); ++k) {
      NodeProto un;
      un.set_op_type("Unsqueeze");
      un.set_name(node.name());
      un.add_input(scanned[static_cast<size_t>(s)][k]);
      if (opset >= 13) {
        un.add_input(axes);
      } else {
        AttributeProto* a = un.add_attribute();
        a->set_name("axes");
        a->set_type(AttributeProto::INTS);
        a->add_ints(0);
      }
      const std::string piece = out + "/iter" + std::to_string(k) + "/unsqueezed";
      un.add_output(piece);
      nodes.push_back(std::move(un));
      cat.add_input(piece);
    }
    cat.add_output(out);
    nodes.push_back(std::move(cat));
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
      if (!(is_if(node) || is_loop(node)) || a.type() != AttributeProto::GRAPH) {
        throw InputError(label + " has a subgraph (control flow other than If and Loop is not "
                                 "supported)");
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

int resolve_control_flow(onnx::ModelProto& model, int64_t opset) {
  int resolved = 0;
  int64_t budget = kMaxUnrolledNodes;
  for (;;) {
    GraphProto& g = *model.mutable_graph();
    std::vector<int> flow;
    for (int i = 0; i < g.node_size(); ++i) {
      if (is_if(g.node(i)) || is_loop(g.node(i))) flow.push_back(i);
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
