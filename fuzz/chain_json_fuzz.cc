// libFuzzer target for chain JSON (plan --chain FILE): any bytes parse into a validated Chain or
// fail with one line, never crash, hang or leak. A small chain that parses is also solved (the
// discretization and the dynamic program read every field), and its JSON round-trips.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_util.h"
#include "plan/chain_dp.h"
#include "plan/chain_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  headroom::Result<headroom::Chain> c = headroom::parse_chain_json(text, "fuzz.json");
  if (!c.ok()) {
    headroom::fuzz::require_one_line(c.error());
    return 0;
  }
  headroom::Result<headroom::Chain> again = headroom::parse_chain_json(headroom::chain_json(c.value()));
  if (!again.ok()) __builtin_trap();  // what headroom writes, it reads
  if (c.value().length() <= 12) {
    // A budget from the input's own sizes, so that feasible and infeasible budgets both occur.
    const int64_t x0 = c.value().x_bytes[0];  // at most a quarter of int64 (validate_chain)
    int64_t budget = x0 + x0 / 2 + static_cast<int64_t>(size);
    headroom::Result<headroom::ChainPlan> p = headroom::solve_chain(c.value(), budget, 40);
    if (!p.ok()) headroom::fuzz::require_one_line(p.error());
  }
  return 0;
}
