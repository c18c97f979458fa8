// Checkmate's training graphs as published (Jain et al., "Checkmate: Breaking the Memory Wall with
// Optimal Tensor Rematerialization", MLSys 2020; parasj/checkmate, checkmate/core/dfgraph.py) and
// the memory accounting of its MILP (checkmate/core/solvers/gurobi_solver.py, ILPSolverGurobi with
// ImposedSchedule.FULL_SCHEDULE), written out once here so that the integer programs
// (checkmate_ilp.h) and the exhaustive test search evaluate schedules by the same rules.
//
// The graph: T nodes 0..T-1 in topological order (forward nodes, the loss, backward nodes; `kind`
// says which, the accounting does not use it), edges (u, v) with u < v, an integer cost and a size
// in bytes per node. A schedule is a T x T pair of 0/1 matrices:
//   R[t][i] = 1: node i is computed in stage t (in index order within the stage);
//   S[t][i] = 1: node i is held in memory when stage t starts.
// The full-schedule model: node t is computed in stage t (R[t][t] = 1), nothing later than t is
// computed in stage t (R lower triangular), only earlier nodes are held (S strictly lower).
//
// Accounting, per stage t (Checkmate's U and FREE_E): U[t][0] = size_0 R[t][0] + Σ_i size_i S[t][i],
// U[t][k+1] = U[t][k] + size_{k+1} R[t][k+1] - Σ_{edges (i,k)} size_i FREE[t][(i,k)], where the
// edge (i, k) frees i right after k when k is computed in t, i is not held into t+1, and no later
// successor of i is computed in t (Checkmate's "hazards" are all 0). Every U[t][k] must be within
// the budget. A node without successors is never freed within its stage; a node both held and
// recomputed counts twice and is freed once (both as in Checkmate). Cost = Σ_{t,i} cost_i R[t][i].
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.h"

namespace headroom {

enum class CheckmateNodeKind : uint8_t { Forward, Loss, Backward };

struct CheckmateGraph {
  int T = 0;
  std::vector<std::pair<int, int>> edges;  // (u, v), u < v, in file order
  std::vector<int64_t> cost;               // per node, >= 0
  std::vector<int64_t> size_bytes;         // per node, >= 0
  std::vector<CheckmateNodeKind> kind;     // per node

  // Derived by validate_checkmate_graph (indices into `edges`, increasing).
  std::vector<std::vector<int>> in_edges;   // in_edges[v]: edges (u, v)
  std::vector<std::vector<int>> successors;  // successors[u]: v of every edge (u, v), increasing
};

// Bounds on what plan --graph --memory-model checkmate accepts: the literal program has
// 3 T^2 + T E variables.
inline constexpr int kMaxCheckmateNodes = 400;
inline constexpr int kMaxCheckmateEdges = 20000;

// Checks the fields and fills in_edges and successors. Throws InputError with one line naming the
// first problem (field, index, value).
void validate_checkmate_graph(CheckmateGraph& graph);

// {"T": 5, "edges": [[0, 1], ...], "cost": [...], "size_bytes": [...], "kind": ["fwd", ...,
// "loss", "bwd", ...]}; the object may sit under a top-level "graph" key. Other keys are ignored.
Result<CheckmateGraph> parse_checkmate_graph_json(std::string_view text, const std::string& source = "graph");
Result<CheckmateGraph> load_checkmate_graph_file(const std::string& path);
std::string checkmate_graph_json(const CheckmateGraph& graph);

using CheckmateMatrix = std::vector<std::vector<uint8_t>>;  // [t][i], T x T

struct CheckmateSchedule {
  CheckmateMatrix R, S;
};

// The peak of stage t's U under the accounting above, given the stage's computed set (R[t]), the
// held set when it starts (S[t]) and the held set when the next one starts (S[t+1]; all zero for
// the last stage). No validity checks (checkmate_evaluate does them).
int64_t checkmate_stage_peak(const CheckmateGraph& graph, int t, const std::vector<uint8_t>& computed,
                             const std::vector<uint8_t>& held, const std::vector<uint8_t>& held_next);

struct CheckmateEvaluation {
  std::string invalid;  // empty when the schedule obeys every rule; else the first rule broken
  int64_t cost = 0;     // Σ cost_i R[t][i]
  int64_t peak_bytes = 0;  // max over t, k of U[t][k]
};
// Checks the full-schedule rules (R[t][t] = 1, R lower and S strictly lower triangular, S[0] = 0,
// S[t+1][i] <= S[t][i] + R[t][i], every input of a computed node computed or held in that stage)
// and evaluates cost and peak.
CheckmateEvaluation checkmate_evaluate(const CheckmateGraph& graph, const CheckmateSchedule& schedule);

// The schedule that keeps every node from its stage until its last reader has run (nothing is
// recomputed): cost Σ cost_i, the least possible.
CheckmateSchedule checkmate_store_all(const CheckmateGraph& graph);

}  // namespace headroom
