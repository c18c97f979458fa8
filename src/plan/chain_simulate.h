// An independent executor of chain schedules: it runs a list of operations under the memory
// accounting of the chain model (docs/chain-solver.md, "Memory accounting") and returns the peak
// and the makespan, or the first op that is not allowed. It shares nothing with the solver but
// the Chain, so every schedule the solver emits is checked against it.
//
// Rules (one live copy of each buffer; "a_i" is x_i or x̄_i, whichever is live):
//   Fck_i  needs a_i, adds x_{i+1}                 in use: live + x_{i+1} + ftmp_i
//   Fn_i   needs a_i, adds x_{i+1}, frees x_i      in use: live + x_{i+1} + ftmp_i
//          (or x̄_i when no plain x_i is live)
//   Fall_i needs a_i, adds x̄_{i+1}                 in use: live + x̄_{i+1} + ftmp_i
//   Loss   needs a_L, adds δ_L, frees a plain x_L  in use: live + x_L + ltmp
//   B_i    needs δ_{i+1}, x̄_{i+1}, a_i; adds δ_i;  in use: live + x_i + btmp_i
//          frees δ_{i+1}, x̄_{i+1}, a plain x_i
// Invalid: an op whose input is not live, a forward whose output activation a_{i+1} is already
// live (in either form), Loss other than once before every backward, backwards out of the order
// B_{L-1} ... B_0, a stage index out of range, and a schedule that does not end with only δ_0
// live. Sizes are whatever unit the Chain holds (bytes, or slots for a discretized chain).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/chain_model.h"
#include "util/error.h"

namespace headroom {

// The buffers live between two ops.
struct ChainState {
  std::vector<uint8_t> plain;  // x_i live, i = 0..L
  std::vector<uint8_t> bar;    // x̄_i live, i = 0..L (index 0 unused)
  int delta = -1;              // i of the one live gradient δ_i, -1: none
  int next_backward = 0;       // L: Loss comes next; i < L: B_i comes next; -1: all done
  int64_t live = 0;            // total size of the live buffers

  // Before the first op: only x_0.
  static ChainState initial(const Chain& chain);
  bool has_activation(int i) const {
    return plain[static_cast<size_t>(i)] || bar[static_cast<size_t>(i)];
  }
};

// Applies op to state when the op is allowed there, setting *in_use (memory during the op) and
// *time_ms; otherwise returns why and leaves state unchanged. "" means applied.
std::string apply_chain_op(const Chain& chain, ChainOp op, ChainState& state, int64_t* in_use,
                           double* time_ms);
// "" when state is the end of a complete schedule (every backward done, only δ_0 live).
std::string check_finished(const Chain& chain, const ChainState& state);

struct ChainSimResult {
  int64_t peak = 0;        // max over ops of the memory in use during the op
  int peak_op = 0;         // index of the first op reaching it
  double makespan_ms = 0;  // sum of the op times
  int forwards = 0;        // forward ops executed (L of them are not recomputations)
};

Result<ChainSimResult> simulate_chain(const Chain& chain, const std::vector<ChainOp>& schedule);
Result<ChainSimResult> simulate_chain(const Chain& chain, const std::vector<std::string>& schedule);

// Fall_0 ... Fall_{L-1}, Loss, B_{L-1} ... B_0: nothing is recomputed.
std::vector<ChainOp> store_all_schedule(int stages);
// M_all: the peak of store_all_schedule.
int64_t store_all_peak(const Chain& chain);

}  // namespace headroom
