// libFuzzer target for graph JSON (plan --graph FILE), both forms: a chain file without "preds"
// and a graph with "preds", at the top level or under "graph". Any bytes parse into a validated
// RematGraph or fail with one line; a graph that parses round-trips through its JSON. (The
// integer program itself is not run here: one solve takes far longer than a fuzz iteration.)
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_util.h"
#include "plan/remat_graph.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  headroom::Result<headroom::RematGraph> g = headroom::parse_remat_graph_json(text, "fuzz.json");
  if (!g.ok()) {
    headroom::fuzz::require_one_line(g.error());
    return 0;
  }
  headroom::validate_remat_graph(g.value());
  headroom::Result<headroom::RematGraph> again =
      headroom::parse_remat_graph_json(headroom::remat_graph_json(g.value()));
  if (!again.ok() || again.value().preds != g.value().preds) __builtin_trap();
  return 0;
}
