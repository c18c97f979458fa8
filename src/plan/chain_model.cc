#include "plan/chain_model.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "util/checked.h"
#include "util/file.h"
#include "util/json_input.h"

namespace headroom {
namespace {

using Json = nlohmann::json;

std::string number_text(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

void check_length(const std::string& name, size_t got, size_t want, int stages) {
  if (got == want) return;
  throw InputError(
      "chain: " + name + " has " + std::to_string(got) + " entries, a chain of " +
      std::to_string(stages) + " stages needs " + std::to_string(want) +
      (name == "x_bytes" ? " (the input of every stage and of the loss)" : " (one per stage)"));
}

void check_time(const std::string& what, double v) {
  if (!std::isfinite(v)) throw InputError("chain: " + what + " is not a finite number");
  if (v < 0)
    throw InputError("chain: " + what + " is " + number_text(v) + ", a time cannot be negative");
}

void check_size(const std::string& what, int64_t v) {
  if (v < 0)
    throw InputError("chain: " + what + " is " + std::to_string(v) + ", a size cannot be negative");
}

const Json& field(const Json& o, const std::string& name) {
  auto it = o.find(name);
  if (it == o.end()) throw InputError("chain: missing field '" + name + "'");
  return *it;
}

double read_time(const Json& v, const std::string& what) {
  if (!v.is_number())
    throw InputError("chain: " + what + " is " + json_value_text(v) + ", not a number");
  double d = v.get<double>();
  check_time(what, d);
  return d;
}

int64_t read_size(const Json& v, const std::string& what) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      throw InputError("chain: " + what + " is " + json_value_text(v) + ", past 2^63 bytes");
    int64_t s = v.get<int64_t>();
    check_size(what, s);
    return s;
  }
  if (!v.is_number())
    throw InputError("chain: " + what + " is " + json_value_text(v) + ", not a number");
  double d = v.get<double>();
  if (!std::isfinite(d) || d != std::floor(d))
    throw InputError("chain: " + what + " is " + json_value_text(v) + ", not a whole number of bytes");
  if (d < 0) throw InputError("chain: " + what + " is " + json_value_text(v) + ", a size cannot be negative");
  if (d >= 9.2e18)
    throw InputError("chain: " + what + " is " + json_value_text(v) + ", past 2^63 bytes");
  return static_cast<int64_t>(d);
}

const Json& array_field(const Json& o, const std::string& name) {
  const Json& a = field(o, name);
  if (!a.is_array())
    throw InputError("chain: '" + name + "' must be an array, got " + std::string(a.type_name()));
  return a;
}

std::vector<double> time_array(const Json& o, const std::string& name) {
  std::vector<double> out;
  const Json& a = array_field(o, name);
  for (size_t i = 0; i < a.size(); ++i)
    out.push_back(read_time(a[i], name + "[" + std::to_string(i) + "]"));
  return out;
}

std::vector<int64_t> size_array(const Json& o, const std::string& name) {
  std::vector<int64_t> out;
  const Json& a = array_field(o, name);
  for (size_t i = 0; i < a.size(); ++i)
    out.push_back(read_size(a[i], name + "[" + std::to_string(i) + "]"));
  return out;
}

}  // namespace

void validate_chain(const Chain& c) {
  const int L = c.length();
  if (L == 0) throw InputError("chain: fwd_ms is empty, a chain needs at least one stage");
  const auto n = static_cast<size_t>(L);
  check_length("bwd_ms", c.bwd_ms.size(), n, L);
  check_length("x_bytes", c.x_bytes.size(), n + 1, L);
  check_length("xbar_bytes", c.xbar_bytes.size(), n, L);
  check_length("fwd_tmp_bytes", c.fwd_tmp_bytes.size(), n, L);
  check_length("bwd_tmp_bytes", c.bwd_tmp_bytes.size(), n, L);
  auto idx = [](const char* name, size_t i) {
    return std::string(name) + "[" + std::to_string(i) + "]";
  };
  for (size_t i = 0; i < n; ++i) {
    check_time(idx("fwd_ms", i), c.fwd_ms[i]);
    check_time(idx("bwd_ms", i), c.bwd_ms[i]);
    check_size(idx("xbar_bytes", i), c.xbar_bytes[i]);
    check_size(idx("fwd_tmp_bytes", i), c.fwd_tmp_bytes[i]);
    check_size(idx("bwd_tmp_bytes", i), c.bwd_tmp_bytes[i]);
  }
  for (size_t i = 0; i <= n; ++i) check_size(idx("x_bytes", i), c.x_bytes[i]);
  check_time("loss_ms", c.loss_ms);
  check_size("loss_tmp_bytes", c.loss_tmp_bytes);
  // The solver adds times in float; a schedule recomputes each forward at most L times.
  if (no_checkpoint_makespan_ms(c) * (L + 1) > 1e30) {
    throw InputError("chain: the times add up to " + number_text(no_checkpoint_makespan_ms(c)) +
                     " ms, too large to plan");
  }
  for (size_t i = 0; i < n; ++i) {
    if (c.xbar_bytes[i] < c.x_bytes[i + 1]) {
      throw InputError("chain: xbar_bytes[" + std::to_string(i) +
                       "] = " + std::to_string(c.xbar_bytes[i]) + " is smaller than x_bytes[" +
                       std::to_string(i + 1) + "] = " + std::to_string(c.x_bytes[i + 1]) +
                       " (x̄ includes the stage's output)");
    }
  }
  // Every live set plus one transient is bounded by this sum (each of x_i, x̄_i, δ_i is live at
  // most once), so no sum the simulator or the solver forms can overflow.
  int64_t total = 0;
  const char* what = "the total size of the chain's buffers";
  for (int64_t v : c.x_bytes) total = checked_add(total, checked_mul(v, 2, what), what);
  for (int64_t v : c.xbar_bytes) total = checked_add(total, v, what);
  for (int64_t v : c.fwd_tmp_bytes) total = checked_add(total, v, what);
  for (int64_t v : c.bwd_tmp_bytes) total = checked_add(total, v, what);
  total = checked_add(total, c.loss_tmp_bytes, what);
  (void)total;
}

Chain chain_from_json(const nlohmann::json& object) {
    const Json* o = &object;
    Chain c;
    c.fwd_ms = time_array(*o, "fwd_ms");
    c.bwd_ms = time_array(*o, "bwd_ms");
    c.x_bytes = size_array(*o, "x_bytes");
    c.xbar_bytes = size_array(*o, "xbar_bytes");
    c.fwd_tmp_bytes = size_array(*o, "fwd_tmp_bytes");
    c.bwd_tmp_bytes = size_array(*o, "bwd_tmp_bytes");
    c.loss_ms = read_time(field(*o, "loss_ms"), "loss_ms");
    c.loss_tmp_bytes = read_size(field(*o, "loss_tmp_bytes"), "loss_tmp_bytes");
    validate_chain(c);
    return c;
}

Result<Chain> parse_chain_json(std::string_view text, const std::string& source) {
  return capture_input_errors([&]() -> Chain {
    Json doc = parse_json_input(text, source);
    if (!doc.is_object())
      throw InputError(source + ": expected a JSON object, got " + std::string(doc.type_name()));
    const Json* o = &doc;
    if (!doc.contains("fwd_ms") && doc.contains("chain") && doc["chain"].is_object())
      o = &doc["chain"];
    return chain_from_json(*o);
  });
}

Result<Chain> load_chain_file(const std::string& path) {
  Result<std::string> text = read_input_file(path, "chain file", kMaxJsonFileBytes);
  if (!text.ok()) return Result<Chain>::failure(text.error());
  return parse_chain_json(text.value(), path);
}

std::string chain_json(const Chain& c) {
  nlohmann::ordered_json j;
  j["fwd_ms"] = c.fwd_ms;
  j["bwd_ms"] = c.bwd_ms;
  j["x_bytes"] = c.x_bytes;
  j["xbar_bytes"] = c.xbar_bytes;
  j["fwd_tmp_bytes"] = c.fwd_tmp_bytes;
  j["bwd_tmp_bytes"] = c.bwd_tmp_bytes;
  j["loss_ms"] = c.loss_ms;
  j["loss_tmp_bytes"] = c.loss_tmp_bytes;
  return j.dump(2);
}

double no_checkpoint_makespan_ms(const Chain& c) {
  double total = 0;
  for (double f : c.fwd_ms) total += f;
  for (double b : c.bwd_ms) total += b;
  return total + c.loss_ms;
}

std::string op_token(ChainOp op) {
  switch (op.kind) {
    case ChainOpKind::Fck:
      return "Fck" + std::to_string(op.stage);
    case ChainOpKind::Fn:
      return "Fn" + std::to_string(op.stage);
    case ChainOpKind::Fall:
      return "Fall" + std::to_string(op.stage);
    case ChainOpKind::Loss:
      return "Loss";
    case ChainOpKind::B:
      return "B" + std::to_string(op.stage);
  }
  HEADROOM_CHECK(false, "unknown chain op kind");
}

ChainOp parse_op_token(std::string_view token) {
  if (token == "Loss") return {ChainOpKind::Loss, 0};
  struct Prefix {
    std::string_view text;
    ChainOpKind kind;
  };
  static constexpr Prefix kPrefixes[] = {{"Fck", ChainOpKind::Fck},
                                         {"Fn", ChainOpKind::Fn},
                                         {"Fall", ChainOpKind::Fall},
                                         {"B", ChainOpKind::B}};
  for (const Prefix& p : kPrefixes) {
    if (!token.starts_with(p.text)) continue;
    std::string_view digits = token.substr(p.text.size());
    if (digits.empty() || digits.size() > 9 || (digits.size() > 1 && digits[0] == '0')) break;
    int stage = 0;
    bool ok = true;
    for (char ch : digits) {
      if (ch < '0' || ch > '9')
        ok = false;
      else
        stage = stage * 10 + (ch - '0');
    }
    if (!ok) break;
    return {p.kind, stage};
  }
  throw InputError("schedule: unknown operation '" + std::string(token) +
                   "' (expected Fck<i>, Fn<i>, Fall<i>, Loss or B<i>)");
}

}  // namespace headroom
