#include "pack/layers.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "util/checked.h"
#include "util/error.h"

namespace headroom {
namespace {


std::string axes_text(const std::vector<int64_t>& v) { return fmt::format("{}", fmt::join(v, "x")); }

// The weight whose storage `id` reads: through views, and through weight tying. kNone when the
// storage is not a weight.
TensorId weight_root(const Graph& g, TensorId id) {
  TensorId r = g.storage_root(id);
  while (g.is_weight(r) && g.tensor(r).tied_to != kNone) r = g.storage_root(g.tensor(r).tied_to);
  return g.is_weight(r) ? r : kNone;
}

// The geometry a kind reads from OpAttrs (the rest of its configuration is in weight shapes).
std::string geometry(const Op& op) {
  if (!is_convolution_kind(op.kind)) return "";
  const OpAttrs& a = op.attrs;
  std::string g = fmt::format("|k{} s{} p{} d{} g{}", axes_text(a.kernel), axes_text(a.stride),
                              axes_text(a.padding), axes_text(a.dilation), a.groups);
  if (op.kind == OpKind::ConvTranspose2d) g += fmt::format(" op{}", axes_text(a.output_padding));
  return g;
}

int32_t find(std::vector<int32_t>& parent, int32_t i) {
  while (parent[static_cast<size_t>(i)] != i) {
    parent[static_cast<size_t>(i)] = parent[static_cast<size_t>(parent[static_cast<size_t>(i)])];
    i = parent[static_cast<size_t>(i)];
  }
  return i;
}

}  // namespace

bool is_layer_kind(OpKind k) {
  return is_convolution_kind(k) || k == OpKind::Linear || k == OpKind::BatchNorm2d || k == OpKind::LayerNorm ||
         k == OpKind::Embedding;
}

ModelLayers extract_layers(const Graph& g) {
  ModelLayers out;
  out.model = g.model;
  out.weights_bytes = g.weights_bytes();

  // 1. Layer ops (model stage, layer kind, reading a weight) and the weights each reads.
  std::vector<OpId> layer_ops;
  std::set<TensorId> read_by_other;  // weights some non-layer op reads (views excepted)
  for (const Op& op : g.ops) {
    bool layer = op.stage == OpStage::Model && is_layer_kind(op.kind);
    bool reads_weight = false;
    for (TensorId in : op.inputs) {
      TensorId r = weight_root(g, in);
      if (r == kNone) continue;
      reads_weight = true;
      if (!layer && !is_view_kind(op.kind)) read_by_other.insert(r);
    }
    if (layer && reads_weight) layer_ops.push_back(op.id);
  }

  // 2. Union the layer ops that read a common weight.
  std::vector<int32_t> parent(layer_ops.size());
  std::iota(parent.begin(), parent.end(), 0);
  std::map<TensorId, int32_t> first_reader;
  for (size_t i = 0; i < layer_ops.size(); ++i) {
    for (TensorId in : g.op(layer_ops[i]).inputs) {
      TensorId r = weight_root(g, in);
      if (r == kNone) continue;
      auto [it, inserted] = first_reader.emplace(r, static_cast<int32_t>(i));
      if (!inserted) {
        int32_t a = find(parent, it->second), b = find(parent, static_cast<int32_t>(i));
        parent[static_cast<size_t>(std::max(a, b))] = std::min(a, b);  // the earliest op is the root
      }
    }
  }
  std::map<int32_t, std::vector<OpId>> units;  // root index -> ops, in execution order
  for (size_t i = 0; i < layer_ops.size(); ++i) units[find(parent, static_cast<int32_t>(i))].push_back(layer_ops[i]);

  // 3. One Layer per unit: its weights in first-read order, its key, whether it is a candidate.
  std::set<TensorId> held;  // weights held by candidate layers
  for (const auto& [root, ops] : units) {
    Layer l;
    l.ops = ops;
    l.kind = g.op(ops.front()).kind;
    std::vector<TensorId> weights;
    bool candidate = true;
    for (OpId id : ops) {
      const Op& op = g.op(id);
      l.name += (l.name.empty() ? "" : "+") + op.name;
      l.config += (l.config.empty() ? "" : " + ") + std::string(op_kind_name(op.kind));
      for (size_t pos = 0; pos < op.inputs.size(); ++pos) {
        TensorId in = op.inputs[pos];
        TensorId r = weight_root(g, in);
        if (r == kNone) continue;
        auto it = std::find(weights.begin(), weights.end(), r);
        size_t index = static_cast<size_t>(it - weights.begin());
        if (it == weights.end()) weights.push_back(r);
        const Tensor& w = g.tensor(r);
        if (read_by_other.count(r) > 0) candidate = false;
        l.config += fmt::format("|{}{}{}:{}{}#{}", pos, w.role == TensorRole::Buffer ? "b" : "w", shape_text(w.shape),
                                dtype_name(w.dtype),
                                g.tensor(in).shape != w.shape ? "as" + shape_text(g.tensor(in).shape) : "", index);
      }
      l.config += geometry(op);
    }
    if (!candidate) continue;
    for (TensorId r : weights) {
      l.bytes = checked_add(l.bytes, g.tensor(r).bytes(), "layer bytes");
      l.weight_names.push_back(g.tensor(r).name);
      ++l.tensors;
      held.insert(r);
    }
    out.layers.push_back(std::move(l));
  }

  for (const Layer& l : out.layers) out.layer_bytes = checked_add(out.layer_bytes, l.bytes, "layer bytes");
  for (const Tensor& t : g.tensors) {
    if (!g.is_weight(t.id) || t.tied_to != kNone || held.count(t.id) > 0) continue;
    out.other_bytes = checked_add(out.other_bytes, t.bytes(), "other weight bytes");
    ++out.other_tensors;
  }
  HEADROOM_CHECK(out.layer_bytes + out.other_bytes == out.weights_bytes,
                 fmt::format("{}: layer bytes {} + other bytes {} != weights {}", g.model, out.layer_bytes,
                             out.other_bytes, out.weights_bytes));
  return out;
}

}  // namespace headroom
