#include "frontends/zoo/transformer_common.h"

#include <cstdlib>

#include "util/error.h"

namespace headroom {

int64_t sequence_length(const BuildConfig& config, int64_t fallback, int64_t max_positions,
                        const std::string& model, const std::string& limit_name) {
  int64_t seq = config.seq.value_or(fallback);
  if (seq <= 0) throw InputError(model + ": sequence length must be positive, got " + std::to_string(seq));
  if (seq > max_positions) {
    throw InputError(model + ": sequence length " + std::to_string(seq) + " is longer than the model's " +
                     std::to_string(max_positions) + " positions (" + limit_name + ")");
  }
  return seq;
}

double get_double(SpecReader& r, const std::string& model, const std::string& key, double fallback,
                  double min_value, double max_value) {
  if (!r.has(key)) {
    r.get_string(key, "");  // marks the key as known
    return fallback;
  }
  std::string v = r.get_string(key, "");
  char* end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size() || !(d >= min_value && d <= max_value)) {
    throw InputError("model '" + model + "': " + key + "=" + v + " is not a number in [" +
                     std::to_string(min_value) + ", " + std::to_string(max_value) + "]");
  }
  return d;
}

int64_t head_dim(const std::string& model, int64_t hidden, int64_t heads) {
  if (hidden % heads != 0) {
    throw InputError("model '" + model + "': hidden=" + std::to_string(hidden) + " is not divisible by heads=" +
                     std::to_string(heads));
  }
  return hidden / heads;
}

LinearParams linear_params(GraphBuilder& b, const std::string& module, int64_t in, int64_t out, bool bias) {
  LinearParams p;
  p.weight = b.parameter(module + ".weight", {out, in});
  if (bias) p.bias = b.parameter(module + ".bias", {out});
  return p;
}

NormParams layer_norm_params(GraphBuilder& b, const std::string& module, int64_t d) {
  return {b.parameter(module + ".weight", {d}), b.parameter(module + ".bias", {d})};
}

TensorId rotate_half(GraphBuilder& b, const std::string& m, TensorId x) {
  const int64_t d = b.shape(x).back();
  TensorId x1 = b.slice(m + ".x1", x, -1, 0, d / 2);
  TensorId x2 = b.slice(m + ".x2", x, -1, d / 2, d);
  return b.cat(m + ".cat", {b.neg(m + ".neg", x2), x1}, -1);
}

TensorId repeat_kv(GraphBuilder& b, const std::string& m, TensorId x, int64_t n_rep) {
  if (n_rep == 1) return x;
  const auto s = b.shape(x);
  x = b.slice(m + ".slice", x, 0, 0, s[0]);
  x = b.slice(m + ".slice", x, 1, 0, s[1]);
  x = b.unsqueeze(m + ".unsqueeze", x, 2);
  x = b.slice(m + ".slice", x, 3, 0, s[2]);
  x = b.slice(m + ".slice", x, 4, 0, s[3]);
  x = b.expand(m + ".expand", x, {s[0], s[1], n_rep, s[2], s[3]});
  return b.reshape(m + ".reshape", x, {s[0], s[1] * n_rep, s[2], s[3]});
}

TensorId eager_softmax_as(GraphBuilder& b, const std::string& module, TensorId scores, DType dtype) {
  if (b.tensor(scores).dtype == DType::F32) return b.softmax(module + ".softmax", scores, -1);
  size_t statement = b.open_scope();
  b.hold(scores);
  TensorId w = b.cast(module + ".softmax.to_float32", scores, DType::F32);
  w = b.softmax(module + ".softmax", w, -1);
  w = b.cast(module + ".softmax.to", w, dtype);
  b.release_holds(statement);
  return w;
}

}  // namespace headroom
