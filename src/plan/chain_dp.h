// The optimal persistent checkpointing schedule of a chain under a memory budget: Rotor's dynamic
// program over (segment, memory slots), with every memory test of the chain model's accounting
// (docs/chain-solver.md has the recurrence, its derivation, and how it compares with Rotor).
//
// Pipeline of solve_chain:
//   1. discretize: unit u = floor(budget / slots), every size -> ceil(size / u) slots;
//   2. solve_chain_dp: the table C(s, t, m) for all segments and all m <= slots - x_0;
//   3. reconstruct the schedule of C(0, L, slots - x_0) as operation tokens;
//   4. re-run the schedule in the independent simulator (chain_simulate.h), in slots and in
//      bytes: its peak must fit, its makespan must be the table's value (float table: up to
//      rounding; the plan reports the schedule's own sum).
// The table fill runs on up to 4 threads for large chains; the result does not depend on it.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "plan/chain_model.h"
#include "util/error.h"

namespace headroom {

inline constexpr int kDefaultChainSlots = 500;  // Rotor's default
// The solver table holds one float per (segment, memory slot); larger problems are refused.
inline constexpr int64_t kMaxChainTableBytes = int64_t{4} << 30;

// The chain with every size in slots of unit_bytes: ceil(v / unit_bytes) (0 stays 0). Times are
// unchanged. REQUIRES: unit_bytes >= 1, chain valid.
Chain discretize_chain(const Chain& chain, int64_t unit_bytes);

// The optimum of the dynamic program on a chain whose sizes are slots, with `memory` slots for
// the whole run (x_0 included).
struct ChainDpResult {
  bool feasible = false;
  bool timed_out = false;         // the deadline passed before the table was complete
  double makespan_ms = 0;         // the table's value (float arithmetic); 0 when infeasible
  std::vector<ChainOp> schedule;  // empty when infeasible
};
// max_threads: 0 picks (one thread for small tables, else up to 4, one per hardware thread);
// the result is the same, bit for bit, for every thread count. With a deadline, the fill checks
// the clock before each row of each block and gives up (timed_out, not feasible) once it has
// passed: the callers that race a time limit (plan --graph's first incumbent) then go on without.
using Deadline = std::optional<std::chrono::steady_clock::time_point>;
// REQUIRES: slot_chain valid, memory >= 0, the table within kMaxChainTableBytes
// (chain_dp_table_bytes).
ChainDpResult solve_chain_dp(const Chain& slot_chain, int memory, int max_threads = 0,
                             const Deadline& deadline = std::nullopt);
int64_t chain_dp_table_bytes(int stages, int memory);

struct ChainPlan {
  bool feasible = false;
  int64_t budget_bytes = 0;
  int slots = 0;
  int64_t unit_bytes = 0;                // floor(budget / slots)
  double makespan_ms = 0;                // of the schedule; 0 when infeasible
  double no_checkpoint_makespan_ms = 0;  // Σ f + Σ b + ℓ
  int64_t peak_bytes = 0;             // the schedule's peak in bytes (simulator); 0 when infeasible
  int64_t store_all_bytes = 0;        // M_all: peak of storing everything, in bytes
  std::vector<std::string> schedule;  // tokens: "Fck0", "Fn1", "Fall2", "Loss", "B2"
};

// InputError (as a failed Result) for an invalid chain, a negative budget, slots < 1, a budget
// below `slots` bytes (a zero unit), or a table past kMaxChainTableBytes. An infeasible budget
// is a plan with feasible = false.
Result<ChainPlan> solve_chain(const Chain& chain, int64_t budget_bytes,
                              int slots = kDefaultChainSlots);

// {"feasible", "budget_bytes", "slots", "makespan_ms", "no_checkpoint_makespan_ms", "peak_bytes",
//  "schedule"}; makespan_ms and peak_bytes are null when infeasible.
std::string chain_plan_json(const ChainPlan& plan);
// A few lines for people: the verdict, makespan and overhead, peak against budget, the schedule.
std::string chain_plan_text(const ChainPlan& plan);

}  // namespace headroom
