// An independent executor of graph schedules (docs/ilp.md, "Accounting"): it runs a token list
// under the memory accounting of the graph model and returns the peak and the makespan, or the
// first op that is not allowed. It shares nothing with the integer program but the graph, so
// every schedule the solver decodes is checked against it. It is also the chain model's simulator:
// chain_simulate.h lowers a chain to the graph with preds[i] = {i} and its five ops to the ones
// below of the same name, and on that graph these rules are the chain rules of
// docs/chain-solver.md (the Rotor dynamic program's schedules are re-run here).
//
// Rules (one live copy of each activation; "a_k" is x_k or x̄_k, whichever is live):
//   Fck_i   needs every a_k, k in preds[i]; adds x_{i+1}        in use: live + x_{i+1} + ftmp_i
//   Fn_i    as Fck_i, then frees every input                      in use: live + x_{i+1} + ftmp_i
//   Fall_i  as Fck_i but adds x̄_{i+1}                            in use: live + x̄_{i+1} + ftmp_i
//   Free_k  needs a_k; frees it                                   (no op memory, no time)
//   Loss    needs a_L; adds δ_L, frees a plain x_L                in use: live + x_L + ltmp
//   B_i     needs δ_{i+1}, x̄_{i+1}, every input a_k; adds δ_k for each input whose gradient is
//           not live yet (accumulates into the others); frees δ_{i+1}, x̄_{i+1}, and a plain input
//           x_k when i is the last stage to read a_k (the smallest consumer)
//                                    in use: live + Σ x_k over the new δ_k + btmp_i
// Invalid: an input not live, a forward whose output a_{i+1} is live in either form, Free of an
// activation not live, the loss other than once before every backward, backwards out of the order
// B_{L-1} ... B_0, an index out of range, and a schedule that does not end with only δ_0 live.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/remat_graph.h"
#include "util/error.h"

namespace headroom {

struct RematState {
  std::vector<uint8_t> plain, bar, delta;  // x_k, x̄_k, δ_k live, k = 0..L
  int next_backward = 0;                   // L: the loss is next; i < L: B_i; -1: done
  int64_t live = 0;

  static RematState initial(const RematGraph& graph);  // only x_0
  bool has(int k) const { return plain[static_cast<size_t>(k)] || bar[static_cast<size_t>(k)]; }
};

// Applies op when it is allowed ("" and *in_use, *time_ms set; Free sets both to 0), otherwise
// returns why and leaves the state unchanged.
std::string apply_remat_op(const RematGraph& graph, const std::vector<std::vector<int>>& consumers,
                           RematOp op, RematState& state, int64_t* in_use, double* time_ms);
std::string check_remat_finished(const RematGraph& graph, const RematState& state);

struct RematSimResult {
  int64_t peak = 0;        // max over ops (Free excluded) of the memory in use during the op
  int peak_op = 0;         // index of the first op reaching it
  double makespan_ms = 0;  // sum of the op times
  int forwards = 0;        // forward ops executed
};

Result<RematSimResult> simulate_remat(const RematGraph& graph, const std::vector<RematOp>& schedule);
Result<RematSimResult> simulate_remat(const RematGraph& graph,
                                      const std::vector<std::string>& schedule);

// Fall_0 ... Fall_{L-1}, Loss, B_{L-1} ... B_0 and its peak (M_all).
std::vector<RematOp> remat_store_all_schedule(int stages);
int64_t remat_store_all_peak(const RematGraph& graph);

}  // namespace headroom
