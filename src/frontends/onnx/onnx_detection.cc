#include "frontends/onnx/onnx_detection.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "frontends/onnx/onnx_const_pass.h"
#include "frontends/onnx/onnx_level_partition.h"
#include "frontends/onnx/onnx_model.h"
#include "frontends/onnx/onnx_value_range.h"
#include "ir/graph.h"
#include "util/checked.h"
#include "util/error.h"

namespace headroom::onnx_import {
namespace {

using onnx::GraphProto;
using onnx::NodeProto;
using onnx::TensorProto;

// Rounds of inference and bounding: each round makes the next level of a chain of data-dependent
// sizes static (NonZero -> Shape -> Min -> TopK k -> TopK -> Gather -> ...).
constexpr int kMaxRounds = 200;
// Folded shape inputs written into the file hold at most this many values (sizes, axes, ks).
constexpr size_t kMaxMaterialized = 64;

bool is_integer_elem(int32_t elem) {
  switch (elem) {
    case TensorProto::INT64: case TensorProto::INT32: case TensorProto::INT16:
    case TensorProto::INT8: case TensorProto::UINT8: case TensorProto::UINT16:
    case TensorProto::UINT32: case TensorProto::BOOL:
      return true;
    default:
      return false;
  }
}

// Inputs that give an output's size (not its data): the only ones written in as constants.
bool shape_giving_slot(const std::string& op, int slot) {
  static const std::unordered_map<std::string, std::vector<int>> kSlots = {
      {"Reshape", {1}}, {"Expand", {1}},    {"Tile", {1}},      {"ConstantOfShape", {0}},
      {"Range", {0, 1, 2}}, {"TopK", {1}}, {"Slice", {1, 2, 3, 4}}, {"Squeeze", {1}},
      {"Unsqueeze", {1}}, {"Split", {1}},   {"Pad", {1}},       {"Resize", {1, 2, 3}},
      {"OneHot", {1}},  {"ReduceSum", {1}}, {"ReduceMean", {1}}, {"ReduceMax", {1}},
      {"ReduceMin", {1}}, {"ReduceProd", {1}}};
  auto it = kSlots.find(op);
  return it != kSlots.end() && std::find(it->second.begin(), it->second.end(), slot) != it->second.end();
}

bool static_type(const TypeTable& types, const std::string& name) {
  auto t = types.find(name);
  return t != types.end() && t->second.static_shape();
}

const std::vector<int64_t>* static_dims(const TypeTable& types, const std::string& name) {
  auto t = types.find(name);
  return t != types.end() && t->second.static_shape() ? &t->second.dims : nullptr;
}

TensorProto to_initializer(const ConstTensor& v, const std::string& name) {
  TensorProto t;
  t.set_name(name);
  t.set_data_type(v.elem);
  for (int64_t d : v.shape) t.add_dims(d);
  for (int64_t x : v.ints) {
    if (v.elem == TensorProto::INT64) {
      t.add_int64_data(x);
    } else if (v.elem == TensorProto::UINT32) {
      t.add_uint64_data(static_cast<uint64_t>(x));
    } else {
      t.add_int32_data(static_cast<int32_t>(x));
    }
  }
  return t;
}

void pin_value_info(GraphProto& g, const std::string& name, int32_t elem,
                    const std::vector<int64_t>& dims) {
  onnx::ValueInfoProto* slot = nullptr;
  for (onnx::ValueInfoProto& v : *g.mutable_value_info()) {
    if (v.name() == name) slot = &v;
  }
  if (slot == nullptr) {
    slot = g.add_value_info();
    slot->set_name(name);
  }
  auto* tt = slot->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* shape = tt->mutable_shape();
  shape->clear_dim();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

class Bounder {
 public:
  Bounder(onnx::ModelProto& model, int64_t opset, DetectionBounds& out)
      : model_(model), opset_(opset), out_(out) {
    for (const DetectionBound& b : out_.bounds) stated_.insert(b.node);
  }

  // One round; returns whether the file changed.
  bool round() {
    GraphProto& g = *model_.mutable_graph();
    TypeTable types = infer_types(model_);
    ConstantPass pass(g, opset_, types);
    ValueRanges ranges(g, opset_, types, pass);
    std::unordered_set<std::string> initializers;
    for (const TensorProto& t : g.initializer()) initializers.insert(t.name());
    std::unordered_map<std::string, std::string> producer_op;
    std::vector<TensorProto> added;
    std::vector<std::pair<std::string, std::pair<int32_t, std::vector<int64_t>>>> pins;
    // Tensors whose size or value comes from a bounded count (constants written in for them too).
    std::unordered_set<std::string> dependent(dependent_constants_.begin(), dependent_constants_.end());
    bool changed = false;
    // NonZero counts of one tensor's levels (MultiScaleRoIAlign): bounded together.
    std::unordered_map<std::string, const LevelPartition*> partition_of;
    const std::vector<LevelPartition> partitions = find_level_partitions(g, types);
    for (const LevelPartition& p : partitions) {
      for (const auto& member : p.level_of) partition_of[member.first] = &p;
    }
    for (int i = 0; i < g.node_size(); ++i) {
      pass.run_until(i + 1);
      ranges.run_until(i + 1);
      NodeProto& node = *g.mutable_node(i);
      for (const std::string& o : node.output()) producer_op[o] = node.op_type();
      bool reads_dependent = false;
      for (const std::string& in : node.input()) reads_dependent = reads_dependent || dependent.count(in);
      const std::string& op = node.op_type();
      const bool counted = is_default_domain(node.domain()) && is_data_dependent_op(op);
      if (counted || reads_dependent) {
        for (const std::string& o : node.output()) dependent.insert(o);
      }
      if (!is_default_domain(node.domain())) continue;
      const std::string label = node_label(node, static_cast<size_t>(i));
      if (counted) {
        if (node.output_size() == 0 || node.output(0).empty() || static_type(types, node.output(0))) continue;
        std::optional<std::pair<int64_t, std::string>> b;
        if (auto p = partition_of.find(node.output(0)); op == "NonZero" && p != partition_of.end()) {
          b = level_bound(*p->second, p->second->level_of.at(node.output(0)));
        } else {
          b = op == "NonZero" ? nonzero_bound(node, types, label) : nms_bound(node, types, pass, label);
        }
        if (!b) continue;
        int64_t bound = b->first;
        std::string reason = b->second;
        if (out_.max_detections && *out_.max_detections < bound) {
          reason = "--max-detections " + std::to_string(*out_.max_detections) + " (the file allows " +
                   std::to_string(bound) + ": " + reason + ")";
          bound = *out_.max_detections;
        }
        std::vector<int64_t> dims;
        if (op == "NonZero") {
          dims = {static_cast<int64_t>(static_dims(types, node.input(0))->size()), bound};
        } else {
          dims = {bound, 3};
        }
        pins.push_back({node.output(0), {TensorProto::INT64, dims}});
        if (stated_.insert(label).second) out_.bounds.push_back({label, op, bound, reason});
        changed = true;
        continue;
      }
      if (op == "If") {
        if (node.input_size() == 0 || !dependent.count(node.input(0)) || decided_.count(label)) continue;
        const ConstTensor* c = pass.value(node.input(0));
        if (c == nullptr || !c->known || c->size() != 1) continue;
        decided_.insert(label);
        const bool then = c->as_double(0) != 0.0;
        out_.decided_ifs.push_back(label + ": its condition '" + node.input(0) +
                                   "' depends on a bounded count and is " + (then ? "true" : "false") +
                                   " with the bounds, so the " + (then ? "then" : "else") +
                                   " branch is taken");
        continue;
      }
      if (op == "Loop" || op == "Scan") continue;
      bool all_static = true;
      for (const std::string& o : node.output()) all_static = all_static && (o.empty() || static_type(types, o));
      if (all_static) continue;
      // Shape-giving inputs that fold with the bounds but that shape inference cannot evaluate
      // (a Min, a ReduceMin, a Cast of a Shape): written in as constants.
      bool materialized = false;
      for (int k = 0; k < node.input_size(); ++k) {
        const std::string in = node.input(k);
        if (in.empty() || initializers.count(in) || !shape_giving_slot(op, k)) continue;
        auto p = producer_op.find(in);
        if (p != producer_op.end() && p->second == "Constant") continue;
        const ConstTensor* v = pass.value(in);
        if (v == nullptr || !v->known || !is_integer_elem(v->elem) || v->size() > kMaxMaterialized) continue;
        const std::string name = in + "/headroom_bound";
        if (!initializers.count(name)) {
          added.push_back(to_initializer(*v, name));
          initializers.insert(name);
        }
        if (dependent.count(in)) dependent_constants_.insert(name);
        node.set_input(k, name);
        changed = true;
        materialized = true;
      }
      if (materialized || stated_shapes_.count(node.output(0))) continue;
      // Sizes given by values (a box's width): the upper ends of their ranges.
      if (std::optional<ShapeBound> sb = value_given_shape(node, types, ranges, label)) {
        int32_t elem = 0;
        auto t = types.find(node.output(0));
        if (t != types.end()) elem = t->second.elem;
        if (elem == 0) elem = value_given_elem(node, types);
        pins.push_back({node.output(0), {elem, sb->dims}});
        stated_shapes_.insert(node.output(0));
        out_.shape_bounds.push_back(std::move(*sb));
        changed = true;
      }
    }
    for (TensorProto& t : added) *g.add_initializer() = std::move(t);
    for (const auto& [name, type] : pins) pin_value_info(g, name, type.first, type.second);
    return changed;
  }

 private:
  // NonZero: every element of the input nonzero.
  std::optional<std::pair<int64_t, std::string>> nonzero_bound(const NodeProto& node,
                                                               const TypeTable& types,
                                                               const std::string& label) {
    const std::vector<int64_t>* in = node.input_size() > 0 ? static_dims(types, node.input(0)) : nullptr;
    if (in == nullptr) return std::nullopt;
    int64_t n = 1;
    for (int64_t d : *in) n = checked_mul(n, d, label + ": its input's size");
    return std::make_pair(n, "every element of its " + shape_text(*in) + " input nonzero");
  }

  // A level's count in a partition: the worst split puts every row in one level (the last),
  // so that level is bounded by all rows and every other level by 0.
  static std::pair<int64_t, std::string> level_bound(const LevelPartition& p, double level) {
    const std::string all = std::to_string(p.total);
    std::string reason = "'" + p.rows + "' == " + number_text(level) + ", one of " +
                         std::to_string(p.levels.size()) + " levels whose counts sum to at most " + all +
                         "; worst split: all " + all + " in level " + number_text(p.worst_level);
    return {level == p.worst_level ? p.total : 0, reason};
  }

  static std::string number_text(double v) {
    if (v == std::floor(v) && std::abs(v) < 9.0e15) return std::to_string(static_cast<int64_t>(v));
    return std::to_string(v);
  }

  // NonMaxSuppression: boxes [B, S, 4], scores [B, C, S]; per batch and class at most
  // min(S, max_output_boxes_per_class) boxes (absent: 0, ONNX's default).
  std::optional<std::pair<int64_t, std::string>> nms_bound(const NodeProto& node,
                                                           const TypeTable& types, ConstantPass& pass,
                                                           const std::string& label) {
    if (node.input_size() < 2) return std::nullopt;
    const std::vector<int64_t>* boxes = static_dims(types, node.input(0));
    const std::vector<int64_t>* scores = static_dims(types, node.input(1));
    if (boxes == nullptr || scores == nullptr) return std::nullopt;
    if (boxes->size() != 3 || scores->size() != 3) {
      throw InputError(label + ": NonMaxSuppression needs boxes [B, S, 4] and scores [B, C, S], got " +
                       shape_text(*boxes) + " and " + shape_text(*scores));
    }
    int64_t per_class = 0;
    std::string limit = "max_output_boxes_per_class absent (0)";
    if (node.input_size() > 2 && !node.input(2).empty()) {
      const ConstTensor* m = pass.value(node.input(2));
      if (m != nullptr && m->known && m->size() == 1) {
        // An integer tensor: its value as written (torchvision writes INT64_MAX).
        per_class = m->is_float() ? static_cast<int64_t>(std::clamp(m->floats[0], 0.0, 9.0e18))
                                  : std::max<int64_t>(0, m->ints[0]);
        limit = "max_output_boxes_per_class " + std::to_string(per_class);
      } else {
        per_class = std::numeric_limits<int64_t>::max();
        limit = "max_output_boxes_per_class unknown";
      }
    }
    const int64_t boxes_per_class = std::min((*scores)[2], per_class);
    const int64_t n = checked_mul(checked_mul((*scores)[0], (*scores)[1], label), boxes_per_class, label);
    return std::make_pair(n, "batch " + std::to_string((*scores)[0]) + " x classes " +
                                 std::to_string((*scores)[1]) + " x min(boxes " +
                                 std::to_string((*scores)[2]) + ", " + limit + ")");
  }

  // The element type of a value-bounded output when inference gives none.
  static int32_t value_given_elem(const NodeProto& node, const TypeTable& types) {
    if (node.op_type() == "ConstantOfShape") {
      const TensorProto* v = NodeAttrs(node).t("value");
      return v != nullptr ? v->data_type() : static_cast<int32_t>(TensorProto::FLOAT);
    }
    auto t = types.find(node.input(0));
    return t != types.end() ? t->second.elem : 0;
  }

  // Upper ends of a shape vector's values: each finite and at least 0 (a negative end: 0).
  static std::optional<std::vector<int64_t>> upper_dims(const ValueRange& r, size_t rank) {
    if (!r.per_element || r.hi.size() != rank) return std::nullopt;
    std::vector<int64_t> dims;
    for (double h : r.hi) {
      if (!(h < 9.0e18)) return std::nullopt;  // +inf or NaN: nothing bounds it
      dims.push_back(std::max<int64_t>(0, static_cast<int64_t>(std::floor(h))));
    }
    return dims;
  }

  // The bound of a Resize / Slice / ConstantOfShape output whose size comes from values; nothing
  // when the op is another or when a value has no finite upper end.
  std::optional<ShapeBound> value_given_shape(const NodeProto& node, const TypeTable& types,
                                              ValueRanges& ranges, const std::string& label) {
    const std::string& op = node.op_type();
    if (node.output_size() == 0 || node.output(0).empty()) return std::nullopt;
    for (int k = 1; k < node.output_size(); ++k) {
      if (!node.output(k).empty()) return std::nullopt;
    }
    auto checked_dims = [&](const std::vector<int64_t>& dims) {
      int64_t n = 1;
      for (int64_t d : dims) n = checked_mul(n, d, label + ": its bounded output's size");
      (void)n;  // only the overflow check
      return dims;
    };
    if (op == "ConstantOfShape") {
      if (node.input_size() < 1 || node.input(0).empty()) return std::nullopt;
      const std::vector<int64_t>* shape_of_shape = static_dims(types, node.input(0));
      if (shape_of_shape == nullptr || shape_of_shape->size() != 1) return std::nullopt;
      auto dims = upper_dims(ranges.range(node.input(0)), static_cast<size_t>((*shape_of_shape)[0]));
      if (!dims) return std::nullopt;
      return ShapeBound{label, op, checked_dims(*dims),
                        "its shape is computed from tensor values: their upper ends"};
    }
    const std::vector<int64_t>* in = node.input_size() > 0 ? static_dims(types, node.input(0)) : nullptr;
    if (in == nullptr) return std::nullopt;
    if (op == "Resize") {
      // opset 11+: X, roi, scales, sizes; sizes given (scales from values: not bounded here).
      if (opset_ < 11 || node.input_size() < 4 || node.input(3).empty()) return std::nullopt;
      auto dims = upper_dims(ranges.range(node.input(3)), in->size());
      if (!dims) return std::nullopt;
      return ShapeBound{label, op, checked_dims(*dims),
                        "its sizes are computed from tensor values: their upper ends"};
    }
    if (op == "Slice" && opset_ >= 10 && node.input_size() >= 3) {
      // Starts/ends from values: each sliced axis keeps at most its input's size, and at most
      // end - start where both are non-negative (step 1).
      const int64_t rank = static_cast<int64_t>(in->size());
      std::vector<int64_t> axes;
      if (node.input_size() > 3 && !node.input(3).empty()) {
        const ConstTensor* a = pass_value(ranges, node.input(3));
        if (a == nullptr) return std::nullopt;
        axes = a->int_values(label + " axes");
      }
      ValueRange starts = ranges.range(node.input(1)), ends = ranges.range(node.input(2));
      if (axes.empty()) {
        if (!starts.per_element) return std::nullopt;
        for (int64_t k = 0; k < static_cast<int64_t>(starts.lo.size()); ++k) axes.push_back(k);
      }
      bool unit_steps = node.input_size() <= 4 || node.input(4).empty();
      if (!unit_steps) {
        const ConstTensor* st = pass_value(ranges, node.input(4));
        if (st == nullptr) return std::nullopt;
        std::vector<int64_t> s = st->int_values(label + " steps");
        unit_steps = std::all_of(s.begin(), s.end(), [](int64_t x) { return x == 1; });
      }
      std::vector<int64_t> dims = *in;
      for (size_t k = 0; k < axes.size(); ++k) {
        int64_t ax = axes[k] < 0 ? axes[k] + rank : axes[k];
        if (ax < 0 || ax >= rank) return std::nullopt;
        int64_t& d = dims[static_cast<size_t>(ax)];
        if (unit_steps && starts.per_element && ends.per_element && k < starts.lo.size() &&
            k < ends.lo.size() && starts.lo[k] >= 0 && ends.lo[k] >= 0 && ends.hi[k] < 9.0e18) {
          const int64_t hi_end = std::min<int64_t>(d, static_cast<int64_t>(std::floor(ends.hi[k])));
          const int64_t lo_start = std::min<int64_t>(d, static_cast<int64_t>(std::ceil(starts.lo[k])));
          d = std::max<int64_t>(0, hi_end - lo_start);
        }
      }
      return ShapeBound{label, op, dims,
                        "its starts/ends are computed from tensor values: at most its input's size"};
    }
    return std::nullopt;
  }

  // A parameter input's folded value (axes, steps), or nullptr.
  static const ConstTensor* pass_value(ValueRanges& ranges, const std::string& name) {
    return ranges.folded(name);
  }

  onnx::ModelProto& model_;
  int64_t opset_;
  DetectionBounds& out_;
  std::unordered_set<std::string> stated_;
  std::unordered_set<std::string> decided_;
  std::unordered_set<std::string> stated_shapes_;
  std::unordered_set<std::string> dependent_constants_;
};

}  // namespace

bool is_data_dependent_op(const std::string& op) { return op == "NonZero" || op == "NonMaxSuppression"; }

void bound_data_dependent_sizes(onnx::ModelProto& model, int64_t opset, DetectionBounds& bounds) {
  // TopK's k is often min(k, n) of a size (torchvision's _topk_min), which shape inference
  // cannot evaluate even without a data-dependent count before it: such models run the pass too.
  bool counted = false, topk = false;
  for (const NodeProto& n : model.graph().node()) {
    if (!is_default_domain(n.domain())) continue;
    counted = counted || is_data_dependent_op(n.op_type());
    topk = topk || n.op_type() == "TopK";
  }
  if (!counted && !topk) return;
  bounds.has_data_dependent_ops = bounds.has_data_dependent_ops || counted;
  Bounder b(model, opset, bounds);
  for (int r = 0; r < kMaxRounds; ++r) {
    if (!b.round()) return;
  }
}

std::vector<std::string> detection_notes(const DetectionBounds& bounds) {
  if (bounds.max_detections && !bounds.has_data_dependent_ops) {
    throw InputError("--max-detections applies to models with data-dependent sizes (NonZero, "
                     "NonMaxSuppression nodes); this file has none");
  }
  std::vector<std::string> notes;
  if (bounds.bounds.empty() && bounds.decided_ifs.empty() && bounds.shape_bounds.empty()) return notes;
  notes.push_back("data-dependent sizes take upper bounds, so this estimate is an upper bound "
                  "(--max-detections N caps them)");
  // Grouped by (op, bound, reason) in order of first appearance; up to 4 names each.
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  std::map<std::string, size_t> index;
  for (const DetectionBound& b : bounds.bounds) {
    std::string key = b.op + " bounded at " + std::to_string(b.bound) + " (" + b.reason + ")";
    auto [it, fresh] = index.emplace(key, groups.size());
    if (fresh) groups.push_back({key, {}});
    groups[it->second].second.push_back(b.node);
  }
  for (const auto& [key, nodes] : groups) {
    std::string line = key + ": ";
    for (size_t k = 0; k < nodes.size() && k < 4; ++k) line += (k ? ", " : "") + nodes[k];
    if (nodes.size() > 4) line += " and " + std::to_string(nodes.size() - 4) + " more";
    notes.push_back(line);
  }
  // Value-given shapes, grouped by (op, dims, reason) the same way.
  std::vector<std::pair<std::string, std::vector<std::string>>> shape_groups;
  std::map<std::string, size_t> shape_index;
  for (const ShapeBound& b : bounds.shape_bounds) {
    std::string key = b.op + " output bounded at " + shape_text(b.dims) + " (" + b.reason + ")";
    auto [it, fresh] = shape_index.emplace(key, shape_groups.size());
    if (fresh) shape_groups.push_back({key, {}});
    shape_groups[it->second].second.push_back(b.node);
  }
  for (const auto& [key, nodes] : shape_groups) {
    // An unrolled loop repeats a node's name once per iteration: each name once, with its count.
    std::vector<std::pair<std::string, int>> named;
    for (const std::string& n : nodes) {
      auto it = std::find_if(named.begin(), named.end(), [&](const auto& p) { return p.first == n; });
      if (it == named.end()) named.push_back({n, 1}); else ++it->second;
    }
    std::string line = key + ": ";
    for (size_t k = 0; k < named.size() && k < 4; ++k) {
      line += (k ? ", " : "") + named[k].first;
      if (named[k].second > 1) line += " x" + std::to_string(named[k].second);
    }
    if (named.size() > 4) line += " and " + std::to_string(named.size() - 4) + " more";
    notes.push_back(line);
  }
  for (const std::string& d : bounds.decided_ifs) notes.push_back(d);
  return notes;
}

}  // namespace headroom::onnx_import
