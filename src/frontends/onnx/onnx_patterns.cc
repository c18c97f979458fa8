#include "frontends/onnx/onnx_patterns.h"

#include <cmath>
#include <numbers>

namespace headroom::onnx_import {
namespace {

class Matcher {
 public:
  Matcher(const onnx::GraphProto& g, const Structure& st, const PatternQueries& q)
      : g_(g), st_(st), q_(q), out_(static_cast<size_t>(g.node_size())) {}

  std::vector<Fusion> run() {
    for (int i = 0; i < g_.node_size(); ++i) {
      const std::string& op = g_.node(i).op_type();
      if (!default_domain(i) || out_[static_cast<size_t>(i)].kind != Fusion::Kind::None) continue;
      if (op == "Erf")
        gelu(i);
      else if (op == "Tanh")
        gelu_tanh(i);
      else if (op == "Sigmoid")
        silu(i);
      else if (op == "HardSigmoid")
        hardswish(i);
      else if (op == "Softplus")
        mish(i);
      else if (op == "ReduceMean")
        layer_norm(i);
      else if (op == "MatMul")
        linear_bias(i);
      else if (op == "AveragePool")
        padded_avg_pool(i);
      else if (op == "NonMaxSuppression")
        nms_indices(i);
      else if (op == "ConstantOfShape")
        in_place_merge(i);
    }
    return std::move(out_);
  }

 private:
  bool default_domain(int i) const { return is_default_domain(g_.node(i).domain()); }
  const onnx::NodeProto& node(int i) const { return g_.node(i); }
  bool is(int i, const char* op) const {
    return i >= 0 && node(i).op_type() == op && default_domain(i) &&
           out_[static_cast<size_t>(i)].kind == Fusion::Kind::None;
  }
  int producer(const std::string& name) const {
    auto it = st_.producer.find(name);
    return it == st_.producer.end() ? -1 : it->second;
  }
  // The node that alone reads `name` (not a graph output either), or -1.
  int sole_reader(const std::string& name) const {
    if (name.empty() || st_.output_uses.count(name)) return -1;
    auto it = st_.consumers.find(name);
    if (it == st_.consumers.end() || it->second.size() != 1) return -1;
    return it->second[0].first;
  }
  size_t readers(const std::string& name) const {
    auto it = st_.consumers.find(name);
    return it == st_.consumers.end() ? 0 : it->second.size();
  }
  // Input k / output 0 of node i, or "" when the node has fewer (unverified nodes may).
  const std::string& in(int i, int k) const {
    static const std::string kNone;
    return k < node(i).input_size() ? node(i).input(k) : kNone;
  }
  const std::string& out0(int i) const {
    static const std::string kNone;
    return node(i).output_size() > 0 ? node(i).output(0) : kNone;
  }
  // The other operand of a two-input node of which `name` is one operand ("" when both are).
  std::string other(int i, const std::string& name) const {
    const onnx::NodeProto& n = node(i);
    if (n.input_size() != 2) return "";
    if (name.empty()) return "";
    if (n.input(0) == name && n.input(1) != name) return n.input(1);
    if (n.input(1) == name && n.input(0) != name) return n.input(0);
    return "";
  }
  bool scalar_near(const std::string& name, double v) const {
    std::optional<double> s = q_.scalar(name);
    return s && std::fabs(*s - v) <= 1e-3 * std::fabs(v);
  }
  // For a binary node with one scalar operand near v: the other operand, else "".
  std::string operand_besides_scalar(int i, double v) const {
    const onnx::NodeProto& n = node(i);
    if (n.input_size() != 2) return "";
    if (scalar_near(n.input(1), v)) return n.input(0);
    if (scalar_near(n.input(0), v)) return n.input(1);
    return "";
  }
  void claim(const std::vector<int>& nodes, int last, Fusion f) {
    for (int n : nodes) {
      out_[static_cast<size_t>(n)].kind = Fusion::Kind::Skip;
      out_[static_cast<size_t>(n)].owner = last;
    }
    out_[static_cast<size_t>(last)] = std::move(f);
  }

  void gelu(int e) {
    int d = producer(in(e, 0));
    std::string x;
    if (is(d, "Div") && scalar_near(in(d, 1), std::sqrt(2.0)))
      x = in(d, 0);
    else if (is(d, "Mul"))
      x = operand_besides_scalar(d, std::sqrt(0.5));
    if (x.empty() || sole_reader(out0(d)) != e) return;
    int a = sole_reader(out0(e));
    if (!is(a, "Add") || operand_besides_scalar(a, 1.0) != out0(e)) return;
    std::vector<int> nodes{d, e, a};
    int last = gelu_tail(a, x, nodes);
    if (last < 0) return;
    Fusion f;
    f.kind = Fusion::Kind::Gelu;
    f.x = x;
    claim(nodes, last, f);
  }

  // The end both GELU forms share: 0.5 * x * a, where `a` is 1 + erf(...) or 1 + tanh(...),
  // in the three orders exporters write. Appends the nodes; returns the last one, or -1.
  int gelu_tail(int a, const std::string& x, std::vector<int>& nodes) const {
    int m = sole_reader(out0(a));
    if (!is(m, "Mul")) return -1;
    std::string o = other(m, out0(a));
    nodes.push_back(m);
    if (o == x) {  // (x * a) * 0.5
      int m2 = sole_reader(out0(m));
      if (!is(m2, "Mul") || operand_besides_scalar(m2, 0.5) != out0(m)) return -1;
      nodes.push_back(m2);
      return m2;
    }
    if (scalar_near(o, 0.5)) {  // (a * 0.5) * x
      int m2 = sole_reader(out0(m));
      if (!is(m2, "Mul") || other(m2, out0(m)) != x) return -1;
      nodes.push_back(m2);
      return m2;
    }
    // (x * 0.5) * a
    int h = producer(o);
    if (!is(h, "Mul") || operand_besides_scalar(h, 0.5) != x || sole_reader(out0(h)) != m) return -1;
    nodes.push_back(h);
    return m;
  }

  // GELU, tanh form: nn.GELU(approximate="tanh"), one call in eager PyTorch, which torch 1.13
  // exports as 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) with the cube as
  // Mul(x, Mul(x, x)). The same formula written in model code (Hugging Face's NewGELUActivation in
  // GPT-2) is several eager calls whose intermediates autograd keeps, and exports with Pow(x, 3):
  // that form is left node by node, as eager runs it.
  void gelu_tanh(int t) {
    int s = producer(in(t, 0));
    if (!is(s, "Mul") || sole_reader(out0(s)) != t) return;
    std::string inner = operand_besides_scalar(s, std::sqrt(2.0 / std::numbers::pi));
    int add = producer(inner);
    if (inner.empty() || !is(add, "Add") || sole_reader(inner) != s) return;
    for (int k = 0; k < 2; ++k) {  // Add(x, c) or Add(c, x)
      const std::string& x = in(add, k);
      const std::string& c = in(add, 1 - k);
      int cm = producer(c);
      if (x.empty() || !is(cm, "Mul") || sole_reader(c) != add) continue;
      std::string cube = operand_besides_scalar(cm, 0.044715);
      int cu = producer(cube);
      if (cube.empty() || sole_reader(cube) != cm) continue;
      std::vector<int> nodes{cu, cm, add, s, t};
      if (is(cu, "Mul")) {
        std::string sq = other(cu, x);
        int sqn = producer(sq);
        if (sq.empty() || !is(sqn, "Mul") || in(sqn, 0) != x || in(sqn, 1) != x || sole_reader(sq) != cu) continue;
        nodes.push_back(sqn);
      } else {
        continue;
      }
      int one = sole_reader(out0(t));
      if (!is(one, "Add") || operand_besides_scalar(one, 1.0) != out0(t)) return;
      nodes.push_back(one);
      int last = gelu_tail(one, x, nodes);
      if (last < 0) return;
      Fusion f;
      f.kind = Fusion::Kind::GeluTanh;
      f.x = x;
      claim(nodes, last, f);
      return;
    }
  }

  // The last node of `op(x) * x` whose first node is `first` (reading x), or -1: SiLU's
  // Sigmoid, HardSwish's HardSigmoid, Mish's Tanh(Softplus).
  int times_input(int first, int gate) const {
    int m = sole_reader(out0(gate));
    if (!is(m, "Mul") || other(m, out0(gate)) != in(first, 0) || in(first, 0).empty()) return -1;
    return m;
  }
  void unary_gate(const std::vector<int>& nodes, int last, Fusion::Kind kind) {
    Fusion f;
    f.kind = kind;
    f.x = in(nodes[0], 0);
    claim(nodes, last, f);
  }
  // SiLU / Swish: x * sigmoid(x) (nn.SiLU, F.silu; EfficientNet's and LLaMA's activations).
  void silu(int s) {
    int m = times_input(s, s);
    if (m >= 0) unary_gate({s}, m, Fusion::Kind::Silu);
  }
  // HardSwish before opset 14: x * HardSigmoid(x, alpha 1/6, beta 1/2) (nn.Hardswish).
  void hardswish(int h) {
    NodeAttrs a(node(h));
    if (std::fabs(a.f("alpha", 0.2) - 1.0 / 6) > 1e-4 || std::fabs(a.f("beta", 0.5) - 0.5) > 1e-6) return;
    int m = times_input(h, h);
    if (m >= 0) unary_gate({h}, m, Fusion::Kind::HardSwish);
  }
  // Mish: x * tanh(softplus(x)) (nn.Mish).
  void mish(int sp) {
    int t = sole_reader(out0(sp));
    if (!is(t, "Tanh")) return;
    int m = times_input(sp, t);
    if (m >= 0) unary_gate({sp, t}, m, Fusion::Kind::Mish);
  }

  // Axes of a ReduceMean: [-1] or [rank-1] with keepdims, else false.
  bool last_axis_mean(int r, const std::string& x) const {
    const onnx::NodeProto& n = node(r);
    NodeAttrs a(n);
    if (a.i("keepdims", 1) != 1) return false;
    std::optional<std::vector<int64_t>> axes = a.ints("axes");
    if (!axes) return false;  // axes as an input (opset 18) are not matched
    if (axes->size() != 1) return false;
    int64_t ax = (*axes)[0];
    if (ax == -1) return true;
    std::optional<size_t> rank = q_.rank(x);
    return rank && ax == static_cast<int64_t>(*rank) - 1;
  }

  bool is_vector_weight(const std::string& name) const {
    std::optional<std::vector<int64_t>> d = q_.weight_dims(name);
    return d && d->size() == 1;
  }

  void layer_norm(int r1) {
    const std::string& x = in(r1, 0);
    if (!last_axis_mean(r1, x)) return;
    int sub = sole_reader(out0(r1));
    if (!is(sub, "Sub") || in(sub, 0) != x || in(sub, 1) != out0(r1)) return;
    const std::string& d = out0(sub);
    if (readers(d) != 2 || st_.output_uses.count(d)) return;
    int pow = -1, div = -1;
    for (const auto& [n, slot] : st_.consumers.at(d)) {
      if (is(n, "Pow") && slot == 0 && scalar_near(in(n, 1), 2.0))
        pow = n;
      else if (is(n, "Div") && slot == 0)
        div = n;
    }
    if (pow < 0 || div < 0) return;
    int r2 = sole_reader(out0(pow));
    if (!is(r2, "ReduceMean") || !last_axis_mean(r2, out0(pow))) return;
    int eps = sole_reader(out0(r2));
    if (!is(eps, "Add") || other(eps, out0(r2)).empty() || !q_.scalar(other(eps, out0(r2)))) return;
    int sq = sole_reader(out0(eps));
    if (!is(sq, "Sqrt") || sole_reader(out0(sq)) != div || in(div, 1) != out0(sq)) return;
    int mul = sole_reader(out0(div));
    if (!is(mul, "Mul")) return;
    std::string w = other(mul, out0(div));
    if (!is_vector_weight(w)) return;
    int add = sole_reader(out0(mul));
    if (!is(add, "Add")) return;
    std::string b = other(add, out0(mul));
    if (!is_vector_weight(b)) return;
    Fusion f;
    f.kind = Fusion::Kind::LayerNorm;
    f.x = x;
    f.weight = w;
    f.bias = b;
    claim({r1, sub, pow, r2, eps, sq, div, mul}, add, f);
  }

  void linear_bias(int m) {
    const onnx::NodeProto& mm = node(m);
    if (mm.input_size() != 2) return;
    std::optional<std::vector<int64_t>> w = q_.weight_dims(mm.input(1));
    int64_t out_features = -1;
    if (w && w->size() == 2) {
      out_features = (*w)[1];
    } else {
      int t = producer(mm.input(1));
      if (!is(t, "Transpose")) return;
      std::optional<std::vector<int64_t>> perm = NodeAttrs(node(t)).ints("perm");
      if (perm && *perm != std::vector<int64_t>{1, 0}) return;
      w = q_.weight_dims(in(t, 0));
      if (!w || w->size() != 2) return;
      out_features = (*w)[0];
    }
    int add = sole_reader(out0(m));
    if (!is(add, "Add")) return;
    std::string b = other(add, out0(m));
    std::optional<std::vector<int64_t>> bd = q_.weight_dims(b);
    if (!bd || *bd != std::vector<int64_t>{out_features}) return;
    out_[static_cast<size_t>(m)].kind = Fusion::Kind::LinearBias;
    out_[static_cast<size_t>(m)].bias = b;
    out_[static_cast<size_t>(add)].kind = Fusion::Kind::Alias;
    out_[static_cast<size_t>(add)].alias = out0(m);
  }

  // NonMaxSuppression whose rows are read only by a Gather of column 2 (the box index).
  void nms_indices(int n) {
    int gather = sole_reader(out0(n));
    if (!is(gather, "Gather") || in(gather, 0) != out0(n) || node(gather).output_size() != 1) return;
    if (NodeAttrs(node(gather)).i("axis", 0) != 1) return;
    std::optional<std::vector<int64_t>> column = q_.ints(in(gather, 1));
    std::optional<size_t> rank = q_.rank(in(gather, 1));
    if (!column || *column != std::vector<int64_t>{2} || !rank || *rank > 1) return;
    Fusion& f = out_[static_cast<size_t>(n)];
    f.kind = Fusion::Kind::NmsIndices;
    if (*rank == 1) f.pads = {1};
    out_[static_cast<size_t>(gather)].kind = Fusion::Kind::Alias;
    out_[static_cast<size_t>(gather)].alias = out0(n);
  }

  // ConstantOfShape -> Scatter -> Scatter ...: each Scatter's data is the previous link's output,
  // read by that Scatter alone (in no other slot, not a graph output), so no one sees the tensor
  // between writes and writing in place changes no value. One Scatter alone stays out of place:
  // eager's single-level MultiScaleRoIAlign returns roi_align's output without a merge, and one
  // fresh tensor with one write is not the chain this pattern is evidence for.
  bool is_scatter(int i) const { return is(i, "ScatterElements") || is(i, "ScatterND"); }
  void in_place_merge(int fill) {
    std::vector<int> chain;
    std::string data = out0(fill);
    for (int s = sole_reader(data); is_scatter(s) && in(s, 0) == data && !out0(s).empty();
         s = sole_reader(data)) {
      chain.push_back(s);
      data = out0(s);
    }
    if (chain.size() < 2) return;
    for (int s : chain) out_[static_cast<size_t>(s)].kind = Fusion::Kind::InPlaceMerge;
  }

  // Pad -> AveragePool as F.avg_pool2d(x, k, s, padding=p, count_include_pad=True) exports it.
  // Only what one avg_pool2d call can be: a 4-D input, zero constant padding of H and W alone,
  // symmetric and at most half the kernel (PyTorch's limit), no padding or ceil_mode on the
  // pool itself. Anything else stays two ops.
  void padded_avg_pool(int a) {
    NodeAttrs pa(node(a));
    std::optional<std::vector<int64_t>> k = pa.ints("kernel_shape");
    std::vector<int64_t> own = pa.ints("pads").value_or(std::vector<int64_t>{0, 0, 0, 0});
    if (!k || k->size() != 2 || pa.i("ceil_mode", 0) != 0 ||
        pa.s("auto_pad", "NOTSET") != "NOTSET" || own != std::vector<int64_t>{0, 0, 0, 0})
      return;
    int p = producer(in(a, 0));
    if (!is(p, "Pad") || sole_reader(out0(p)) != a) return;
    NodeAttrs padattrs(node(p));
    if (padattrs.s("mode", "constant") != "constant") return;
    std::optional<size_t> rank = q_.rank(in(p, 0));
    if (!rank || *rank != 4) return;
    std::optional<std::vector<int64_t>> pads;
    if (node(p).input_size() > 1 && !in(p, 1).empty()) {
      pads = q_.ints(in(p, 1));
    } else {
      pads = padattrs.ints("pads");  // opsets before 11
      if (padattrs.f("value", 0.0) != 0.0) return;
    }
    if (node(p).input_size() > 2 && !in(p, 2).empty() && !scalar_near(in(p, 2), 0.0)) return;
    if (node(p).input_size() > 3 && !in(p, 3).empty()) return;  // axes (opset 18): not matched
    // [N0, C0, H0, W0, N1, C1, H1, W1]: begins then ends.
    if (!pads || pads->size() != 8) return;
    const std::vector<int64_t>& v = *pads;
    if (v[0] != 0 || v[1] != 0 || v[4] != 0 || v[5] != 0 || v[2] != v[6] || v[3] != v[7]) return;
    // PyTorch's own check (avg_pool2d: "pad should be at most half of kernel size").
    if (v[2] < 0 || v[3] < 0 || v[2] > (*k)[0] / 2 || v[3] > (*k)[1] / 2) return;
    Fusion f;
    f.kind = Fusion::Kind::PaddedAvgPool;
    f.x = in(p, 0);
    f.pads = {v[2], v[3], v[6], v[7]};
    claim({p}, a, f);
  }

  const onnx::GraphProto& g_;
  const Structure& st_;
  const PatternQueries& q_;
  std::vector<Fusion> out_;
};

}  // namespace

std::vector<Fusion> find_fusions(const onnx::GraphProto& g, const Structure& st,
                                 const PatternQueries& q) {
  return Matcher(g, st, q).run();
}

}  // namespace headroom::onnx_import
