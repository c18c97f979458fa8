// Checkmate's graph file and the accounting of its MILP (checkmate_graph.h).
#include "plan/checkmate_graph.h"
#include "util/index.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "util/file.h"
#include "util/json_input.h"

namespace headroom {
namespace {

using Json = nlohmann::json;


// A whole number in [0, hi], or InputError naming the field.
int64_t whole(const Json& v, const std::string& what, int64_t hi) {
  if (!v.is_number()) throw InputError("graph: " + what + " is " + json_value_text(v) + ", not a number");
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() ? v.get<uint64_t>() > static_cast<uint64_t>(hi) : v.get<int64_t>() > hi)
      throw InputError("graph: " + what + " is " + json_value_text(v) + ", more than " + std::to_string(hi));
    if (!v.is_number_unsigned() && v.get<int64_t>() < 0)
      throw InputError("graph: " + what + " is " + json_value_text(v) + ", it cannot be negative");
    return v.is_number_unsigned() ? static_cast<int64_t>(v.get<uint64_t>()) : v.get<int64_t>();
  }
  const double d = v.get<double>();
  if (!std::isfinite(d) || d != std::floor(d))
    throw InputError("graph: " + what + " is " + json_value_text(v) + ", not a whole number");
  if (d < 0) throw InputError("graph: " + what + " is " + json_value_text(v) + ", it cannot be negative");
  if (d > static_cast<double>(hi))
    throw InputError("graph: " + what + " is " + json_value_text(v) + ", more than " + std::to_string(hi));
  return static_cast<int64_t>(d);
}

const Json& field(const Json& o, const char* name) {
  auto it = o.find(name);
  if (it == o.end()) throw InputError(std::string("graph: missing field \"") + name + "\"");
  return *it;
}

const Json& array_of(const Json& o, const char* name, size_t n) {
  const Json& a = field(o, name);
  if (!a.is_array()) throw InputError(std::string("graph: ") + name + " is " + json_value_text(a) + ", not an array");
  if (a.size() != n)
    throw InputError(std::string("graph: ") + name + " has " + std::to_string(a.size()) + " entries, T = " +
                     std::to_string(n) + " needs one per node");
  return a;
}

// Costs are summed in double by the programs: at most 2^40 each keeps sums of T^2 of them exact.
constexpr int64_t kMaxCost = int64_t{1} << 40;
// Sizes: at most 2^50 bytes each (a PiB), so that T of them held at once cannot overflow.
constexpr int64_t kMaxSize = int64_t{1} << 50;

CheckmateGraph from_json(const Json& top) {
  const Json* o = &top;
  if (o->is_object() && o->contains("graph") && !o->contains("T")) o = &(*o)["graph"];
  if (!o->is_object()) throw InputError("graph: the file is " + json_value_text(*o) + ", not a JSON object");
  CheckmateGraph g;
  g.T = static_cast<int>(whole(field(*o, "T"), "T", kMaxCheckmateNodes));
  const size_t n = at(g.T);
  const Json& edges = field(*o, "edges");
  if (!edges.is_array()) throw InputError("graph: edges is " + json_value_text(edges) + ", not an array");
  if (edges.size() > at(kMaxCheckmateEdges))
    throw InputError("graph: edges has " + std::to_string(edges.size()) + " entries, more than " +
                     std::to_string(kMaxCheckmateEdges));
  for (size_t e = 0; e < edges.size(); ++e) {
    const Json& p = edges[e];
    const std::string where = "edges[" + std::to_string(e) + "]";
    if (!p.is_array() || p.size() != 2)
      throw InputError("graph: " + where + " is " + json_value_text(p) + ", not a pair [u, v]");
    const int u = static_cast<int>(whole(p[0], where + "[0]", kMaxCheckmateNodes));
    const int v = static_cast<int>(whole(p[1], where + "[1]", kMaxCheckmateNodes));
    g.edges.emplace_back(u, v);
  }
  const Json& cost = array_of(*o, "cost", n);
  const Json& size = array_of(*o, "size_bytes", n);
  const Json& kind = array_of(*o, "kind", n);
  for (size_t i = 0; i < n; ++i) {
    g.cost.push_back(whole(cost[i], "cost[" + std::to_string(i) + "]", kMaxCost));
    g.size_bytes.push_back(whole(size[i], "size_bytes[" + std::to_string(i) + "]", kMaxSize));
    const Json& k = kind[i];
    const std::string s = k.is_string() ? k.get<std::string>() : std::string();
    if (s == "fwd") g.kind.push_back(CheckmateNodeKind::Forward);
    else if (s == "loss") g.kind.push_back(CheckmateNodeKind::Loss);
    else if (s == "bwd") g.kind.push_back(CheckmateNodeKind::Backward);
    else
      throw InputError("graph: kind[" + std::to_string(i) + "] is " + json_value_text(k) +
                       ", not \"fwd\", \"loss\" or \"bwd\"");
  }
  validate_checkmate_graph(g);
  return g;
}

}  // namespace

void validate_checkmate_graph(CheckmateGraph& g) {
  if (g.T < 1 || g.T > kMaxCheckmateNodes)
    throw InputError("graph: T is " + std::to_string(g.T) + ", a graph has 1.." +
                     std::to_string(kMaxCheckmateNodes) + " nodes");
  const size_t n = at(g.T);
  if (g.cost.size() != n || g.size_bytes.size() != n || g.kind.size() != n)
    throw InputError("graph: cost, size_bytes and kind need one entry per node (T = " + std::to_string(g.T) + ")");
  if (g.edges.size() > at(kMaxCheckmateEdges))
    throw InputError("graph: more than " + std::to_string(kMaxCheckmateEdges) + " edges");
  std::set<std::pair<int, int>> seen;
  for (size_t e = 0; e < g.edges.size(); ++e) {
    const auto [u, v] = g.edges[e];
    const std::string where = "graph: edges[" + std::to_string(e) + "] = [" + std::to_string(u) + ", " +
                              std::to_string(v) + "]";
    if (u < 0 || v < 0 || u >= g.T || v >= g.T)
      throw InputError(where + " names a node outside 0.." + std::to_string(g.T - 1));
    if (u >= v)
      throw InputError(where + " does not go forward: nodes are in topological order, so u < v");
    if (!seen.insert({u, v}).second) throw InputError(where + " is repeated");
  }
  int losses = 0;
  for (size_t i = 0; i < n; ++i) {
    if (g.cost[i] < 0 || g.cost[i] > kMaxCost)
      throw InputError("graph: cost[" + std::to_string(i) + "] is " + std::to_string(g.cost[i]) +
                       ", outside 0.." + std::to_string(kMaxCost));
    if (g.size_bytes[i] < 0 || g.size_bytes[i] > kMaxSize)
      throw InputError("graph: size_bytes[" + std::to_string(i) + "] is " + std::to_string(g.size_bytes[i]) +
                       ", outside 0.." + std::to_string(kMaxSize));
    if (g.kind[i] == CheckmateNodeKind::Loss) ++losses;
  }
  if (losses > 1) throw InputError("graph: kind has " + std::to_string(losses) + " \"loss\" nodes, at most one");
  g.in_edges.assign(n, {});
  g.successors.assign(n, {});
  for (size_t e = 0; e < g.edges.size(); ++e) {
    const auto [u, v] = g.edges[e];
    g.in_edges[at(v)].push_back(static_cast<int>(e));
    g.successors[at(u)].push_back(v);
  }
  for (auto& s : g.successors) std::sort(s.begin(), s.end());
  // Within in_edges[v], order by u so that the frees after v are summed in a fixed order.
  for (auto& in : g.in_edges)
    std::sort(in.begin(), in.end(), [&](int a, int b) { return g.edges[at(a)].first < g.edges[at(b)].first; });
}

Result<CheckmateGraph> parse_checkmate_graph_json(std::string_view text, const std::string& source) {
  return capture_input_errors([&]() -> CheckmateGraph {
    const Json doc = parse_json_input(text, source);
    return from_json(doc);
  });
}

Result<CheckmateGraph> load_checkmate_graph_file(const std::string& path) {
  Result<std::string> text = read_input_file(path, "graph file", kMaxJsonFileBytes);
  if (!text.ok()) return Result<CheckmateGraph>::failure(text.error());
  return parse_checkmate_graph_json(text.value(), path);
}

std::string checkmate_graph_json(const CheckmateGraph& g) {
  nlohmann::ordered_json j;
  j["T"] = g.T;
  j["edges"] = nlohmann::ordered_json::array();
  for (auto [u, v] : g.edges) j["edges"].push_back({u, v});
  j["cost"] = g.cost;
  j["size_bytes"] = g.size_bytes;
  j["kind"] = nlohmann::ordered_json::array();
  for (CheckmateNodeKind k : g.kind)
    j["kind"].push_back(k == CheckmateNodeKind::Forward ? "fwd" : k == CheckmateNodeKind::Loss ? "loss" : "bwd");
  return j.dump() + "\n";
}

int64_t checkmate_stage_peak(const CheckmateGraph& g, int t, const std::vector<uint8_t>& computed,
                             const std::vector<uint8_t>& held, const std::vector<uint8_t>& held_next) {
  int64_t u = 0;
  for (int i = 0; i < g.T; ++i)
    if (held[at(i)]) u += g.size_bytes[at(i)];
  int64_t peak = 0;
  // Only nodes up to t can be computed in stage t; after t, U only falls (frees need a computed k).
  for (int k = 0; k <= t; ++k) {
    if (computed[at(k)]) u += g.size_bytes[at(k)];
    peak = std::max(peak, u);  // U[t][k]
    if (!computed[at(k)]) continue;
    for (int e : g.in_edges[at(k)]) {
      const int i = g.edges[at(e)].first;
      if (held_next[at(i)]) continue;  // hazard: kept into the next stage
      bool later = false;              // hazard: a later successor of i computed in this stage
      for (int j : g.successors[at(i)])
        if (j > k && j <= t && computed[at(j)]) later = true;
      if (!later) u -= g.size_bytes[at(i)];
    }
  }
  return std::max(peak, u);
}

CheckmateEvaluation checkmate_evaluate(const CheckmateGraph& g, const CheckmateSchedule& s) {
  CheckmateEvaluation out;
  const size_t n = at(g.T);
  if (s.R.size() != n || s.S.size() != n) {
    out.invalid = "R and S need T rows";
    return out;
  }
  const std::vector<uint8_t> none(n, 0);
  for (int t = 0; t < g.T; ++t) {
    const auto& r = s.R[at(t)];
    const auto& h = s.S[at(t)];
    const auto& next = t + 1 < g.T ? s.S[at(t) + 1] : none;
    const std::string st = "stage " + std::to_string(t);
    if (r.size() != n || h.size() != n) {
      out.invalid = st + ": R and S need T columns";
      return out;
    }
    if (!r[at(t)]) {
      out.invalid = st + " does not compute node " + std::to_string(t);
      return out;
    }
    for (int i = 0; i < g.T; ++i) {
      if (i > t && r[at(i)]) out.invalid = st + " computes node " + std::to_string(i) + ", later than its own";
      if (i >= t && h[at(i)]) out.invalid = st + " holds node " + std::to_string(i) + ", not computed yet";
      if (next[at(i)] && !h[at(i)] && !r[at(i)])
        out.invalid = "stage " + std::to_string(t + 1) + " holds node " + std::to_string(i) +
                      ", neither held nor computed in stage " + std::to_string(t);
      if (!out.invalid.empty()) return out;
      if (r[at(i)]) out.cost += g.cost[at(i)];
    }
    for (auto [u, v] : g.edges) {
      if (r[at(v)] && !r[at(u)] && !h[at(u)]) {
        out.invalid = st + " computes node " + std::to_string(v) + " without its input " + std::to_string(u);
        return out;
      }
    }
    out.peak_bytes = std::max(out.peak_bytes, checkmate_stage_peak(g, t, r, h, next));
  }
  return out;
}

CheckmateSchedule checkmate_store_all(const CheckmateGraph& g) {
  const size_t n = at(g.T);
  CheckmateSchedule s{CheckmateMatrix(n, std::vector<uint8_t>(n, 0)), CheckmateMatrix(n, std::vector<uint8_t>(n, 0))};
  for (int t = 0; t < g.T; ++t) {
    s.R[at(t)][at(t)] = 1;
    for (int i = 0; i < t; ++i)
      if (!g.successors[at(i)].empty() && g.successors[at(i)].back() >= t) s.S[at(t)][at(i)] = 1;
  }
  return s;
}

}  // namespace headroom
