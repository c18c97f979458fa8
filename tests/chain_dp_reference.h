// The chain DP's table fill before issue #17 (tests/chain_dp_reference.cc): the oracle for the
// fast fill of src/plan/chain_dp.cc. Same contract as solve_chain_dp.
#pragma once

#include "plan/chain_dp.h"

namespace headroom::testing {

ChainDpResult reference_solve_chain_dp(const Chain& slot_chain, int memory, int max_threads = 0,
                                       const Deadline& deadline = std::nullopt);

}  // namespace headroom::testing
