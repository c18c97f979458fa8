// plan --graph FILE --memory-model checkmate: Checkmate's MILP on Checkmate's graph form
// (checkmate_graph.h, checkmate_ilp.h) under a byte budget, with the decoded schedule re-evaluated
// by the accounting of checkmate_graph.h. A schedule that breaks a rule, exceeds the budget or
// costs other than the program's objective is a HEADROOM_CHECK failure, never an answer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/checkmate_graph.h"
#include "plan/checkmate_ilp.h"
#include "util/error.h"

namespace headroom {

struct CheckmatePlan {
  CheckmateStatus status = CheckmateStatus::NoSolution;
  CheckmateFormulation formulation = CheckmateFormulation::Headroom;
  int64_t budget_bytes = 0;
  int64_t cost = 0;              // Σ cost_i over every computation of the schedule; 0 without one
  int64_t no_recompute_cost = 0;  // Σ cost_i: every node once
  double bound = 0;              // lower bound on the optimal cost
  int64_t peak_bytes = 0;        // the schedule's peak (Checkmate's accounting); 0 without one
  double time_limit_s = 0;
  // Per stage t: the nodes computed (increasing; the last is t) and those held when it starts.
  std::vector<std::vector<int>> compute, held;
  int variables = 0, constraints = 0;  // 0 when no program was needed
  bool solved_without_search = false;
  int64_t greedy_cost = 0, start_cost = 0;  // the starts (checkmate_ilp.h); not printed
  double solve_seconds = 0;  // not printed: the output stays deterministic

  bool has_schedule() const { return status == CheckmateStatus::Optimal || status == CheckmateStatus::Feasible; }
};

// The programs grow as T (T + E): past this many variables of the literal program, solve_checkmate
// is one InputError naming the numbers (as plan --graph's kMaxRematProgramTerms).
inline constexpr int64_t kMaxCheckmateProgramTerms = 2'000'000;

// InputError (a failed Result) for a negative budget, a time limit that is not positive, or a
// program past kMaxCheckmateProgramTerms.
Result<CheckmatePlan> solve_checkmate(const CheckmateGraph& graph, int64_t budget_bytes,
                                      const CheckmateIlpOptions& options = {});

// {"memory_model": "checkmate", "formulation", "status", "optimal", "budget_bytes", "cost",
//  "best_bound", "no_recompute_cost", "peak_bytes", "time_limit_s", "stages": [{"compute": [..],
//  "held": [..]}]}; cost, best_bound and peak_bytes are null where they do not exist.
std::string checkmate_plan_json(const CheckmatePlan& plan);
std::string checkmate_plan_text(const CheckmatePlan& plan);

}  // namespace headroom
