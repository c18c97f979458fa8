// libFuzzer target for graph JSON (plan --graph FILE), every form that option reads: a chain file
// without "preds" and a graph with "preds", at the top level or under "graph", and Checkmate's
// training-graph form (--memory-model checkmate: "T", "edges", "cost", "size_bytes", "kind").
// Any bytes parse into a validated graph of each reader or fail with one line; a graph that
// parses round-trips through its JSON. (The integer programs themselves are not run here: one
// solve takes far longer than a fuzz iteration.)
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_util.h"
#include "plan/checkmate_graph.h"
#include "plan/remat_graph.h"

namespace {

void checkmate_form(std::string_view text) {
  headroom::Result<headroom::CheckmateGraph> g = headroom::parse_checkmate_graph_json(text, "fuzz.json");
  if (!g.ok()) {
    headroom::fuzz::require_one_line(g.error());
    return;
  }
  headroom::Result<headroom::CheckmateGraph> again =
      headroom::parse_checkmate_graph_json(headroom::checkmate_graph_json(g.value()));
  if (!again.ok() || again.value().edges != g.value().edges || again.value().size_bytes != g.value().size_bytes) {
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  checkmate_form(text);
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
