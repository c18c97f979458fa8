// The graph model: validation, the JSON file (a chain file plus "preds"), and the op tokens.
#include "plan/remat_graph.h"

#include <nlohmann/json.hpp>

#include "util/file.h"
#include "util/json_input.h"

namespace headroom {
namespace {

using Json = nlohmann::json;

// The chain loader names problems "chain: ..."; in a graph file they are the graph's.
std::string as_graph_error(const std::string& message) {
  const std::string prefix = "chain: ";
  if (message.rfind(prefix, 0) == 0) return "graph: " + message.substr(prefix.size());
  return message;
}

}  // namespace

void validate_remat_graph(const RematGraph& g) {
  try {
    validate_chain(g.sizes);
  } catch (const InputError& e) {
    throw InputError(as_graph_error(e.what()));
  }
  const int L = g.length();
  if (static_cast<int>(g.preds.size()) != L) {
    throw InputError("graph: preds has " + std::to_string(g.preds.size()) +
                     " entries, a graph of " + std::to_string(L) +
                     " stages needs " + std::to_string(L) + " (one per stage)");
  }
  std::vector<uint8_t> read(static_cast<size_t>(L) + 1, 0);
  for (int i = 0; i < L; ++i) {
    const std::vector<int>& p = g.preds[static_cast<size_t>(i)];
    const std::string where = "graph: preds[" + std::to_string(i) + "]";
    if (p.empty()) throw InputError(where + " is empty, every stage reads at least one activation");
    for (size_t n = 0; n < p.size(); ++n) {
      if (p[n] < 0 || p[n] > i) {
        throw InputError(where + " holds " + std::to_string(p[n]) + ", stage " +
                         std::to_string(i) + " can read activations 0.." + std::to_string(i) +
                         " only (a_0 is the input, a_{j+1} the output of stage j)");
      }
      if (n > 0 && p[n] <= p[n - 1])
        throw InputError(where + " must be strictly increasing (no repeated activation)");
      read[static_cast<size_t>(p[n])] = 1;
    }
  }
  for (int k = 0; k < L; ++k) {
    if (!read[static_cast<size_t>(k)]) {
      throw InputError("graph: preds: no stage reads activation " + std::to_string(k) +
                       (k == 0 ? " (the input)" : " (the output of stage " + std::to_string(k - 1) + ")") +
                       ", every activation but the last must reach the loss");
    }
  }
}

RematGraph graph_of_chain(const Chain& chain) {
  RematGraph g{chain, {}};
  for (int i = 0; i < chain.length(); ++i) g.preds.push_back({i});
  return g;
}

Result<RematGraph> make_remat_graph(std::vector<double> fwd_ms, std::vector<double> bwd_ms,
                                    std::vector<int64_t> x_bytes, std::vector<int64_t> xbar_bytes,
                                    std::vector<int64_t> fwd_tmp_bytes,
                                    std::vector<int64_t> bwd_tmp_bytes, double loss_ms,
                                    int64_t loss_tmp_bytes, std::vector<std::vector<int>> preds) {
  return capture_input_errors([&]() -> RematGraph {
    RematGraph g;
    g.sizes.fwd_ms = std::move(fwd_ms);
    g.sizes.bwd_ms = std::move(bwd_ms);
    g.sizes.x_bytes = std::move(x_bytes);
    g.sizes.xbar_bytes = std::move(xbar_bytes);
    g.sizes.fwd_tmp_bytes = std::move(fwd_tmp_bytes);
    g.sizes.bwd_tmp_bytes = std::move(bwd_tmp_bytes);
    g.sizes.loss_ms = loss_ms;
    g.sizes.loss_tmp_bytes = loss_tmp_bytes;
    g.preds = std::move(preds);
    validate_remat_graph(g);
    return g;
  });
}

Result<RematGraph> parse_remat_graph_json(std::string_view text, const std::string& source) {
  return capture_input_errors([&]() -> RematGraph {
    Json doc = parse_json_input(text, source);
    if (!doc.is_object())
      throw InputError(source + ": expected a JSON object, got " + std::string(doc.type_name()));
    const Json* o = &doc;
    if (!doc.contains("fwd_ms") && doc.contains("graph") && doc["graph"].is_object())
      o = &doc["graph"];
    // The chain fields, read (and checked) by the chain loader.
    Result<Chain> c = capture_input_errors([&] { return chain_from_json(*o); });
    if (!c.ok()) throw InputError(as_graph_error(c.error()));
    RematGraph g{c.value(), {}};
    auto it = o->find("preds");
    if (it == o->end()) {
      g = graph_of_chain(c.value());
    } else {
      if (!it->is_array())
        throw InputError("graph: 'preds' must be an array, got " + std::string(it->type_name()));
      for (size_t i = 0; i < it->size(); ++i) {
        const Json& p = (*it)[i];
        const std::string where = "graph: preds[" + std::to_string(i) + "]";
        if (!p.is_array())
          throw InputError(where + " must be an array of activation indices, got " + json_value_text(p));
        std::vector<int> list;
        for (const Json& v : p) {
          if (!v.is_number_integer() || v.get<int64_t>() < -1'000'000'000 ||
              v.get<int64_t>() > 1'000'000'000)
            throw InputError(where + " holds " + json_value_text(v) + ", not an activation index");
          list.push_back(static_cast<int>(v.get<int64_t>()));
        }
        g.preds.push_back(std::move(list));
      }
    }
    validate_remat_graph(g);
    return g;
  });
}

Result<RematGraph> load_remat_graph_file(const std::string& path) {
  Result<std::string> text = read_input_file(path, "graph file", kMaxJsonFileBytes);
  if (!text.ok()) return Result<RematGraph>::failure(text.error());
  return parse_remat_graph_json(text.value(), path);
}

std::string remat_graph_json(const RematGraph& g) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(chain_json(g.sizes));
  j["preds"] = g.preds;
  return j.dump(2);
}

std::vector<std::vector<int>> remat_consumers(const RematGraph& g) {
  std::vector<std::vector<int>> out(static_cast<size_t>(g.length()));
  for (int i = 0; i < g.length(); ++i)
    for (int k : g.preds[static_cast<size_t>(i)]) out[static_cast<size_t>(k)].push_back(i);
  return out;
}

std::string remat_op_token(RematOp op) {
  const std::string n = std::to_string(op.index);
  switch (op.kind) {
    case RematOpKind::Fck: return "Fck" + n;
    case RematOpKind::Fn: return "Fn" + n;
    case RematOpKind::Fall: return "Fall" + n;
    case RematOpKind::Free: return "Free" + n;
    case RematOpKind::Loss: return "Loss";
    case RematOpKind::B: return "B" + n;
  }
  HEADROOM_CHECK(false, "unknown remat op kind");
}

RematOp parse_remat_op_token(std::string_view token) {
  if (token == "Loss") return {RematOpKind::Loss, 0};
  struct Prefix {
    std::string_view text;
    RematOpKind kind;
  };
  // "Free" before "Fn"/"Fck"/"Fall" would not matter (no prefix of another), but keep it explicit.
  static constexpr Prefix kPrefixes[] = {{"Fck", RematOpKind::Fck},   {"Fn", RematOpKind::Fn},
                                         {"Fall", RematOpKind::Fall}, {"Free", RematOpKind::Free},
                                         {"B", RematOpKind::B}};
  for (const Prefix& p : kPrefixes) {
    if (!token.starts_with(p.text)) continue;
    std::string_view digits = token.substr(p.text.size());
    if (digits.empty() || digits.size() > 9 || (digits.size() > 1 && digits[0] == '0')) continue;
    int index = 0;
    bool ok = true;
    for (char ch : digits) {
      if (ch < '0' || ch > '9') ok = false;
      else index = index * 10 + (ch - '0');
    }
    if (ok) return {p.kind, index};
  }
  throw InputError("schedule: unknown operation '" + std::string(token) +
                   "' (expected Fck<i>, Fn<i>, Fall<i>, Free<k>, Loss or B<i>)");
}

}  // namespace headroom
