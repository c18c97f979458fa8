#include "frontends/onnx_losses.h"

#include <charconv>
#include <string_view>
#include <cmath>
#include <utility>

#include "frontends/zoo/losses.h"
#include "util/error.h"

namespace headroom {
namespace {

constexpr std::pair<std::string_view, OnnxLossFn> kKinds[] = {
    {"ce", OnnxLossFn::CrossEntropy},
    {"cross-entropy", OnnxLossFn::CrossEntropy},
    {"pixel-ce", OnnxLossFn::PixelCrossEntropy},
    {"token-ce", OnnxLossFn::TokenCrossEntropy},
    {"next-token", OnnxLossFn::NextToken},
    {"mse", OnnxLossFn::Mse},
    {"bce", OnnxLossFn::BceWithLogits},
    {"l1", OnnxLossFn::L1},
    {"smooth-l1", OnnxLossFn::SmoothL1},
};

std::string kinds_text() {
  std::string s;
  for (const auto& [name, fn] : kKinds) s += (s.empty() ? "" : ", ") + std::string(name);
  return s;
}

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(a, e - a + 1);
}

[[noreturn]] void bad(const std::string& spec, const std::string& why) {
  throw InputError("--loss '" + spec + "': " + why);
}

double parse_weight(const std::string& spec, const std::string& text) {
  double w = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, w);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(w) || w <= 0) {
    bad(spec, "weight '" + text + "' is not a positive number");
  }
  return w;
}

OnnxLossTerm parse_term(const std::string& spec, const std::string& raw) {
  OnnxLossTerm t;
  t.text = trim(raw);
  if (t.text.empty()) bad(spec, "empty term (write terms as [WEIGHT*]KIND[:OUTPUT] joined by '+')");
  std::string rest = t.text;
  size_t colon = rest.find(':');
  size_t star = rest.find('*');
  if (star != std::string::npos && (colon == std::string::npos || star < colon)) {
    t.weight = parse_weight(spec, trim(rest.substr(0, star)));
    rest = rest.substr(star + 1);
    colon = rest.find(':');
  }
  std::string kind = trim(rest.substr(0, colon));
  if (colon != std::string::npos) {
    t.output = trim(rest.substr(colon + 1));
    if (t.output.empty()) bad(spec, "term '" + t.text + "' names no output after ':'");
  }
  for (const auto& [name, fn] : kKinds) {
    if (kind == name) {
      t.fn = fn;
      return t;
    }
  }
  if (kind == "none") bad(spec, "'none' (the graph's own loss) cannot be combined with other terms");
  bad(spec, "unknown loss '" + kind + "' (one of: " + kinds_text() + ", or none)");
}

const OnnxLossOutput& find_output(const OnnxLossTerm& t, const std::vector<OnnxLossOutput>& outputs,
                                  const GraphBuilder& b) {
  if (t.output.empty()) {
    for (const OnnxLossOutput& o : outputs) {
      if (is_floating(b.tensor(o.tensor).dtype)) return o;
    }
    throw InputError("no floating-point graph output to attach a loss to (import without a loss for inference)");
  }
  for (const OnnxLossOutput& o : outputs) {
    if (o.name == t.output) return o;
  }
  // An index, when no output has that name.
  size_t index = 0;
  const char* end = t.output.data() + t.output.size();
  auto [ptr, ec] = std::from_chars(t.output.data(), end, index);
  if (ec == std::errc() && ptr == end) {
    if (index < outputs.size()) return outputs[index];
    throw InputError("--loss term '" + t.text + "': output index " + t.output + " is out of range (the graph has " +
                     std::to_string(outputs.size()) + " outputs)");
  }
  std::string names;
  for (const OnnxLossOutput& o : outputs) names += (names.empty() ? "" : ", ") + o.name;
  throw InputError("--loss term '" + t.text + "': '" + t.output + "' is not a graph output (outputs: " + names + ")");
}

BuildConfig loss_config(const GraphBuilder& b, LossKind kind) {
  BuildConfig cfg;
  cfg.loss = kind;
  cfg.dtype = b.activation_dtype();
  return cfg;
}

// One term's loss on `out`, named by `prefix`.
TensorId term_loss(GraphBuilder& b, const OnnxLossTerm& t, TensorId out, const std::string& prefix) {
  const std::vector<int64_t> s = b.shape(out);
  const DType dtype = b.tensor(out).dtype;
  auto shape_error = [&](const std::string& want) {
    return InputError("--loss term '" + t.text + "': " + want + ", output '" + b.tensor(out).name + "' is " +
                      shape_text(s));
  };
  switch (t.fn) {
    case OnnxLossFn::CrossEntropy:
      if (s.size() < 2) throw shape_error("cross-entropy needs logits [N,C], [B,S,V] or [N,C,H,W,...]");
      return add_loss(b, out, LossKind::CrossEntropy, loss_config(b, LossKind::CrossEntropy), prefix);
    case OnnxLossFn::PixelCrossEntropy: {
      if (s.size() < 2) throw shape_error("pixel-ce needs logits [N,C,d1,...] (class dimension 1)");
      std::vector<int64_t> ts = {s[0]};
      ts.insert(ts.end(), s.begin() + 2, s.end());
      return b.cross_entropy(prefix, out, b.target(prefix + ".target", ts, DType::I64));
    }
    case OnnxLossFn::TokenCrossEntropy:
      if (s.size() != 2 && s.size() != 3) throw shape_error("token-ce needs logits [N,V] or [B,S,V]");
      return add_loss(b, out, LossKind::CrossEntropy, loss_config(b, LossKind::CrossEntropy), prefix);
    case OnnxLossFn::NextToken:
      if (s.size() != 3) throw shape_error("next-token needs logits [B,S,V]");
      return add_loss(b, out, LossKind::NextToken, loss_config(b, LossKind::NextToken), prefix);
    case OnnxLossFn::Mse:
      return add_loss(b, out, LossKind::Mse, loss_config(b, LossKind::Mse), prefix);
    case OnnxLossFn::BceWithLogits:
      return b.bce_with_logits_loss(prefix, out, b.target(prefix + ".target", s, dtype));
    case OnnxLossFn::L1:
      return b.l1_loss(prefix, out, b.target(prefix + ".target", s, dtype));
    case OnnxLossFn::SmoothL1:
      return b.smooth_l1_loss(prefix, out, b.target(prefix + ".target", s, dtype));
  }
  throw InputError("--loss term '" + t.text + "': unknown loss");
}

}  // namespace

OnnxLossSpec parse_onnx_loss_spec(const std::string& text) {
  OnnxLossSpec spec;
  if (trim(text).empty()) bad(text, "empty (a loss such as ce, or none)");
  const std::string whole = trim(text);
  if (whole == "none" || whole.rfind("none:", 0) == 0) {
    if (whole.find('+') != std::string::npos) bad(text, "'none' (the graph's own loss) cannot be combined with other terms");
    spec.none = true;
    if (whole != "none") {
      spec.none_output = trim(whole.substr(5));
      if (spec.none_output.empty()) bad(text, "'none:' names no output");
    }
    return spec;
  }
  size_t start = 0;
  while (true) {
    size_t plus = text.find('+', start);
    spec.terms.push_back(parse_term(text, text.substr(start, plus == std::string::npos ? std::string::npos : plus - start)));
    if (plus == std::string::npos) break;
    start = plus + 1;
  }
  return spec;
}

TensorId build_onnx_loss(GraphBuilder& b, const OnnxLossSpec& spec, const std::vector<OnnxLossOutput>& outputs) {
  if (spec.none || spec.terms.empty()) throw InputError("build_onnx_loss: no loss terms");
  std::vector<TensorId> used;
  for (const OnnxLossTerm& t : spec.terms) {
    TensorId out = find_output(t, outputs, b).tensor;
    if (!is_floating(b.tensor(out).dtype)) {
      throw InputError("--loss term '" + t.text + "': output '" + b.tensor(out).name + "' is " +
                       std::string(dtype_name(b.tensor(out).dtype)) + ", not floating-point");
    }
    used.push_back(out);
  }
  b.begin_loss();
  // Python evaluates `l0 + w1 * l1 + l2` left to right: each loss, its weight, then the sum so far.
  const bool single = spec.terms.size() == 1;
  TensorId total = kNone;
  for (size_t i = 0; i < spec.terms.size(); ++i) {
    const OnnxLossTerm& t = spec.terms[i];
    const std::string prefix = single ? "loss" : "loss." + std::to_string(i);
    TensorId l = term_loss(b, t, used[i], prefix);
    if (t.weight) l = b.mul_scalar(prefix + ".weighted", l, *t.weight);
    total = total == kNone ? l : b.add("loss.sum." + std::to_string(i), total, l);
  }
  return total;
}

TensorId graph_scalar_loss(const GraphBuilder& b, const OnnxLossSpec& spec, const std::vector<OnnxLossOutput>& outputs) {
  auto is_scalar = [&](TensorId id) { return is_floating(b.tensor(id).dtype) && b.tensor(id).numel() == 1; };
  if (!spec.none_output.empty()) {
    OnnxLossTerm named;
    named.output = spec.none_output;
    named.text = "none:" + spec.none_output;
    TensorId t = find_output(named, outputs, b).tensor;
    if (!is_scalar(t)) {
      throw InputError("--loss " + named.text + ": output '" + b.tensor(t).name + "' is " + shape_text(b.shape(t)) + " " +
                       std::string(dtype_name(b.tensor(t).dtype)) + ", not a floating-point scalar");
    }
    return t;
  }
  std::vector<const OnnxLossOutput*> scalars;
  for (const OnnxLossOutput& o : outputs) {
    if (is_scalar(o.tensor)) scalars.push_back(&o);
  }
  if (scalars.size() == 1) return scalars[0]->tensor;
  if (scalars.empty()) {
    throw InputError("--loss none: the graph has no floating-point scalar output to be its loss (export the loss as an output, or pass a loss such as ce)");
  }
  std::string names;
  for (const OnnxLossOutput* o : scalars) names += (names.empty() ? "" : ", ") + o->name;
  throw InputError("--loss none: the graph has " + std::to_string(scalars.size()) + " scalar outputs (" + names +
                   "); pick one with none:OUTPUT");
}

}  // namespace headroom
