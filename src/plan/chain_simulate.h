// Chain schedules on the one schedule simulator. A chain is the graph whose stage i reads only a_i
// (graph_of_chain, remat_graph.h), and each of the chain model's five ops (Fck, Fn, Fall, Loss,
// B; docs/chain-solver.md) is the graph op of the same name, so a chain schedule is lowered op by
// op and run by remat_simulate: there is no second accounting of the chain model. On that graph
// the graph rules are the chain rules (docs/ilp.md, "On a chain"): Fn frees its one input, B_i
// creates δ_i (i is a_i's only consumer) and frees δ_{i+1}, x̄_{i+1} and a plain x_i; memory
// during B_i is live + x_i + btmp_i.
//
// What the simulator rejects (an input not live, an activation computed while a copy is live, the
// loss other than once before every backward, backwards out of order, a stage out of range,
// buffers left over at the end) and the op in use memory are remat_simulate's. The lowering never
// produces Free, the one graph op the chain model does not have, and the token parser accepts only
// the chain's five. Sizes are whatever unit the Chain holds (bytes, or slots for a discretized
// chain).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/chain_model.h"
#include "plan/remat_simulate.h"
#include "util/error.h"

namespace headroom {

// The graph op a chain op is (same kind, same stage).
RematOp lower_chain_op(ChainOp op);
std::vector<RematOp> lower_chain_schedule(const std::vector<ChainOp>& schedule);

// peak, peak_op, makespan_ms and forwards of the schedule, as remat_simulate counts them.
using ChainSimResult = RematSimResult;

Result<ChainSimResult> simulate_chain(const Chain& chain, const std::vector<ChainOp>& schedule);
// The tokens of op_token ("Fck0", "Loss", ...); an unknown token is an error naming it.
Result<ChainSimResult> simulate_chain(const Chain& chain, const std::vector<std::string>& schedule);

// M_all: the peak of Fall_0 ... Fall_{L-1}, Loss, B_{L-1} ... B_0 (nothing recomputed).
int64_t store_all_peak(const Chain& chain);

}  // namespace headroom
