// Checkmate's rematerialization MILP on its own training graphs (checkmate_graph.h), solved with
// COIN-OR CBC, in two formulations of the same optimum:
//
// Literal: ILPSolverGurobi.build_model of parasj/checkmate (checkmate/core/solvers/
//   gurobi_solver.py) with ImposedSchedule.FULL_SCHEDULE, transcribed into rows and columns by our
//   own code: binary R, S (T x T) and FREE_E (T x edges), continuous U (T x T) in [0, budget];
//   the frontier rows Σ_{i>t} R = 0, Σ_{i>=t} S = 0, Σ_t R[t][t] = T; S[t+1][i] <= S[t][i] +
//   R[t][i]; R[t][v] <= R[t][u] + S[t][u] per edge; both hazard rows per (t, edge); the U
//   recurrence; U's bounds repeated as rows. Sizes are divided by the gcd of the sizes and the
//   budget and costs by the gcd of the costs, as Checkmate does. Checkmate's objective noise
//   (eps_noise) is left out: the objective is exactly Σ cost_i R[t][i].
//
// Headroom: the same model, reduced and tightened without losing the optimum (docs/ilp.md §9 has
//   the argument for each step): variables fixed by the frontier rule are constants instead of
//   columns (R[t][t] = 1; R[t][i>t], S[t][i>=t] absent); FREE only where it can be 1, with one
//   row per hazard instead of the aggregated pair (a free is never forced: freeing earlier never
//   raises U, so the optimum is unchanged); U only up to the stage's own node; three cuts
//   that only remove dominated schedules: nothing recomputed that is held (R + S <= 1), nothing
//   computed or held in vain (it is read in the stage or held into the next); and two rows valid
//   for every schedule that tighten the LP: a node is freed at most once per stage and only when
//   present, and what stage t holds into t+1 fits beside node t and its inputs. Before CBC: the
//   least peak any schedule has (node t and its inputs) against the budget, a proof of
//   infeasibility; the store-all schedule and the starts (the greedy and the uniform checkpoint
//   sets of checkmate_start.h, each improved by checkmate_improve.h): one that fits and costs
//   Σ cost_i (every node once) is optimal without a search; otherwise the cheapest start is CBC's
//   first incumbent.
//
// Both return the schedule decoded from CBC's solution; checkmate_plan re-evaluates it
// (checkmate_evaluate) and checks the cost and the budget.
#pragma once

#include <cstdint>
#include <string>

#include "plan/checkmate_graph.h"

namespace headroom {

enum class CheckmateFormulation : uint8_t { Literal, Headroom };
std::string checkmate_formulation_name(CheckmateFormulation f);  // "literal", "headroom"

enum class CheckmateStatus : uint8_t { Optimal, Feasible, Infeasible, NoSolution };
// "optimal", "time limit (feasible)", "infeasible", "no solution found" (as plan --graph).
std::string checkmate_status_name(CheckmateStatus s);

struct CheckmateIlpOptions {
  CheckmateFormulation formulation = CheckmateFormulation::Headroom;
  double time_limit_s = 10;  // wall seconds for CBC (plan/cbc_deadline.h)
};

struct CheckmateIlpResult {
  CheckmateStatus status = CheckmateStatus::NoSolution;
  int64_t cost = 0;      // the schedule's Σ cost_i R[t][i]; 0 without one
  double bound = 0;      // CBC's lower bound on the optimal cost (the cost when optimal)
  CheckmateSchedule schedule;  // empty without one
  int variables = 0, constraints = 0;
  bool solved_without_search = false;  // the store-all or greedy start costs Σ cost_i (headroom)
  int64_t greedy_cost = 0;             // the greedy checkpoint set's cost; 0 without one
  int64_t start_cost = 0;              // the start handed to CBC (the greedy's, improved); 0 without one
  double seconds = 0;
};

// REQUIRES: graph validated, budget_bytes >= 0, time_limit_s > 0.
CheckmateIlpResult solve_checkmate_ilp(const CheckmateGraph& graph, int64_t budget_bytes,
                                       const CheckmateIlpOptions& options);

}  // namespace headroom
