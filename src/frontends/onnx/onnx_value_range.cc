#include "frontends/onnx/onnx_value_range.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "frontends/onnx/onnx_const.h"
#include "util/error.h"

namespace headroom::onnx_import {
namespace {

using onnx::NodeProto;
using onnx::TensorProto;

constexpr double kInf = std::numeric_limits<double>::infinity();

bool is_unsigned_elem(int32_t elem) {
  return elem == TensorProto::UINT8 || elem == TensorProto::UINT16 ||
         elem == TensorProto::UINT32 || elem == TensorProto::UINT64;
}

bool is_int_elem(int32_t elem) {
  switch (elem) {
    case TensorProto::INT64: case TensorProto::INT32: case TensorProto::INT16:
    case TensorProto::INT8: case TensorProto::UINT8: case TensorProto::UINT16:
    case TensorProto::UINT32: case TensorProto::UINT64:
      return true;
    default:
      return false;
  }
}

// Ops whose every output element is one of their data inputs' elements, or a non-decreasing
// function of them: the output's bounds are the op applied to the inputs' bounds.
// Value: the data input slots (-1: all inputs).
int monotone_data_slot(const std::string& op) {
  static const char* kAll[] = {"Add", "Max", "Min", "Concat"};
  static const char* kFirst[] = {"Identity", "Gather",  "Slice",     "Reshape",   "Squeeze",
                                 "Unsqueeze", "Flatten", "Transpose", "Expand",    "ReduceMax",
                                 "ReduceMin", "Floor",   "Ceil",      "Round",     "Relu"};
  if (std::find(std::begin(kAll), std::end(kAll), op) != std::end(kAll)) return -1;
  if (std::find(std::begin(kFirst), std::end(kFirst), op) != std::end(kFirst)) return 0;
  return -2;  // not monotone
}

// Ops that move or select elements without computing new ones (uniform fallback: the union).
bool selects_elements(const std::string& op) {
  static const char* kOps[] = {"Split", "Tile", "GatherElements", "GatherND", "Where", "TopK"};
  return std::find(std::begin(kOps), std::end(kOps), op) != std::end(kOps);
}

ConstTensor doubles(const std::vector<int64_t>& shape, const std::vector<double>& v) {
  ConstTensor t;
  t.elem = TensorProto::DOUBLE;
  t.shape = shape;
  t.floats = v;
  t.known = true;
  return t;
}

ValueRange uniform(double lo, double hi) {
  ValueRange r;
  r.lo = {std::isnan(lo) ? -kInf : lo};
  r.hi = {std::isnan(hi) ? kInf : hi};
  return r;
}

ValueRange exact(const ConstTensor& v) {
  ValueRange r;
  if (v.numel() <= kMaxRangeElements) {
    r.per_element = true;
    r.shape = v.shape;
    for (size_t k = 0; k < v.size(); ++k) {
      r.lo.push_back(v.as_double(k));
      r.hi.push_back(v.as_double(k));
    }
    return r;
  }
  double lo = kInf, hi = -kInf;
  for (size_t k = 0; k < v.size(); ++k) {
    lo = std::min(lo, v.as_double(k));
    hi = std::max(hi, v.as_double(k));
  }
  return uniform(lo, hi);
}

// Elementwise lower and upper ends of several candidate tensors of one shape (NaN: unbounded).
ValueRange hull(const std::vector<ConstTensor>& candidates) {
  ValueRange r;
  r.per_element = true;
  r.shape = candidates.front().shape;
  const size_t n = candidates.front().size();
  r.lo.assign(n, kInf);
  r.hi.assign(n, -kInf);
  for (const ConstTensor& c : candidates) {
    for (size_t k = 0; k < n; ++k) {
      double v = c.as_double(k);
      r.lo[k] = std::isnan(v) ? -kInf : std::min(r.lo[k], v);
      r.hi[k] = std::isnan(v) ? kInf : std::max(r.hi[k], v);
    }
  }
  return r;
}

// Applies a non-decreasing scalar function to both ends.
ValueRange map_ends(const ValueRange& in, double (*f)(double)) {
  ValueRange r = in;
  for (double& v : r.lo) v = f(v);
  for (double& v : r.hi) v = f(v);
  return r;
}

double relu(double v) { return std::max(0.0, v); }
double round_half_even(double v) { return std::nearbyint(v); }

}  // namespace

double ValueRange::min() const { return lo.empty() ? -kInf : *std::min_element(lo.begin(), lo.end()); }
double ValueRange::max() const { return hi.empty() ? kInf : *std::max_element(hi.begin(), hi.end()); }

ValueRanges::ValueRanges(const onnx::GraphProto& g, int64_t opset, const TypeTable& types,
                         ConstantPass& consts)
    : g_(g), opset_(opset), types_(types), consts_(consts) {}

void ValueRanges::run_until(int end) {
  end = std::min(end, g_.node_size());
  for (; next_ < end; ++next_) eval(g_.node(next_));
}

ValueRange ValueRanges::unbounded(const std::string& name) const {
  auto t = types_.find(name);
  const int32_t elem = t == types_.end() ? 0 : t->second.elem;
  if (elem == TensorProto::BOOL) return uniform(0, 1);
  if (is_unsigned_elem(elem)) return uniform(0, kInf);
  return uniform(-kInf, kInf);
}

ValueRange ValueRanges::range(const std::string& name) {
  // A folded value is exact; a computed range can only be wider.
  const ConstTensor* v = consts_.value(name);
  if (v != nullptr && v->known) return exact(*v);
  auto it = ranges_.find(name);
  if (it != ranges_.end()) return it->second;
  return unbounded(name);
}

const ConstTensor* ValueRanges::folded(const std::string& name) {
  const ConstTensor* v = consts_.value(name);
  return v != nullptr && v->known ? v : nullptr;
}

void ValueRanges::eval(const NodeProto& node) {
  if (!is_default_domain(node.domain()) || node.output_size() == 0) return;
  const std::string& op = node.op_type();
  bool all_folded = true;
  for (const std::string& o : node.output()) {
    const ConstTensor* v = o.empty() ? nullptr : consts_.value(o);
    all_folded = all_folded && (o.empty() || (v != nullptr && v->known));
  }
  if (all_folded) return;  // range() reads the folded values
  // A static shape of at most kMaxRangeElements elements, from inference or a folded value.
  auto small_shape = [&](const std::string& name) -> std::optional<std::vector<int64_t>> {
    if (const ConstTensor* v = consts_.value(name)) {
      if (v->numel() <= kMaxRangeElements) return v->shape;
      return std::nullopt;
    }
    auto t = types_.find(name);
    if (t == types_.end() || !t->second.static_shape()) return std::nullopt;
    int64_t n = 1;
    for (int64_t d : t->second.dims) {
      if (d > kMaxRangeElements) return std::nullopt;
      n *= d;
      if (n > kMaxRangeElements) return std::nullopt;
    }
    return t->second.dims;
  };
  // Both ends of an input as tensors, one value per element (a uniform range filled in).
  auto ends = [&](const std::string& name) -> std::optional<std::pair<ConstTensor, ConstTensor>> {
    std::optional<std::vector<int64_t>> shape = small_shape(name);
    if (!shape) return std::nullopt;
    ValueRange r = range(name);
    int64_t n = 1;
    for (int64_t d : *shape) n *= d;
    if (!r.per_element) {
      r.lo.assign(static_cast<size_t>(n), r.lo[0]);
      r.hi.assign(static_cast<size_t>(n), r.hi[0]);
    } else if (static_cast<int64_t>(r.lo.size()) != n) {
      return std::nullopt;
    }
    return std::make_pair(doubles(*shape, r.lo), doubles(*shape, r.hi));
  };
  auto fold = [&](const std::vector<const ConstTensor*>& in) -> std::optional<std::vector<ConstTensor>> {
    try {
      auto r = fold_node(node, opset_, in);
      if (!r) return std::nullopt;
      for (const ConstTensor& t : *r) {
        if (!t.known || !t.is_float()) return std::nullopt;
      }
      return r;
    } catch (const InputError&) {
      return std::nullopt;  // the lowering reports a bad node; a range is only a bound
    }
  };
  const bool small_output = small_shape(node.output(0)).has_value();

  std::vector<ValueRange> out;
  const int slot = monotone_data_slot(op);
  if (slot != -2) {
    // Per element: the op on the lower ends and on the upper ends (other inputs known).
    if (small_output) {
      std::deque<ConstTensor> store;
      std::vector<const ConstTensor*> lo_in, hi_in;
      bool ok = true;
      for (int k = 0; k < node.input_size() && ok; ++k) {
        const std::string& in = node.input(k);
        if (in.empty()) {
          lo_in.push_back(nullptr);
          hi_in.push_back(nullptr);
        } else if (slot == -1 || k == slot) {
          auto e = ends(in);
          if (!e) { ok = false; break; }
          store.push_back(std::move(e->first));
          lo_in.push_back(&store.back());
          store.push_back(std::move(e->second));
          hi_in.push_back(&store.back());
        } else {
          const ConstTensor* v = consts_.value(in);
          ok = v != nullptr && v->known;
          lo_in.push_back(v);
          hi_in.push_back(v);
        }
      }
      if (ok) {
        auto lo = fold(lo_in), hi = fold(hi_in);
        if (lo && hi && lo->size() == hi->size()) {
          for (size_t k = 0; k < lo->size(); ++k) out.push_back(hull({(*lo)[k], (*hi)[k]}));
        }
      }
    }
    if (out.empty()) {
      // One interval: from the inputs' overall ends.
      double lo = 0, hi = 0;
      bool first = true;
      for (int k = 0; k < node.input_size(); ++k) {
        if (node.input(k).empty() || (slot != -1 && k != slot)) continue;
        ValueRange r = range(node.input(k));
        double a = r.min(), b = r.max();
        if (first) {
          lo = a, hi = b, first = false;
        } else if (op == "Add") {
          lo += a, hi += b;
        } else if (op == "Max") {
          lo = std::max(lo, a), hi = std::max(hi, b);
        } else if (op == "Min") {
          lo = std::min(lo, a), hi = std::min(hi, b);
        } else {
          lo = std::min(lo, a), hi = std::max(hi, b);
        }
      }
      if (first) return;
      ValueRange r = uniform(lo, hi);
      if (op == "Floor") r = map_ends(r, [](double v) { return std::floor(v); });
      if (op == "Ceil") r = map_ends(r, [](double v) { return std::ceil(v); });
      if (op == "Round") r = map_ends(r, round_half_even);
      if (op == "Relu") r = map_ends(r, relu);
      out.push_back(r);
    }
  } else if (op == "Sub" || op == "Mul" || op == "Div") {
    if (node.input_size() != 2) return;
    const ValueRange b = range(node.input(1));
    if (op == "Div" && !(b.min() > 0 || b.max() < 0)) return;  // a divisor that may be 0
    auto ea = small_output ? ends(node.input(0)) : std::nullopt;
    auto eb = small_output ? ends(node.input(1)) : std::nullopt;
    if (ea && eb) {
      const ConstTensor &alo = ea->first, &ahi = ea->second, &blo = eb->first, &bhi = eb->second;
      std::vector<std::vector<const ConstTensor*>> combos =
          op == "Sub" ? std::vector<std::vector<const ConstTensor*>>{{&alo, &bhi}, {&ahi, &blo}}
                      : std::vector<std::vector<const ConstTensor*>>{
                            {&alo, &blo}, {&alo, &bhi}, {&ahi, &blo}, {&ahi, &bhi}};
      std::vector<ConstTensor> cand;
      for (const auto& c : combos) {
        auto r = fold(c);
        if (!r) { cand.clear(); break; }
        cand.push_back(std::move(r->front()));
      }
      if (!cand.empty()) out.push_back(hull(cand));
    }
    if (out.empty()) {
      const ValueRange a = range(node.input(0));
      const double a0 = a.min(), a1 = a.max(), b0 = b.min(), b1 = b.max();
      std::vector<double> c;
      if (op == "Sub") {
        c = {a0 - b1, a1 - b0};
      } else if (op == "Mul") {
        c = {a0 * b0, a0 * b1, a1 * b0, a1 * b1};
      } else {
        c = {a0 / b0, a0 / b1, a1 / b0, a1 / b1};
      }
      double lo = kInf, hi = -kInf;
      for (double v : c) {
        lo = std::isnan(v) ? -kInf : std::min(lo, v);
        hi = std::isnan(v) ? kInf : std::max(hi, v);
      }
      out.push_back(uniform(lo, hi));
    }
    auto t = types_.find(node.output(0));
    if (op == "Div" && t != types_.end() && is_int_elem(t->second.elem)) {
      // Integer division rounds (toward zero or down): widen to the integers around.
      for (double& v : out[0].lo) v = std::floor(v);
      for (double& v : out[0].hi) v = std::ceil(v);
    }
  } else if (op == "Cast") {
    ValueRange r = range(node.input(0));
    const auto to = static_cast<int32_t>(NodeAttrs(node).i("to", 0));
    if (to == TensorProto::BOOL) {
      r = uniform(0, 1);
    } else if (is_int_elem(to)) {
      r = map_ends(r, [](double v) { return std::trunc(v); });  // ONNX Cast truncates
    }
    out.push_back(r);
  } else if (op == "Neg") {
    ValueRange r = range(node.input(0)), n = r;
    for (size_t k = 0; k < r.lo.size(); ++k) {
      n.lo[k] = -r.hi[k];
      n.hi[k] = -r.lo[k];
    }
    out.push_back(n);
  } else if (op == "Clip") {
    // min(max(x, a), b): non-decreasing in x, a and b.
    ValueRange r = range(node.input(0));
    double a0 = -kInf, a1 = -kInf, b0 = kInf, b1 = kInf;
    if (opset_ < 11) {
      NodeAttrs attrs(node);
      a0 = a1 = attrs.f("min", -kInf);
      b0 = b1 = attrs.f("max", kInf);
    } else {
      if (node.input_size() > 1 && !node.input(1).empty()) {
        ValueRange a = range(node.input(1));
        a0 = a.min(), a1 = a.max();
      }
      if (node.input_size() > 2 && !node.input(2).empty()) {
        ValueRange b = range(node.input(2));
        b0 = b.min(), b1 = b.max();
      }
    }
    for (double& v : r.lo) v = std::min(std::max(v, a0), b0);
    for (double& v : r.hi) v = std::min(std::max(v, a1), b1);
    out.push_back(r);
  } else if (selects_elements(op)) {
    // The union of the data inputs (Where: both branches; TopK: its values, indices unbounded).
    double lo = kInf, hi = -kInf;
    for (int k = op == "Where" ? 1 : 0; k < node.input_size(); ++k) {
      if (node.input(k).empty()) continue;
      ValueRange r = range(node.input(k));
      lo = std::min(lo, r.min());
      hi = std::max(hi, r.max());
      if (op != "Where" && op != "Concat") break;  // the others' later inputs are parameters
    }
    out.assign(static_cast<size_t>(node.output_size()), uniform(lo, hi));
    if (op == "TopK" && out.size() > 1) out[1] = uniform(0, kInf);
  } else {
    return;  // unbounded
  }
  for (size_t k = 0; k < out.size() && k < static_cast<size_t>(node.output_size()); ++k) {
    const std::string& name = node.output(static_cast<int>(k));
    if (name.empty()) continue;
    ValueRange r = std::move(out[k]);
    auto t = types_.find(name);
    const int32_t elem = t == types_.end() ? 0 : t->second.elem;
    if (elem == TensorProto::BOOL || is_unsigned_elem(elem)) {
      for (double& v : r.lo) v = std::max(v, 0.0);
      if (elem == TensorProto::BOOL) {
        for (double& v : r.hi) v = std::min(v, 1.0);
      }
    }
    ranges_[name] = std::move(r);
  }
}

}  // namespace headroom::onnx_import
