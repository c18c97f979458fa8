#include "frontends/onnx/onnx_const.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "frontends/onnx/onnx_model.h"
#include "util/checked.h"
#include "util/error.h"

namespace headroom::onnx_import {
namespace {

using onnx::TensorProto;

int64_t numel_of(const std::vector<int64_t>& s, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) throw InputError(what + ": negative dimension in " + shape_text(s));
    n = checked_mul(n, d, what);
  }
  return n;
}

double half_to_double(uint16_t h) {
  int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
  double v;
  if (exp == 0)
    v = std::ldexp(frac, -24);
  else if (exp == 31)
    v = frac ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else
    v = std::ldexp(frac + 1024, exp - 25);
  return sign ? -v : v;
}

double bf16_to_double(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

template <typename T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Stores one decoded value (integers as ints, floating types as floats).
void push_value(ConstTensor& c, int64_t i, double f) {
  if (c.is_float())
    c.floats.push_back(f);
  else
    c.ints.push_back(i);
}

void decode_raw(ConstTensor& c, const std::string& raw) {
  const int64_t n = static_cast<int64_t>(raw.size()) / elem_size(c.elem);
  const char* p = raw.data();
  for (int64_t k = 0; k < n; ++k) {
    switch (c.elem) {
      case TensorProto::FLOAT:
        push_value(c, 0, load<float>(p + 4 * k));
        break;
      case TensorProto::DOUBLE:
        push_value(c, 0, load<double>(p + 8 * k));
        break;
      case TensorProto::FLOAT16:
        push_value(c, 0, half_to_double(load<uint16_t>(p + 2 * k)));
        break;
      case TensorProto::BFLOAT16:
        push_value(c, 0, bf16_to_double(load<uint16_t>(p + 2 * k)));
        break;
      case TensorProto::INT64:
        push_value(c, load<int64_t>(p + 8 * k), 0);
        break;
      case TensorProto::UINT64:
        push_value(c, static_cast<int64_t>(load<uint64_t>(p + 8 * k)), 0);
        break;
      case TensorProto::INT32:
        push_value(c, load<int32_t>(p + 4 * k), 0);
        break;
      case TensorProto::UINT32:
        push_value(c, load<uint32_t>(p + 4 * k), 0);
        break;
      case TensorProto::INT16:
        push_value(c, load<int16_t>(p + 2 * k), 0);
        break;
      case TensorProto::UINT16:
        push_value(c, load<uint16_t>(p + 2 * k), 0);
        break;
      case TensorProto::INT8:
        push_value(c, load<int8_t>(p + k), 0);
        break;
      case TensorProto::UINT8:
        push_value(c, load<uint8_t>(p + k), 0);
        break;
      case TensorProto::BOOL:
        push_value(c, p[k] != 0, 0);
        break;
      default:
        break;
    }
  }
}

// Decodes the typed repeated fields; returns how many values the tensor holds there.
int64_t decode_typed(ConstTensor& c, const TensorProto& t, bool store) {
  switch (c.elem) {
    case TensorProto::FLOAT:
      if (store)
        for (float f : t.float_data()) push_value(c, 0, f);
      return t.float_data_size();
    case TensorProto::DOUBLE:
      if (store)
        for (double f : t.double_data()) push_value(c, 0, f);
      return t.double_data_size();
    case TensorProto::INT64:
      if (store)
        for (int64_t v : t.int64_data()) push_value(c, v, 0);
      return t.int64_data_size();
    case TensorProto::UINT32:
    case TensorProto::UINT64:
      if (store)
        for (uint64_t v : t.uint64_data()) push_value(c, static_cast<int64_t>(v), 0);
      return t.uint64_data_size();
    case TensorProto::FLOAT16:
      if (store)
        for (int32_t v : t.int32_data()) push_value(c, 0, half_to_double(static_cast<uint16_t>(v)));
      return t.int32_data_size();
    case TensorProto::BFLOAT16:
      if (store)
        for (int32_t v : t.int32_data()) push_value(c, 0, bf16_to_double(static_cast<uint16_t>(v)));
      return t.int32_data_size();
    case TensorProto::INT32:
    case TensorProto::INT16:
    case TensorProto::UINT16:
    case TensorProto::INT8:
    case TensorProto::UINT8:
    case TensorProto::BOOL:
      if (store)
        for (int32_t v : t.int32_data()) push_value(c, c.elem == TensorProto::BOOL ? v != 0 : v, 0);
      return t.int32_data_size();
    default:
      return -1;  // strings, complex: not decoded
  }
}

ConstTensor unknown_like(int32_t elem, std::vector<int64_t> shape) {
  ConstTensor c;
  c.elem = elem;
  c.shape = std::move(shape);
  return c;
}

// A known tensor of `shape` filled with zeros; or, when it is too large to keep, an unknown one.
ConstTensor make(int32_t elem, std::vector<int64_t> shape, const std::string& what) {
  ConstTensor c = unknown_like(elem, std::move(shape));
  int64_t n = numel_of(c.shape, what);
  if (n > kMaxFoldElements) return c;
  c.known = true;
  if (c.is_float())
    c.floats.assign(static_cast<size_t>(n), 0.0);
  else
    c.ints.assign(static_cast<size_t>(n), 0);
  return c;
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

int64_t norm_axis(int64_t axis, int64_t rank, const std::string& what) {
  if (axis < -rank || axis >= rank) {
    throw InputError(what + ": axis " + std::to_string(axis) + " out of range for rank " +
                     std::to_string(rank));
  }
  return axis < 0 ? axis + rank : axis;
}

// Copies c's element `from` into out's element `to`, converting when the element kinds differ
// (a file may mix types where ONNX requires one).
void copy_elem(const ConstTensor& c, int64_t from, ConstTensor& out, int64_t to) {
  const size_t f = static_cast<size_t>(from), t = static_cast<size_t>(to);
  if (out.is_float()) {
    out.floats[t] = c.as_double(f);
  } else if (!c.is_float()) {
    out.ints[t] = c.ints[f];
  } else {
    double v = c.floats[f];
    if (!std::isfinite(v) || v >= 9.2e18 || v <= -9.2e18) {
      throw InputError("constant value " + std::to_string(v) + " does not fit a 64-bit integer");
    }
    out.ints[t] = static_cast<int64_t>(v);
  }
}

// Element offset in a tensor of `shape` broadcast to `out_shape` for output multi-index `idx`.
int64_t broadcast_offset(const std::vector<int64_t>& idx, const std::vector<int64_t>& out_shape,
                         const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  int64_t off = 0;
  size_t lead = out_shape.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != 1) off += idx[lead + i] * strides[i];
  }
  return off;
}

void next_index(std::vector<int64_t>& idx, const std::vector<int64_t>& shape) {
  for (size_t i = shape.size(); i-- > 0;) {
    if (++idx[i] < shape[i]) return;
    idx[i] = 0;
  }
}

bool all_known(const std::vector<const ConstTensor*>& ins) {
  return std::all_of(ins.begin(), ins.end(),
                     [](const ConstTensor* c) { return c == nullptr || c->known; });
}

int64_t int_op(const std::string& op, int64_t a, int64_t b, const std::string& what) {
  int64_t r = 0;
  if (op == "Add") {
    if (__builtin_add_overflow(a, b, &r)) throw InputError(what + ": constant addition overflows");
  } else if (op == "Sub") {
    if (__builtin_sub_overflow(a, b, &r))
      throw InputError(what + ": constant subtraction overflows");
  } else if (op == "Mul") {
    if (__builtin_mul_overflow(a, b, &r))
      throw InputError(what + ": constant multiplication overflows");
  } else if (op == "Div" || op == "Mod") {
    if (b == 0) throw InputError(what + ": constant integer division by zero");
    if (a == std::numeric_limits<int64_t>::min() && b == -1)
      throw InputError(what + ": constant division overflows");
    if (op == "Div") return a / b;
    r = a % b;  // Mod with fmod=0 takes the divisor's sign
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
  } else if (op == "Min") {
    r = std::min(a, b);
  } else if (op == "Max") {
    r = std::max(a, b);
  } else if (op == "And") {
    r = (a != 0) && (b != 0);
  } else if (op == "Or") {
    r = (a != 0) || (b != 0);
  } else if (op == "Xor") {
    r = (a != 0) != (b != 0);
  }
  return r;
}

double float_op(const std::string& op, double a, double b) {
  if (op == "Add") return a + b;
  if (op == "Sub") return a - b;
  if (op == "Mul") return a * b;
  if (op == "Div") return a / b;
  if (op == "Pow") return std::pow(a, b);
  if (op == "Mod") return std::fmod(a, b);
  if (op == "Min") return std::min(a, b);
  if (op == "Max") return std::max(a, b);
  return 0.0;
}

int64_t to_int_checked(double v, const std::string& what) {
  if (!std::isfinite(v) || v >= 9.2e18 || v <= -9.2e18) {
    throw InputError(what + ": value " + std::to_string(v) + " does not fit a 64-bit integer");
  }
  return static_cast<int64_t>(v);
}

ConstTensor binary(const std::string& op, const ConstTensor& a, const ConstTensor& b,
                   const std::string& what) {
  static const char* kCompare[] = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"};
  bool compare = std::find(std::begin(kCompare), std::end(kCompare), op) != std::end(kCompare);
  bool logical = op == "And" || op == "Or" || op == "Xor";
  std::vector<int64_t> shape = broadcast(a.shape, b.shape, what);
  int32_t elem = compare || logical ? static_cast<int32_t>(TensorProto::BOOL) : a.elem;
  ConstTensor out = make(elem, shape, what);
  if (!out.known || !a.known || !b.known) return unknown_like(elem, shape);
  std::vector<int64_t> sa = strides_of(a.shape), sb = strides_of(b.shape), idx(shape.size(), 0);
  const bool fl = a.is_float() || b.is_float();
  for (int64_t k = 0; k < static_cast<int64_t>(out.size()); ++k) {
    int64_t oa = broadcast_offset(idx, shape, a.shape, sa),
            ob = broadcast_offset(idx, shape, b.shape, sb);
    if (compare) {
      double x = a.as_double(static_cast<size_t>(oa)), y = b.as_double(static_cast<size_t>(ob));
      bool r = false;
      if (!fl) {
        int64_t xi = a.ints[static_cast<size_t>(oa)], yi = b.ints[static_cast<size_t>(ob)];
        r = op == "Equal"         ? xi == yi
            : op == "Less"        ? xi < yi
            : op == "Greater"     ? xi > yi
            : op == "LessOrEqual" ? xi <= yi
                                  : xi >= yi;
      } else {
        r = op == "Equal"         ? x == y
            : op == "Less"        ? x < y
            : op == "Greater"     ? x > y
            : op == "LessOrEqual" ? x <= y
                                  : x >= y;
      }
      out.ints[static_cast<size_t>(k)] = r;
    } else if (out.is_float()) {
      out.floats[static_cast<size_t>(k)] =
          float_op(op, a.as_double(static_cast<size_t>(oa)), b.as_double(static_cast<size_t>(ob)));
    } else if (fl) {
      out.ints[static_cast<size_t>(k)] = to_int_checked(
          float_op(op, a.as_double(static_cast<size_t>(oa)), b.as_double(static_cast<size_t>(ob))),
          what);
    } else if (op == "Pow") {
      double p = std::pow(static_cast<double>(a.ints[static_cast<size_t>(oa)]),
                          static_cast<double>(b.ints[static_cast<size_t>(ob)]));
      out.ints[static_cast<size_t>(k)] = to_int_checked(p, what);
    } else {
      out.ints[static_cast<size_t>(k)] =
          int_op(op, a.ints[static_cast<size_t>(oa)], b.ints[static_cast<size_t>(ob)], what);
    }
    next_index(idx, shape);
  }
  return out;
}

ConstTensor unary(const std::string& op, const ConstTensor& a, const std::string& what) {
  int32_t elem = op == "Not" ? static_cast<int32_t>(TensorProto::BOOL) : a.elem;
  ConstTensor out = make(elem, a.shape, what);
  if (!out.known || !a.known) return unknown_like(elem, a.shape);
  for (size_t k = 0; k < out.size(); ++k) {
    if (out.is_float()) {
      double x = a.floats[k];
      double r = op == "Neg"          ? -x
                 : op == "Abs"        ? std::fabs(x)
                 : op == "Floor"      ? std::floor(x)
                 : op == "Ceil"       ? std::ceil(x)
                 : op == "Sqrt"       ? std::sqrt(x)
                 : op == "Reciprocal" ? 1.0 / x
                 : op == "Round"      ? std::nearbyint(x)
                 : op == "Sign"       ? (x > 0) - (x < 0)
                 : op == "Relu"       ? std::max(0.0, x)
                 : op == "Exp"        ? std::exp(x)
                 : op == "Log"        ? std::log(x)
                                      : x;
      out.floats[k] = r;
    } else {
      int64_t x = a.ints[k];
      if (op == "Neg" || op == "Abs") {
        if (x == std::numeric_limits<int64_t>::min())
          throw InputError(what + ": constant negation overflows");
        out.ints[k] = op == "Neg" ? -x : std::abs(x);
      } else if (op == "Not") {
        out.ints[k] = x == 0;
      } else if (op == "Sign") {
        out.ints[k] = (x > 0) - (x < 0);
      } else if (op == "Relu") {
        out.ints[k] = std::max<int64_t>(0, x);
      } else if (op == "Sqrt" || op == "Reciprocal" || op == "Exp" || op == "Log") {
        return unknown_like(elem, a.shape);  // integer results of these are not used for shapes
      } else {
        out.ints[k] = x;
      }
    }
  }
  return out;
}

ConstTensor cast(const ConstTensor& a, int32_t to, const std::string& what) {
  if (!TensorProto::DataType_IsValid(to) || to == TensorProto::UNDEFINED ||
      to == TensorProto::STRING) {
    throw InputError(what + ": Cast to " + elem_type_name(to) + " is not supported");
  }
  ConstTensor out = make(to, a.shape, what);
  if (!out.known || !a.known) return unknown_like(to, a.shape);
  for (size_t k = 0; k < out.size(); ++k) {
    if (out.is_float())
      out.floats[k] = a.as_double(k);
    else if (to == TensorProto::BOOL)
      out.ints[k] = a.as_double(k) != 0.0;
    else
      out.ints[k] = a.is_float() ? to_int_checked(std::trunc(a.floats[k]), what) : a.ints[k];
  }
  return out;
}

// Axes given as an attribute (older opsets) or as input `slot` (newer ones).
std::optional<std::vector<int64_t>> axes_of(const onnx::NodeProto& node,
                                            const std::vector<const ConstTensor*>& in, size_t slot,
                                            const std::string& what) {
  NodeAttrs attrs(node);
  if (auto a = attrs.ints("axes")) return a;
  if (in.size() > slot && in[slot] != nullptr) return in[slot]->int_values(what + " axes");
  return std::nullopt;
}

ConstTensor gather(const ConstTensor& data, const ConstTensor& idx, int64_t axis_attr,
                   const std::string& what) {
  int64_t r = static_cast<int64_t>(data.shape.size());
  if (r == 0) throw InputError(what + ": Gather from a scalar");
  int64_t axis = norm_axis(axis_attr, r, what);
  std::vector<int64_t> shape(data.shape.begin(), data.shape.begin() + axis);
  shape.insert(shape.end(), idx.shape.begin(), idx.shape.end());
  shape.insert(shape.end(), data.shape.begin() + axis + 1, data.shape.end());
  ConstTensor out = make(data.elem, shape, what);
  if (!out.known || !data.known || !idx.known) return unknown_like(data.elem, shape);
  std::vector<int64_t> indices = idx.int_values(what + " indices");
  const int64_t n = data.shape[static_cast<size_t>(axis)];
  for (int64_t& i : indices) {
    if (i < -n || i >= n)
      throw InputError(what + ": index " + std::to_string(i) + " out of range for size " +
                       std::to_string(n));
    if (i < 0) i += n;
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= data.shape[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < r; ++d) inner *= data.shape[static_cast<size_t>(d)];
  int64_t k = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i : indices) {
      for (int64_t j = 0; j < inner; ++j) copy_elem(data, (o * n + i) * inner + j, out, k++);
    }
  }
  return out;
}

ConstTensor concat(const std::vector<const ConstTensor*>& ins, int64_t axis_attr,
                   const std::string& what) {
  if (ins.empty() || ins[0] == nullptr) throw InputError(what + ": Concat of nothing");
  const size_t r = ins[0]->shape.size();
  if (r == 0) throw InputError(what + ": Concat of scalars");
  int64_t axis = norm_axis(axis_attr, static_cast<int64_t>(r), what);
  std::vector<int64_t> shape = ins[0]->shape;
  shape[static_cast<size_t>(axis)] = 0;
  for (const ConstTensor* c : ins) {
    if (c == nullptr || c->shape.size() != r)
      throw InputError(what + ": Concat of tensors of different rank");
    for (size_t d = 0; d < r; ++d) {
      if (static_cast<int64_t>(d) != axis && c->shape[d] != shape[d]) {
        throw InputError(what + ": Concat of " + shape_text(ins[0]->shape) + " and " +
                         shape_text(c->shape));
      }
    }
    shape[static_cast<size_t>(axis)] =
        checked_add(shape[static_cast<size_t>(axis)], c->shape[static_cast<size_t>(axis)], what);
  }
  ConstTensor out = make(ins[0]->elem, shape, what);
  if (!out.known || !all_known(ins)) return unknown_like(ins[0]->elem, shape);
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
  int64_t k = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (const ConstTensor* c : ins) {
      int64_t chunk = c->numel() / std::max<int64_t>(1, outer);
      for (int64_t j = 0; j < chunk; ++j) copy_elem(*c, o * chunk + j, out, k++);
    }
  }
  return out;
}

ConstTensor reshaped(const ConstTensor& a, std::vector<int64_t> shape) {
  ConstTensor out = a;
  out.shape = std::move(shape);
  return out;
}

ConstTensor slice(const ConstTensor& a, std::vector<int64_t> starts, std::vector<int64_t> ends,
                  std::optional<std::vector<int64_t>> axes,
                  std::optional<std::vector<int64_t>> steps, const std::string& what) {
  const int64_t r = static_cast<int64_t>(a.shape.size());
  if (starts.size() != ends.size())
    throw InputError(what + ": Slice starts and ends differ in length");
  if (!axes) {
    axes.emplace();
    for (size_t i = 0; i < starts.size(); ++i) axes->push_back(static_cast<int64_t>(i));
  }
  if (!steps) steps = std::vector<int64_t>(starts.size(), 1);
  if (axes->size() != starts.size() || steps->size() != starts.size()) {
    throw InputError(what + ": Slice axes/steps do not match starts");
  }
  std::vector<int64_t> begin(static_cast<size_t>(r), 0), step(static_cast<size_t>(r), 1),
      shape = a.shape;
  std::vector<bool> seen(static_cast<size_t>(r), false);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t ax = norm_axis((*axes)[i], r, what);
    if (seen[static_cast<size_t>(ax)]) throw InputError(what + ": Slice axis repeated");
    seen[static_cast<size_t>(ax)] = true;
    int64_t n = a.shape[static_cast<size_t>(ax)], st = (*steps)[i], s = starts[i], e = ends[i];
    if (st == 0) throw InputError(what + ": Slice step 0");
    if (s < 0) s += n;
    if (e < 0) e += n;
    int64_t count;
    if (n == 0) {
      s = 0;
      count = 0;
    } else if (st > 0) {
      s = std::clamp<int64_t>(s, 0, n);
      e = std::clamp<int64_t>(e, 0, n);
      count = e > s ? (e - s - 1) / st + 1 : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, n - 1);
      e = std::clamp<int64_t>(e, -1, n - 1);
      count = s > e ? (s - e - 1) / (-st) + 1 : 0;
    }
    begin[static_cast<size_t>(ax)] = s;
    step[static_cast<size_t>(ax)] = st;
    shape[static_cast<size_t>(ax)] = count;
  }
  ConstTensor out = make(a.elem, shape, what);
  if (!out.known || !a.known) return unknown_like(a.elem, shape);
  std::vector<int64_t> st = strides_of(a.shape), idx(shape.size(), 0);
  for (int64_t k = 0; k < static_cast<int64_t>(out.size()); ++k) {
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d) off += (begin[d] + idx[d] * step[d]) * st[d];
    copy_elem(a, off, out, k);
    next_index(idx, shape);
  }
  return out;
}

ConstTensor transpose(const ConstTensor& a, std::vector<int64_t> perm, const std::string& what) {
  const size_t r = a.shape.size();
  if (perm.empty())
    for (size_t i = r; i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  if (perm.size() != r) throw InputError(what + ": Transpose perm has the wrong length");
  std::vector<bool> seen(r, false);
  std::vector<int64_t> shape(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t p = norm_axis(perm[i], static_cast<int64_t>(r), what);
    if (seen[static_cast<size_t>(p)])
      throw InputError(what + ": Transpose perm is not a permutation");
    seen[static_cast<size_t>(p)] = true;
    perm[i] = p;
    shape[i] = a.shape[static_cast<size_t>(p)];
  }
  ConstTensor out = make(a.elem, shape, what);
  if (!out.known || !a.known) return unknown_like(a.elem, shape);
  std::vector<int64_t> st = strides_of(a.shape), idx(r, 0);
  for (int64_t k = 0; k < static_cast<int64_t>(out.size()); ++k) {
    int64_t off = 0;
    for (size_t d = 0; d < r; ++d) off += idx[d] * st[static_cast<size_t>(perm[d])];
    copy_elem(a, off, out, k);
    next_index(idx, shape);
  }
  return out;
}

ConstTensor expand_to(const ConstTensor& a, const std::vector<int64_t>& target,
                      const std::string& what) {
  std::vector<int64_t> shape = broadcast(a.shape, target, what);
  ConstTensor out = make(a.elem, shape, what);
  if (!out.known || !a.known) return unknown_like(a.elem, shape);
  std::vector<int64_t> st = strides_of(a.shape), idx(shape.size(), 0);
  for (int64_t k = 0; k < static_cast<int64_t>(out.size()); ++k) {
    copy_elem(a, broadcast_offset(idx, shape, a.shape, st), out, k);
    next_index(idx, shape);
  }
  return out;
}

ConstTensor reduce(const std::string& op, const ConstTensor& a,
                   std::optional<std::vector<int64_t>> axes, bool keepdims, bool noop_empty,
                   const std::string& what) {
  const int64_t r = static_cast<int64_t>(a.shape.size());
  if (axes && axes->empty() && noop_empty) return a;
  std::vector<bool> red(static_cast<size_t>(r), !axes || axes->empty());
  if (axes) {
    for (int64_t ax : *axes) red[static_cast<size_t>(norm_axis(ax, r, what))] = true;
  }
  std::vector<int64_t> shape, kept;
  for (int64_t d = 0; d < r; ++d) {
    if (!red[static_cast<size_t>(d)])
      shape.push_back(a.shape[static_cast<size_t>(d)]);
    else if (keepdims)
      shape.push_back(1);
    kept.push_back(red[static_cast<size_t>(d)] ? 1 : a.shape[static_cast<size_t>(d)]);
  }
  ConstTensor out = make(a.elem, shape, what);
  if (!out.known || !a.known) return unknown_like(a.elem, shape);
  const bool fl = out.is_float();
  std::vector<bool> started(out.size(), false);
  std::vector<int64_t> st = strides_of(kept), idx(static_cast<size_t>(r), 0);
  std::vector<int64_t> count(out.size(), 0);
  for (int64_t k = 0; k < a.numel(); ++k) {
    int64_t o = 0;
    for (size_t d = 0; d < idx.size(); ++d) {
      if (!red[d]) o += idx[d] * st[d];
    }
    size_t oi = static_cast<size_t>(o);
    ++count[oi];
    if (fl) {
      double x = a.floats[static_cast<size_t>(k)], &y = out.floats[oi];
      if (!started[oi])
        y = x;
      else
        y = op == "ReduceProd"  ? y * x
            : op == "ReduceMax" ? std::max(y, x)
            : op == "ReduceMin" ? std::min(y, x)
                                : y + x;
    } else {
      int64_t x = a.ints[static_cast<size_t>(k)], &y = out.ints[oi];
      if (!started[oi])
        y = x;
      else if (op == "ReduceProd")
        y = int_op("Mul", y, x, what);
      else if (op == "ReduceMax")
        y = std::max(y, x);
      else if (op == "ReduceMin")
        y = std::min(y, x);
      else
        y = int_op("Add", y, x, what);
    }
    started[oi] = true;
    next_index(idx, a.shape);
  }
  if (op == "ReduceMean") {
    for (size_t k = 0; k < out.size(); ++k) {
      if (fl)
        out.floats[k] /= static_cast<double>(std::max<int64_t>(1, count[k]));
      else
        out.ints[k] /= std::max<int64_t>(1, count[k]);
    }
  }
  return out;
}

}  // namespace

// ---- ConstTensor ------------------------------------------------------------------------------

bool ConstTensor::is_float() const { return is_float_elem(elem); }

int64_t ConstTensor::numel() const { return numel_of(shape, "constant size"); }

std::vector<int64_t> ConstTensor::int_values(const std::string& what) const {
  if (!known)
    throw InputError(what + " is not a compile-time constant (its value depends on data)");
  if (!is_float()) return ints;
  std::vector<int64_t> r;
  for (double f : floats) {
    if (f != std::trunc(f)) throw InputError(what + " holds the non-integer " + std::to_string(f));
    r.push_back(to_int_checked(f, what));
  }
  return r;
}

std::optional<double> ConstTensor::scalar() const {
  if (!known || size() != 1) return std::nullopt;
  return as_double(0);
}

std::vector<int64_t> reshape_target(const std::vector<int64_t>& in, std::vector<int64_t> shape,
                                    bool allowzero, const std::string& what) {
  int64_t total = numel_of(in, what), known = 1;
  int infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allowzero) {
      if (i >= in.size())
        throw InputError(what + ": Reshape copies dimension " + std::to_string(i) + " of " +
                         shape_text(in));
      shape[i] = in[i];
    }
    if (shape[i] == -1) {
      if (infer >= 0) throw InputError(what + ": Reshape with two -1 dimensions");
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      throw InputError(what + ": Reshape to " + shape_text(shape));
    } else {
      known = checked_mul(known, shape[i], what);
    }
  }
  if (infer >= 0) {
    if (known == 0 || total % known != 0)
      throw InputError(what + ": cannot reshape " + shape_text(in) + " to " + shape_text(shape));
    shape[static_cast<size_t>(infer)] = total / known;
  } else if (known != total) {
    throw InputError(what + ": cannot reshape " + shape_text(in) + " to " + shape_text(shape));
  }
  return shape;
}

std::vector<int64_t> broadcast(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                               const std::string& what) {
  size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      throw InputError(what + ": shapes " + shape_text(a) + " and " + shape_text(b) +
                       " do not broadcast");
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

ConstTensor decode_tensor(const onnx::TensorProto& t, const std::string& what,
                          int64_t max_elements) {
  ConstTensor c;
  c.elem = t.data_type();
  if (!TensorProto::DataType_IsValid(c.elem) || c.elem == TensorProto::UNDEFINED) {
    throw InputError(what + " has no valid element type (" + std::to_string(c.elem) + ")");
  }
  c.shape.assign(t.dims().begin(), t.dims().end());
  for (int64_t d : c.shape) {
    if (d < 0) throw InputError(what + " has a negative dimension " + shape_text(c.shape));
  }
  const int64_t n = numel_of(c.shape, what);
  const int64_t esize = elem_size(c.elem);
  if (t.has_data_location() && t.data_location() == TensorProto::EXTERNAL) return c;  // never read
  if (t.has_raw_data() && esize > 0) {
    if (static_cast<int64_t>(t.raw_data().size()) != checked_mul(n, esize, what)) {
      throw InputError(what + " declares " + shape_text(c.shape) + " " + elem_type_name(c.elem) +
                       " (" + std::to_string(checked_mul(n, esize, what)) + " bytes) but holds " +
                       std::to_string(t.raw_data().size()) + " bytes");
    }
    if (n > max_elements || n == 0) {
      c.known = n == 0;
      return c;
    }
    decode_raw(c, t.raw_data());
    c.known = static_cast<int64_t>(c.size()) == n;  // complex and other types are not decoded
    if (!c.known) c.ints.clear(), c.floats.clear();
    return c;
  }
  int64_t count = decode_typed(c, t, false);
  if (count < 0 || (count == 0 && n > 0))
    return c;  // no inline data (a stripped weight) or not decodable
  if (count != n) {
    throw InputError(what + " declares " + shape_text(c.shape) + " (" + std::to_string(n) +
                     " values) but holds " + std::to_string(count));
  }
  if (n > max_elements) return c;
  decode_typed(c, t, true);
  c.known = static_cast<int64_t>(c.size()) == n;
  return c;
}

int64_t inline_value_count(const onnx::TensorProto& t) {
  if (t.has_data_location() && t.data_location() == TensorProto::EXTERNAL) return -1;
  if (t.has_raw_data()) {
    int64_t size = elem_size(t.data_type());
    return size > 0 ? static_cast<int64_t>(t.raw_data().size()) / size : -1;
  }
  ConstTensor c;
  c.elem = t.data_type();
  return decode_typed(c, t, false);
}

ConstTensor int64_tensor(std::vector<int64_t> values, bool as_scalar) {
  ConstTensor c;
  c.elem = TensorProto::INT64;
  if (!as_scalar) c.shape = {static_cast<int64_t>(values.size())};
  c.ints = std::move(values);
  c.known = true;
  return c;
}

std::optional<std::vector<ConstTensor>> fold_node(const onnx::NodeProto& node, int64_t opset,
                                                  const std::vector<const ConstTensor*>& in) {
  const std::string& op = node.op_type();
  const std::string what = node.name().empty() ? op : node.name();
  NodeAttrs attrs(node);
  auto one = [](ConstTensor c) {
    return std::optional<std::vector<ConstTensor>>(std::vector<ConstTensor>{std::move(c)});
  };
  auto input = [&](size_t i) -> const ConstTensor* { return i < in.size() ? in[i] : nullptr; };
  auto need = [&](size_t i) -> const ConstTensor& {
    if (input(i) == nullptr)
      throw InputError(what + ": input " + std::to_string(i) + " of " + op + " is missing");
    return *in[i];
  };

  if (op == "Constant") {
    if (const TensorProto* t = attrs.t("value")) return one(decode_tensor(*t, what + " value"));
    if (attrs.has("value_float")) {
      ConstTensor c;
      c.elem = TensorProto::FLOAT;
      c.floats = {attrs.f("value_float", 0)};
      c.known = true;
      return one(c);
    }
    if (auto v = attrs.floats("value_floats")) {
      ConstTensor c;
      c.elem = TensorProto::FLOAT;
      c.shape = {static_cast<int64_t>(v->size())};
      c.floats = *v;
      c.known = true;
      return one(c);
    }
    if (attrs.has("value_int")) return one(int64_tensor({attrs.i("value_int", 0)}, true));
    if (auto v = attrs.ints("value_ints")) return one(int64_tensor(*v));
    throw InputError(
        what +
        ": Constant without a value headroom reads (sparse or string values are not supported)");
  }
  if (op == "Shape") {
    const ConstTensor& a = need(0);
    int64_t r = static_cast<int64_t>(a.shape.size());
    int64_t s = attrs.i("start", 0), e = attrs.i("end", r);
    if (s < 0) s += r;
    if (e < 0) e += r;
    s = std::clamp<int64_t>(s, 0, r);
    e = std::clamp<int64_t>(e, s, r);
    return one(int64_tensor(std::vector<int64_t>(a.shape.begin() + s, a.shape.begin() + e)));
  }
  if (op == "Size") return one(int64_tensor({need(0).numel()}, true));
  if (op == "Identity") return one(need(0));
  if (op == "Cast") return one(cast(need(0), static_cast<int32_t>(attrs.i("to", 0)), what));
  if (op == "CastLike") return one(cast(need(0), need(1).elem, what));
  static const char* kBinary[] = {"Add",
                                  "Sub",
                                  "Mul",
                                  "Div",
                                  "Mod",
                                  "Pow",
                                  "Equal",
                                  "Less",
                                  "Greater",
                                  "LessOrEqual",
                                  "GreaterOrEqual",
                                  "And",
                                  "Or",
                                  "Xor"};
  if (std::find(std::begin(kBinary), std::end(kBinary), op) != std::end(kBinary)) {
    if (op == "Mod" && attrs.i("fmod", 0) != 0 && !need(0).is_float()) return std::nullopt;
    return one(binary(op, need(0), need(1), what));
  }
  if (op == "Min" || op == "Max") {
    ConstTensor acc = need(0);
    for (size_t i = 1; i < in.size(); ++i) acc = binary(op, acc, need(i), what);
    return one(acc);
  }
  static const char* kUnary[] = {"Neg",  "Abs",        "Not",  "Floor", "Ceil",
                                 "Sqrt", "Reciprocal", "Sign", "Round", "Relu"};
  if (std::find(std::begin(kUnary), std::end(kUnary), op) != std::end(kUnary))
    return one(unary(op, need(0), what));
  if (op == "Where") {
    const ConstTensor &c = need(0), &x = need(1), &y = need(2);
    std::vector<int64_t> shape = broadcast(broadcast(c.shape, x.shape, what), y.shape, what);
    ConstTensor out = make(x.elem, shape, what);
    if (!out.known || !c.known || !x.known || !y.known) return one(unknown_like(x.elem, shape));
    std::vector<int64_t> sc = strides_of(c.shape), sx = strides_of(x.shape),
                         sy = strides_of(y.shape), idx(shape.size(), 0);
    for (int64_t k = 0; k < static_cast<int64_t>(out.size()); ++k) {
      bool pick =
          c.as_double(static_cast<size_t>(broadcast_offset(idx, shape, c.shape, sc))) != 0.0;
      if (pick)
        copy_elem(x, broadcast_offset(idx, shape, x.shape, sx), out, k);
      else
        copy_elem(y, broadcast_offset(idx, shape, y.shape, sy), out, k);
      next_index(idx, shape);
    }
    return one(out);
  }
  if (op == "Gather") return one(gather(need(0), need(1), attrs.i("axis", 0), what));
  if (op == "Concat") return one(concat(in, attrs.i("axis", 0), what));
  if (op == "Unsqueeze") {
    const ConstTensor& a = need(0);
    std::optional<std::vector<int64_t>> axes = axes_of(node, in, 1, what);
    if (!axes) throw InputError(what + ": Unsqueeze without axes");
    int64_t r =
        checked_add(static_cast<int64_t>(a.shape.size()), static_cast<int64_t>(axes->size()), what);
    std::vector<bool> at(static_cast<size_t>(r), false);
    for (int64_t ax : *axes) {
      int64_t d = norm_axis(ax, r, what);
      if (at[static_cast<size_t>(d)]) throw InputError(what + ": Unsqueeze axis repeated");
      at[static_cast<size_t>(d)] = true;
    }
    std::vector<int64_t> shape;
    size_t j = 0;
    for (int64_t d = 0; d < r; ++d) shape.push_back(at[static_cast<size_t>(d)] ? 1 : a.shape[j++]);
    return one(reshaped(a, shape));
  }
  if (op == "Squeeze") {
    const ConstTensor& a = need(0);
    std::optional<std::vector<int64_t>> axes = axes_of(node, in, 1, what);
    int64_t r = static_cast<int64_t>(a.shape.size());
    std::vector<bool> drop(static_cast<size_t>(r), false);
    if (axes) {
      for (int64_t ax : *axes) {
        int64_t d = norm_axis(ax, r, what);
        if (a.shape[static_cast<size_t>(d)] != 1)
          throw InputError(what + ": Squeeze of a dimension that is not 1");
        drop[static_cast<size_t>(d)] = true;
      }
    } else {
      for (int64_t d = 0; d < r; ++d)
        drop[static_cast<size_t>(d)] = a.shape[static_cast<size_t>(d)] == 1;
    }
    std::vector<int64_t> shape;
    for (int64_t d = 0; d < r; ++d) {
      if (!drop[static_cast<size_t>(d)]) shape.push_back(a.shape[static_cast<size_t>(d)]);
    }
    return one(reshaped(a, shape));
  }
  if (op == "Slice") {
    const ConstTensor& a = need(0);
    if (opset < 10) {
      auto s = attrs.ints("starts"), e = attrs.ints("ends");
      if (!s || !e) throw InputError(what + ": Slice without starts/ends");
      return one(slice(a, *s, *e, attrs.ints("axes"), std::nullopt, what));
    }
    std::optional<std::vector<int64_t>> axes, steps;
    if (input(3)) axes = need(3).int_values(what + " axes");
    if (input(4)) steps = need(4).int_values(what + " steps");
    return one(slice(a, need(1).int_values(what + " starts"), need(2).int_values(what + " ends"),
                     axes, steps, what));
  }
  if (op == "Reshape") {
    const ConstTensor& a = need(0);
    std::vector<int64_t> target = opset < 5 ? attrs.ints("shape").value_or(std::vector<int64_t>{})
                                            : need(1).int_values(what + " shape");
    return one(reshaped(a, reshape_target(a.shape, target, attrs.i("allowzero", 0) != 0, what)));
  }
  if (op == "Flatten") {
    const ConstTensor& a = need(0);
    int64_t r = static_cast<int64_t>(a.shape.size());
    int64_t axis = attrs.i("axis", 1);
    if (axis < -r || axis > r) throw InputError(what + ": Flatten axis out of range");
    if (axis < 0) axis += r;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < r; ++d) {
      if (d < axis)
        outer = checked_mul(outer, a.shape[static_cast<size_t>(d)], what);
      else
        inner = checked_mul(inner, a.shape[static_cast<size_t>(d)], what);
    }
    return one(reshaped(a, {outer, inner}));
  }
  if (op == "Range") {
    const ConstTensor &s = need(0), &l = need(1), &d = need(2);
    if (!s.known || !l.known || !d.known || s.size() != 1 || l.size() != 1 || d.size() != 1)
      return std::nullopt;
    ConstTensor out;
    out.elem = s.elem;
    int64_t count;
    if (s.is_float()) {
      double a = s.floats[0], b = l.as_double(0), st = d.as_double(0);
      if (st == 0 || !std::isfinite(a) || !std::isfinite(b) || !std::isfinite(st))
        throw InputError(what + ": bad Range");
      count = to_int_checked(std::max(0.0, std::ceil((b - a) / st)), what);
      out.shape = {count};
      if (count <= kMaxFoldElements) {
        for (int64_t k = 0; k < count; ++k) out.floats.push_back(a + static_cast<double>(k) * st);
        out.known = true;
      }
    } else {
      int64_t a = s.ints[0], b = l.int_values(what + " limit")[0],
              st = d.int_values(what + " delta")[0];
      if (st == 0) throw InputError(what + ": Range with step 0");
      double span = (static_cast<double>(b) - static_cast<double>(a)) / static_cast<double>(st);
      count = to_int_checked(std::max(0.0, std::ceil(span)), what);
      out.shape = {count};
      if (count <= kMaxFoldElements) {
        for (int64_t k = 0; k < count; ++k) out.ints.push_back(a + k * st);
        out.known = true;
      }
    }
    return one(out);
  }
  if (op == "ConstantOfShape") {
    std::vector<int64_t> shape =
        input(0) ? need(0).int_values(what + " shape") : std::vector<int64_t>{};
    ConstTensor value;
    value.elem = TensorProto::FLOAT;
    value.floats = {0.0};
    value.known = true;
    if (const TensorProto* t = attrs.t("value")) value = decode_tensor(*t, what + " value");
    if (value.numel() != 1 || !value.known)
      throw InputError(what + ": ConstantOfShape value must hold one element");
    ConstTensor out = make(value.elem, shape, what);
    if (!out.known) return one(out);
    for (size_t k = 0; k < out.size(); ++k) copy_elem(value, 0, out, static_cast<int64_t>(k));
    return one(out);
  }
  if (op == "Expand") return one(expand_to(need(0), need(1).int_values(what + " shape"), what));
  if (op == "Transpose")
    return one(transpose(need(0), attrs.ints("perm").value_or(std::vector<int64_t>{}), what));
  if (op == "ReduceProd" || op == "ReduceSum" || op == "ReduceMax" || op == "ReduceMin" ||
      op == "ReduceMean") {
    return one(reduce(op, need(0), axes_of(node, in, 1, what), attrs.i("keepdims", 1) != 0,
                      attrs.i("noop_with_empty_axes", 0) != 0, what));
  }
  return std::nullopt;
}

}  // namespace headroom::onnx_import
