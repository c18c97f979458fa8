// The exact integer program for rematerialization on general graphs (docs/ilp.md), solved with
// COIN-OR CBC. Checkmate-style (Jain et al., MLSys 2020): the schedule is cut into L+1 stages,
// one per backward op (stage 0 ends with the loss, stage s >= 1 with B_{L-s}); in each stage
// every forward runs at most once, in index order, plain or with history (R variables), an
// activation is kept into the next stage or not (S variables), a buffer is freed after a forward
// that reads it or at the end of the stage (FREE variables), and the memory in use is bounded at
// every op. The objective is the time of the forwards; the backwards and the loss are a constant.
//
// Invariants of a returned schedule (checked by the caller, remat_plan.h): valid under
// remat_simulate, peak <= memory, makespan = objective_ms (up to float summation order).
// With `persistent`, the program only admits persistent schedules: a saved state x̄_a stays until
// B_{a-1}, and a plain activation kept across a backward stays until the last backward that reads
// it; on a chain this is the schedule space of the chain DP (chain_dp.h), which it then equals.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/remat_graph.h"

namespace headroom {

struct RematIlpOptions {
  double time_limit_s = 10;  // CBC's limit (wall seconds); the result says whether it was reached
  bool persistent = false;
  double stop_gap_pct = 0;  // stop once the gap is at most this (0: prove optimality)
  double cutoff_ms = 0;     // > 0: only schedules strictly faster than this are searched for;
                            // status Infeasible then means none is faster
};

enum class RematIlpStatus : uint8_t {
  Optimal,     // proven optimal
  Feasible,    // stopped at the time limit with a schedule; the gap says how far from optimal
  Infeasible,  // proven: no schedule fits the memory
  NoSolution,  // stopped at the time limit without a schedule and without a proof
};
// "optimal", "time limit (feasible)", "infeasible", "no solution found".
std::string remat_status_name(RematIlpStatus status);

struct RematIlpResult {
  RematIlpStatus status = RematIlpStatus::NoSolution;
  double objective_ms = 0;  // the best schedule's makespan (forwards + Σ b + ℓ); 0 without one
  double bound_ms = 0;      // CBC's best bound on the optimum (equals objective_ms when optimal)
  double gap_pct = 0;       // 100 (objective - bound) / objective; 0 when optimal
  std::vector<RematOp> schedule;  // decoded; empty without a schedule
  double start_ms = 0;  // makespan of the first incumbent handed to CBC; 0 without one
  int variables = 0, constraints = 0;
  double seconds = 0;  // wall time of the solve
};

// REQUIRES: slot_graph valid (its sizes are slots), memory >= 0, time_limit_s > 0.
// `initial`, when not empty, is a schedule handed to CBC as its first incumbent if it fits the
// memory, lies in the program's space and is below the cutoff (e.g. the chain DP's schedule);
// otherwise the sweep is, on the same conditions. A start CBC has not recorded when the limit
// stops it is returned as the schedule (status Feasible).
RematIlpResult solve_remat_ilp(const RematGraph& slot_graph, int64_t memory,
                               const RematIlpOptions& options,
                               const std::vector<RematOp>& initial = {});

// A schedule of every graph, in the program's space: each backward recomputes from the input
// exactly the forwards it needs, freeing each activation after its last reader (the least memory
// of the simple schedules, the most recomputation). The default first incumbent.
std::vector<RematOp> remat_sweep_schedule(const RematGraph& graph);

}  // namespace headroom
