#include "frontends/onnx/onnx_unroll.h"

#include <algorithm>
#include <optional>

#include "frontends/onnx/onnx_const.h"
#include "frontends/onnx/onnx_control_flow.h"
#include "util/error.h"

namespace headroom::onnx_import {
namespace {

using onnx::AttributeProto;
using onnx::GraphProto;
using onnx::NodeProto;

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
// `start_cond`: the Loop's own condition input (outer scope), which the caller has folded to
// true: a body that passes that outer tensor on (torchvision's scripted mask pasting in Mask and
// Keypoint R-CNN: Identity of the outer constant true) continues as well.
bool continues_unconditionally(const GraphProto& body, int64_t opset, const std::string& start_cond) {
  const std::string& cond_in = body.input(1).name();
  const std::string& cond_out = body.output(0).name();
  if (cond_out == cond_in || (!start_cond.empty() && cond_out == start_cond)) return true;
  for (const NodeProto& n : body.node()) {
    if (n.output_size() == 0 || n.output(0) != cond_out) continue;
    if (n.op_type() == "Identity" && n.input_size() == 1 &&
        (n.input(0) == cond_in || (!start_cond.empty() && n.input(0) == start_cond))) {
      return true;
    }
    if (n.op_type() != "Constant") return false;
    std::optional<std::vector<ConstTensor>> v = fold_node(n, opset, {});
    return v && v->at(0).known && v->at(0).size() == 1 && v->at(0).as_double(0) != 0.0;
  }
  return false;
}

const GraphProto& body_of(const NodeProto& node, const std::string& label) {
  for (const AttributeProto& a : node.attribute()) {
    if (a.name() == "body" && a.type() == AttributeProto::GRAPH) return a.g();
  }
  throw InputError(label + " has no body graph");
}

// Nodes of `g` and of every subgraph below it: what copies of `g` can add once the control flow
// nested in them is resolved too (both branches of an If are counted).
int64_t total_nodes(const GraphProto& g) {
  int64_t n = g.node_size();
  for (const NodeProto& node : g.node()) {
    for (const AttributeProto& a : node.attribute()) {
      if (a.has_g()) n += total_nodes(a.g());
      for (const GraphProto& sub : a.graphs()) n += total_nodes(sub);
    }
  }
  return n;
}

// Takes `trips` iterations of a body of `body_nodes` nodes (plus `extra` added per iteration) out
// of the budget; InputError past it.
void spend(int64_t trips, int64_t body_nodes, int64_t extra, const std::string& label,
           int64_t& budget) {
  const int64_t per_trip = body_nodes + extra;
  if (trips > budget / std::max<int64_t>(1, per_trip)) {
    throw InputError(label + ": unrolling " + std::to_string(trips) + " iterations of its " +
                     std::to_string(body_nodes) + "-node body goes past the bound of " +
                     std::to_string(kMaxUnrolledNodes) + " unrolled nodes");
  }
  budget -= trips * per_trip;
}

// Appends one copy of `body` to `nodes`: its inputs read the names in `inputs` (one per body
// input, "" leaves it unbound), its node outputs get `tag`. Returns the copy's output names.
std::vector<std::string> append_copy(const GraphProto& body, const std::vector<std::string>& inputs,
                                     const std::string& tag, std::vector<NodeProto>& nodes) {
  std::unordered_map<std::string, std::string> rename;
  for (int j = 0; j < body.input_size(); ++j) {
    if (!body.input(j).name().empty() && !inputs[static_cast<size_t>(j)].empty())
      rename[body.input(j).name()] = inputs[static_cast<size_t>(j)];
  }
  for (const NodeProto& n : body.node()) {
    for (const std::string& o : n.output()) {
      if (!o.empty()) rename[o] = o + tag;
    }
  }
  GraphProto copy = body;
  copy.clear_initializer();
  rename_all(copy, rename);
  for (NodeProto& n : *copy.mutable_node()) nodes.push_back(std::move(n));
  std::vector<std::string> outs;
  for (const onnx::ValueInfoProto& o : copy.output()) outs.push_back(o.name());
  return outs;
}

NodeProto identity(const std::string& name, const std::string& in, const std::string& out) {
  NodeProto id;
  id.set_op_type("Identity");
  id.set_name(name);
  id.add_input(in);
  id.add_output(out);
  return id;
}

AttributeProto int_attr(const std::string& name, int64_t v) {
  AttributeProto a;
  a.set_name(name);
  a.set_type(AttributeProto::INT);
  a.set_i(v);
  return a;
}

// `out` = the `pieces` stacked on a new axis `axis`: Unsqueeze each there, Concat there.
void append_stacked(const std::string& out, const std::vector<std::string>& pieces, int64_t axis,
                    const std::string& name, int64_t opset, std::vector<NodeProto>& nodes) {
  const std::string axes = out + "/stack_axes";
  if (opset >= 13) {
    NodeProto c = constant_node(name, axes, onnx::TensorProto::INT64, axis, false);
    nodes.push_back(std::move(c));
  }
  NodeProto cat;
  cat.set_op_type("Concat");
  cat.set_name(name);
  *cat.add_attribute() = int_attr("axis", axis);
  for (size_t k = 0; k < pieces.size(); ++k) {
    NodeProto un;
    un.set_op_type("Unsqueeze");
    un.set_name(name);
    un.add_input(pieces[k]);
    if (opset >= 13) {
      un.add_input(axes);
    } else {
      AttributeProto* a = un.add_attribute();
      a->set_name("axes");
      a->set_type(AttributeProto::INTS);
      a->add_ints(axis);
    }
    const std::string piece = out + "/iter" + std::to_string(k) + "/unsqueezed";
    un.add_output(piece);
    nodes.push_back(std::move(un));
    cat.add_input(piece);
  }
  cat.add_output(out);
  nodes.push_back(std::move(cat));
}

std::vector<int64_t> ints_attr(const NodeProto& node, const char* name, size_t n,
                               const std::string& label) {
  std::vector<int64_t> v(n, 0);
  for (const AttributeProto& a : node.attribute()) {
    if (a.name() != name) continue;
    if (static_cast<size_t>(a.ints_size()) != n) {
      throw InputError(label + ": attribute '" + name + "' has " + std::to_string(a.ints_size()) +
                       " values for " + std::to_string(n));
    }
    for (size_t k = 0; k < n; ++k) v[k] = a.ints(static_cast<int>(k));
  }
  return v;
}

}  // namespace

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

void add_initializer_once(onnx::GraphProto& top, const onnx::TensorProto& t) {
  for (const onnx::TensorProto& have : top.initializer()) {
    if (have.name() == t.name() && have.SerializeAsString() == t.SerializeAsString()) return;
  }
  *top.add_initializer() = t;
}

std::vector<NodeProto> unrolled_loop(const NodeProto& node, int64_t trips, const std::string& label,
                                     int64_t opset, GraphProto& top, int64_t& budget) {
  const GraphProto& body = body_of(node, label);
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
  const std::string start_cond = node.input_size() > 1 ? node.input(1) : std::string();
  if (trips > 0 && !continues_unconditionally(body, opset, start_cond)) {
    throw InputError(label + ": its body's continue condition '" + body.output(0).name() +
                     "' depends on runtime values (only loops that the trip count ends unroll)");
  }
  if (trips == 0 && scans > 0) {
    throw InputError(label + ": zero iterations leave its scan outputs without a shape");
  }
  if (body.sparse_initializer_size() != 0)
    throw InputError(label + ": sparse initializers in a loop body are not supported");
  spend(trips, total_nodes(body), 2 + scans, label, budget);
  for (const onnx::TensorProto& t : body.initializer()) add_initializer_once(top, t);

  const std::string base = !node.output(0).empty() ? node.output(0) : node.name() + "/loop";
  std::vector<std::string> state;
  for (int j = 0; j < carried; ++j) {
    if (node.input(j + 2).empty()) throw InputError(label + ": a loop-carried input is empty");
    state.push_back(node.input(j + 2));
  }
  std::vector<std::vector<std::string>> scanned(static_cast<size_t>(scans));
  std::vector<NodeProto> nodes;
  for (int64_t k = 0; k < trips; ++k) {
    const std::string tag = "/iter" + std::to_string(k);
    const std::string iter = base + tag + "/iteration_num";
    const std::string cond = base + tag + "/cond";
    nodes.push_back(constant_node(node.name(), iter, onnx::TensorProto::INT64, k, true));
    nodes.push_back(constant_node(node.name(), cond, onnx::TensorProto::BOOL, 1, true));
    std::vector<std::string> inputs = {iter, cond};
    inputs.insert(inputs.end(), state.begin(), state.end());
    std::vector<std::string> outs = append_copy(body, inputs, tag, nodes);
    for (int j = 0; j < carried; ++j)
      state[static_cast<size_t>(j)] = outs[static_cast<size_t>(1 + j)];
    for (int s = 0; s < scans; ++s)
      scanned[static_cast<size_t>(s)].push_back(outs[static_cast<size_t>(1 + carried + s)]);
  }
  for (int j = 0; j < carried; ++j) {
    if (!node.output(j).empty())
      nodes.push_back(identity(node.name(), state[static_cast<size_t>(j)], node.output(j)));
  }
  // Scan outputs stack the iterations' values on a new leading axis (ONNX Loop's definition).
  for (int s = 0; s < scans; ++s) {
    const std::string& out = node.output(carried + s);
    if (!out.empty())
      append_stacked(out, scanned[static_cast<size_t>(s)], 0, node.name(), opset, nodes);
  }
  return nodes;
}

std::vector<NodeProto> unrolled_scan(const NodeProto& node, const TypeTable& types,
                                     const std::string& label, int64_t opset, GraphProto& top,
                                     int64_t& budget) {
  if (opset < 9)
    throw InputError(label + ": Scan before opset 9 (with sequence lengths) is not supported");
  const GraphProto& body = body_of(node, label);
  int64_t m = -1;
  for (const AttributeProto& a : node.attribute()) {
    if (a.name() == "num_scan_inputs") m = a.i();
  }
  const int64_t n_state = node.input_size() - m;
  if (m < 1 || n_state < 0 || body.input_size() != node.input_size() ||
      body.output_size() != node.output_size() || body.output_size() < n_state) {
    throw InputError(label + ": its body's inputs and outputs do not match the Scan's");
  }
  if (body.sparse_initializer_size() != 0)
    throw InputError(label + ": sparse initializers in a scan body are not supported");
  const size_t n = static_cast<size_t>(n_state), ms = static_cast<size_t>(m);
  const size_t k_out = static_cast<size_t>(node.output_size()) - n;
  std::vector<int64_t> in_axes = ints_attr(node, "scan_input_axes", ms, label);
  std::vector<int64_t> in_dirs = ints_attr(node, "scan_input_directions", ms, label);
  std::vector<int64_t> out_axes = ints_attr(node, "scan_output_axes", k_out, label);
  std::vector<int64_t> out_dirs = ints_attr(node, "scan_output_directions", k_out, label);
  // The trip count: every scan input's length on its scan axis, from its static shape.
  int64_t trips = -1;
  std::vector<int64_t> out_rank(k_out, -1);
  for (size_t j = 0; j < ms; ++j) {
    const std::string& in = node.input(static_cast<int>(n + j));
    auto t = types.find(in);
    if (in.empty() || t == types.end() || !t->second.static_shape()) {
      throw InputError(label + ": scan input '" + in +
                       "' has no static shape (the trip count is its length)");
    }
    const int64_t rank = static_cast<int64_t>(t->second.dims.size());
    int64_t& ax = in_axes[j];
    if (ax < -rank || ax >= rank) throw InputError(label + ": scan_input_axes out of range");
    if (ax < 0) ax += rank;
    const int64_t len = t->second.dims[static_cast<size_t>(ax)];
    if (trips >= 0 && len != trips) {
      throw InputError(label + ": its scan inputs have lengths " + std::to_string(trips) + " and " +
                       std::to_string(len));
    }
    trips = len;
  }
  if (trips <= 0)
    throw InputError(label + ": zero iterations leave its scan outputs without a shape");
  spend(trips, total_nodes(body), static_cast<int64_t>(ms) * 2 + static_cast<int64_t>(k_out) + 1,
        label, budget);
  for (const onnx::TensorProto& t : body.initializer()) add_initializer_once(top, t);

  const std::string base = !node.output(0).empty() ? node.output(0) : node.name() + "/scan";
  std::vector<std::string> state(node.input().begin(), node.input().begin() + n_state);
  std::vector<std::vector<std::string>> scanned(k_out);
  std::vector<NodeProto> nodes;
  for (int64_t k = 0; k < trips; ++k) {
    const std::string tag = "/iter" + std::to_string(k);
    std::vector<std::string> inputs = state;
    for (size_t j = 0; j < ms; ++j) {
      // Slice t of the scan input (from the end when its direction is reverse): Gather with a
      // scalar index drops the axis, as the body expects.
      const int64_t t = in_dirs[j] != 0 ? trips - 1 - k : k;
      const std::string idx = base + tag + "/index" + std::to_string(j);
      const std::string slice = base + tag + "/slice" + std::to_string(j);
      nodes.push_back(constant_node(node.name(), idx, onnx::TensorProto::INT64, t, true));
      NodeProto g;
      g.set_op_type("Gather");
      g.set_name(node.name());
      g.add_input(node.input(static_cast<int>(n + j)));
      g.add_input(idx);
      g.add_output(slice);
      *g.add_attribute() = int_attr("axis", in_axes[j]);
      nodes.push_back(std::move(g));
      inputs.push_back(slice);
    }
    std::vector<std::string> outs = append_copy(body, inputs, tag, nodes);
    for (size_t j = 0; j < n; ++j) state[j] = outs[j];
    for (size_t s = 0; s < k_out; ++s) scanned[s].push_back(outs[n + s]);
  }
  for (size_t j = 0; j < n; ++j) {
    if (!node.output(static_cast<int>(j)).empty())
      nodes.push_back(identity(node.name(), state[j], node.output(static_cast<int>(j))));
  }
  for (size_t s = 0; s < k_out; ++s) {
    const std::string& out = node.output(static_cast<int>(n + s));
    if (out.empty()) continue;
    if (out_dirs[s] != 0) std::reverse(scanned[s].begin(), scanned[s].end());
    const int64_t axis = out_axes[s];
    if (axis < 0) throw InputError(label + ": negative scan_output_axes are not supported");
    append_stacked(out, scanned[s], axis, node.name(), opset, nodes);
  }
  return nodes;
}

}  // namespace headroom::onnx_import
