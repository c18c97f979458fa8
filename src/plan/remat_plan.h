// A rematerialization plan for a graph under a byte budget: discretize into slots (as the chain
// solver does, docs/chain-solver.md), solve the integer program (remat_ilp.h), and re-run the
// decoded schedule in the independent simulator (remat_simulate.h) in slots and in bytes. A
// schedule that does not pass (invalid, over the slots, or a makespan other than the program's
// objective) is a HEADROOM_CHECK failure, never an answer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/remat_graph.h"
#include "plan/remat_ilp.h"
#include "util/error.h"

namespace headroom {

inline constexpr int kDefaultRematSlots = 500;

struct RematPlan {
  RematIlpStatus status = RematIlpStatus::NoSolution;
  int64_t budget_bytes = 0;
  int slots = 0;
  int64_t unit_bytes = 0;                // floor(budget / slots)
  double makespan_ms = 0;                // of the schedule (simulator); 0 without one
  double bound_ms = 0;                   // CBC's lower bound on the optimal makespan
  double gap_pct = 0;                    // 0 when optimal
  double no_checkpoint_makespan_ms = 0;  // Σ f + Σ b + ℓ
  int64_t peak_bytes = 0;                // the schedule's peak in bytes; 0 without one
  int64_t store_all_bytes = 0;           // M_all: the peak of storing everything
  double time_limit_s = 0;
  bool persistent = false;
  std::vector<std::string> schedule;     // tokens (remat_graph.h)
  int variables = 0, constraints = 0;
  double solve_seconds = 0;              // not printed: the output stays deterministic
  double start_ms = 0;                   // the first incumbent's makespan (not printed)

  bool has_schedule() const {
    return status == RematIlpStatus::Optimal || status == RematIlpStatus::Feasible;
  }
};

// Bounds on plan --graph (the program grows as stages x (stages + edges), and CBC's root LP with
// it): at most kMaxRematStages stages and about kMaxRematProgramTerms variables; past them,
// solve_remat is one InputError naming the numbers. No option raises them. The time limit covers
// the whole call; the first incumbent's chain DP before CBC is not interruptible (about 1 s at
// 200 stages and 500 slots), CBC is (plan/cbc_deadline.h).
inline constexpr int64_t kMaxRematStages = 200;
inline constexpr int64_t kMaxRematProgramTerms = 2'000'000;
void check_remat_size(const RematGraph& graph);

// InputError (a failed Result) for an invalid graph, a negative budget, slots < 1, a budget below
// `slots` bytes, or a time limit that is not positive. An infeasible budget is a plan with status
// Infeasible.
Result<RematPlan> solve_remat(const RematGraph& graph, int64_t budget_bytes,
                              int slots = kDefaultRematSlots, const RematIlpOptions& options = {});

// {"status", "optimal", "budget_bytes", "slots", "makespan_ms", "best_bound_ms", "gap_pct",
//  "no_checkpoint_makespan_ms", "peak_bytes", "store_all_bytes", "time_limit_s", "persistent",
//  "schedule"}; makespan_ms, peak_bytes, best_bound_ms and gap_pct are null where they do not exist.
std::string remat_plan_json(const RematPlan& plan);
std::string remat_plan_text(const RematPlan& plan);

}  // namespace headroom
