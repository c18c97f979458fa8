// CBC under a wall-clock deadline. CBC's own limit (Cbc_setMaximumSeconds) is checked only in
// its branch and bound: its root LP (Clp's simplex, inside CbcModel::initialSolve) runs to the
// end, which took 28 s under a 1 s limit and minutes under 5 s on graphs of 40+ stages, and the
// C interface has no event handler that could stop it. So the solve runs in a child process that
// writes its answer back through a pipe; at the deadline the child is killed and the caller
// gets `finished = false` (what happened before then is lost: the caller falls back on the
// schedule it handed CBC, if any).
#pragma once

#include <coin/Cbc_C_Interface.h>

#include <vector>

namespace headroom {

struct CbcOutcome {
  bool finished = false;  // false: killed at the deadline (or the child failed)
  bool has_solution = false;
  bool proven_optimal = false;
  bool proven_infeasible = false;
  double objective = 0;
  double best_possible = 0;    // CBC's bound
  std::vector<double> solution;  // column values when has_solution
};

// How long past its own limit CBC may run before it is stopped (it checks its clock between
// nodes of the search; the margin lets it return its incumbent by itself).
inline constexpr double kDeadlineGraceS = 0.25;

// Runs Cbc_solve(model) with at most `wall_seconds` of wall time (CBC's own limit should be set
// a little below it, so that it stops by itself with its incumbent when it can).
CbcOutcome solve_cbc_with_deadline(Cbc_Model* model, int columns, double wall_seconds);

}  // namespace headroom
