// The two formulations of Checkmate's MILP (checkmate_ilp.h): building them, CBC, decoding.
// Names follow Checkmate's: R, S, FREE (FREE_E), U; t is the stage, i and k nodes, e an edge.
#include "plan/checkmate_ilp.h"
#include "util/index.h"

#include <coin/Cbc_C_Interface.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <numeric>
#include <optional>

#include "plan/cbc_deadline.h"
#include "plan/checkmate_improve.h"
#include "plan/checkmate_start.h"
#include "plan/milp_form.h"

namespace headroom {
namespace {

// Column indices, -1 where a variable does not exist (fixed at 0); kOne where it is fixed at 1.
constexpr int kOne = -2;

struct CheckmateProgram {
  std::vector<std::vector<int>> R, S;  // [t][i]
  std::vector<std::vector<int>> FREE;  // [t][e] (headroom formulation; -1 where fixed at 0)
  std::vector<std::vector<int>> U;     // [t][k] for k <= t (headroom formulation)
  Form form;
  double objective_constant = 0;  // in scaled cost units (R[t][t] = 1 as constants)
};

// Checkmate divides sizes by the gcd of the sizes and the budget, costs by the gcd of the costs.
int64_t gcd_of(const std::vector<int64_t>& v, int64_t extra) {
  int64_t g = extra;
  for (int64_t x : v) g = std::gcd(g, x);
  return g == 0 ? 1 : g;
}

// Adds coef * x to e, where x is a column, a constant 1 or absent.
void add(Expr& e, int col, double coef) {
  if (col == kOne) e.plus(coef);
  else e.add(col, coef);
}

// ILPSolverGurobi.__init__ and build_model, FULL_SCHEDULE, row for row.
CheckmateProgram build_literal(const CheckmateGraph& g, double budget, const std::vector<double>& ram,
                      const std::vector<double>& cpu) {
  CheckmateProgram P;
  Form& f = P.form;
  const int T = g.T;
  const size_t n = at(T);
  P.R.assign(n, std::vector<int>(n));
  P.S.assign(n, std::vector<int>(n));
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < T; ++i) P.R[at(t)][at(i)] = f.binary(cpu[at(i)]);
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < T; ++i) P.S[at(t)][at(i)] = f.binary();
  const size_t E = g.edges.size();
  std::vector<std::vector<int>> free_e(n, std::vector<int>(E));
  for (int t = 0; t < T; ++t)
    for (size_t e = 0; e < E; ++e) free_e[at(t)][e] = f.binary();
  std::vector<std::vector<int>> U(n, std::vector<int>(n));
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < T; ++k) U[at(t)][at(k)] = f.col(0, budget, 0, false);
  for (int t = 0; t < T; ++t) {  // the bounds again as rows, as Checkmate adds them
    for (int k = 0; k < T; ++k) {
      f.row(Expr().add(U[at(t)][at(k)], 1), 'G', 0);
      f.row(Expr().add(U[at(t)][at(k)], 1), 'L', budget);
    }
  }
  auto R = [&](int t, int i) { return P.R[at(t)][at(i)]; };
  auto S = [&](int t, int i) { return P.S[at(t)][at(i)]; };
  // FULL_SCHEDULE: Σ_{i>t} R = 0, Σ_{i>=t} S = 0, Σ_t R[t][t] = T.
  Expr upper_r, upper_s, diagonal;
  for (int t = 0; t < T; ++t) {
    for (int i = t + 1; i < T; ++i) upper_r.add(R(t, i), 1);
    for (int i = t; i < T; ++i) upper_s.add(S(t, i), 1);
    diagonal.add(R(t, t), 1);
  }
  f.row(upper_r, 'E', 0);
  f.row(upper_s, 'E', 0);
  f.row(diagonal, 'E', T);
  for (int t = 0; t + 1 < T; ++t)
    for (int i = 0; i < T; ++i) f.row(Expr().add(S(t + 1, i), 1).add(S(t, i), -1).add(R(t, i), -1), 'L', 0);
  for (auto [u, v] : g.edges)
    for (int t = 0; t < T; ++t) f.row(Expr().add(R(t, v), 1).add(R(t, u), -1).add(S(t, u), -1), 'L', 0);
  // _num_hazards(t, i, k) = 1 - R[t,k] + S[t+1,i] + Σ_{j in succ(i), j > k} R[t,j];
  // 1 - FREE <= hazards and max_hazards (1 - FREE) >= hazards.
  auto hazards = [&](int t, int i, int k) {
    Expr h;
    h.plus(1).add(R(t, k), -1);
    if (t + 1 < T) h.add(S(t + 1, i), 1);
    for (int j : g.successors[at(i)])
      if (j > k) h.add(R(t, j), 1);
    return h;
  };
  auto max_hazards = [&](int t, int i, int k) {
    double later = 0;
    for (int j : g.successors[at(i)])
      if (j > k) later += 1;
    return (t + 1 < T ? 2 : 1) + later;
  };
  for (int t = 0; t < T; ++t) {
    for (size_t e = 0; e < E; ++e) {
      const auto [i, k] = g.edges[e];
      Expr row = hazards(t, i, k);  // 1 - FREE - hazards <= 0
      for (auto& term : row.terms) term.second = -term.second;
      row.constant = 1 - row.constant;
      row.add(free_e[at(t)][e], -1);
      f.row(row, 'L', 0);
    }
  }
  for (int t = 0; t < T; ++t) {
    for (size_t e = 0; e < E; ++e) {
      const auto [i, k] = g.edges[e];
      const double m = max_hazards(t, i, k);
      Expr row = hazards(t, i, k);  // m (1 - FREE) - hazards >= 0
      for (auto& term : row.terms) term.second = -term.second;
      row.constant = m - row.constant;
      row.add(free_e[at(t)][e], -m);
      f.row(row, 'G', 0);
    }
  }
  for (int t = 0; t < T; ++t) {
    Expr u0;
    u0.add(U[at(t)][0], 1).add(R(t, 0), -ram[0]);
    for (int i = 0; i < T; ++i) u0.add(S(t, i), -ram[at(i)]);
    f.row(u0, 'E', 0);
  }
  for (int t = 0; t < T; ++t) {
    for (int k = 0; k + 1 < T; ++k) {
      Expr rec;
      rec.add(U[at(t)][at(k) + 1], 1).add(U[at(t)][at(k)], -1).add(R(t, k + 1), -ram[at(k) + 1]);
      for (int e : g.in_edges[at(k)]) rec.add(free_e[at(t)][at(e)], ram[at(g.edges[at(e)].first)]);
      f.row(rec, 'E', 0);
    }
  }
  return P;
}

// The reduced, tightened program (checkmate_ilp.h; docs/ilp.md §9).
CheckmateProgram build_headroom(const CheckmateGraph& g, double budget, const std::vector<double>& ram,
                       const std::vector<double>& cpu) {
  CheckmateProgram P;
  Form& f = P.form;
  const int T = g.T;
  const size_t n = at(T);
  P.R.assign(n, std::vector<int>(n, -1));
  P.S.assign(n, std::vector<int>(n, -1));
  // reach[i]: the last node that depends on i (i itself when none does). Whatever stage t
  // computes or holds must lead to node t or to something held into t+1, so in the end to a node
  // >= t: a node whose dependents all come before t is computed or held in stage t in vain.
  std::vector<int> reach(n);
  for (int i = T - 1; i >= 0; --i) {
    reach[at(i)] = i;
    for (int j : g.successors[at(i)]) reach[at(i)] = std::max(reach[at(i)], reach[at(j)]);
  }
  for (int t = 0; t < T; ++t) {
    P.R[at(t)][at(t)] = kOne;
    P.objective_constant += cpu[at(t)];
    for (int i = 0; i < t; ++i)
      if (reach[at(i)] >= t) P.R[at(t)][at(i)] = f.binary(cpu[at(i)]);
    for (int i = 0; i < t; ++i)
      if (reach[at(i)] >= t) P.S[at(t)][at(i)] = f.binary();
  }
  auto R = [&](int t, int i) { return P.R[at(t)][at(i)]; };
  auto S = [&](int t, int i) { return t < T ? P.S[at(t)][at(i)] : -1; };
  auto reads_in_stage = [&](int i, int t) {  // is node t itself a reader of i (R[t][t] = 1)?
    return std::binary_search(g.successors[at(i)].begin(), g.successors[at(i)].end(), t);
  };
  for (int t = 0; t < T; ++t) {
    for (int i = 0; i < t; ++i) {
      // Held into t+1 only what is held or computed in t (i = t: computed, always true).
      if (S(t + 1, i) >= 0) f.row(Expr().add(S(t + 1, i), 1).add(S(t, i), -1).add(R(t, i), -1), 'L', 0);
      // Cut: never recompute what is held.
      if (R(t, i) >= 0 && S(t, i) >= 0) f.row(Expr().add(R(t, i), 1).add(S(t, i), 1), 'L', 1);
      // Cuts: nothing computed or held in vain (read by a node computed in t, or held into t+1).
      if (!reads_in_stage(i, t)) {
        for (int var : {R(t, i), S(t, i)}) {
          if (var < 0) continue;
          Expr e;
          e.add(var, 1).add(S(t + 1, i), -1);
          for (int j : g.successors[at(i)])
            if (j < t) e.add(R(t, j), -1);
          f.row(e, 'L', 0);
        }
      }
    }
    // Inputs: R[t][v] <= R[t][u] + S[t][u] for v <= t.
    for (auto [u, v] : g.edges) {
      if (v > t || R(t, v) == -1) continue;
      Expr e;
      add(e, R(t, v), 1);
      add(e, R(t, u), -1);
      add(e, S(t, u), -1);
      f.row(e, 'L', 0);
    }
    // FREE[t][(i, k)] for k <= t, one row per hazard; fixed at 0 where a hazard is a constant.
    std::vector<int>& free_e = P.FREE.emplace_back(g.edges.size(), -1);
    for (size_t e = 0; e < g.edges.size(); ++e) {
      const auto [i, k] = g.edges[e];
      if (k > t || R(t, k) == -1) continue;
      bool fixed = false;
      for (int j : g.successors[at(i)])
        if (j > k && j <= t && R(t, j) == kOne) fixed = true;
      if (fixed) continue;
      const int col = f.binary();
      free_e[e] = col;
      if (R(t, k) >= 0) f.row(Expr().add(col, 1).add(R(t, k), -1), 'L', 0);
      if (S(t + 1, i) >= 0) f.row(Expr().add(col, 1).add(S(t + 1, i), 1), 'L', 1);
      for (int j : g.successors[at(i)])
        if (j > k && j <= t && R(t, j) >= 0) f.row(Expr().add(col, 1).add(R(t, j), 1), 'L', 1);
    }
    // Cut (valid for every schedule): a node is freed at most once in a stage, and only when it
    // is there (held or computed). Without it the LP frees a fractionally present node once per
    // reader.
    {
      std::vector<Expr> freed(n);
      for (size_t e = 0; e < g.edges.size(); ++e)
        if (free_e[e] >= 0) freed[at(g.edges[e].first)].add(free_e[e], 1);
      for (int i = 0; i < t; ++i) {
        if (freed[at(i)].terms.empty()) continue;
        Expr row = freed[at(i)];
        add(row, R(t, i), -1);
        add(row, S(t, i), -1);
        f.row(row, 'L', 0);
      }
    }
    // Cut (valid for every schedule): when node t is computed, it, its inputs and everything held
    // into t+1 are in memory together (U[t][t]): a knapsack row on S[t+1].
    if (t + 1 < T) {
      double fixed = ram[at(t)];
      std::vector<uint8_t> input(n, 0);
      for (int e : g.in_edges[at(t)]) {
        input[at(g.edges[at(e)].first)] = 1;
        fixed += ram[at(g.edges[at(e)].first)];
      }
      Expr row;
      for (int i = 0; i < t; ++i)
        if (!input[at(i)]) row.add(S(t + 1, i), ram[at(i)]);
      if (!row.terms.empty()) f.row(row, 'L', budget - fixed);
    }
    // U[t][k] for k <= t (later it only falls), within the budget by its bound.
    std::vector<int>& U = P.U.emplace_back();
    for (int k = 0; k <= t; ++k) U.push_back(f.col(0, budget, 0, false));
    Expr u0;
    u0.add(U[0], 1);
    add(u0, R(t, 0), -ram[0]);
    for (int i = 0; i < t; ++i) u0.add(S(t, i), -ram[at(i)]);
    f.row(u0, 'E', 0);
    for (int k = 0; k < t; ++k) {
      Expr rec;
      rec.add(U[at(k) + 1], 1).add(U[at(k)], -1);
      add(rec, R(t, k + 1), -ram[at(k) + 1]);
      for (int e : g.in_edges[at(k)]) rec.add(free_e[at(e)], ram[at(g.edges[at(e)].first)]);
      f.row(rec, 'E', 0);
    }
  }
  return P;
}

CheckmateSchedule decode(const CheckmateGraph& g, const CheckmateProgram& P, const double* x) {
  const size_t n = at(g.T);
  CheckmateSchedule s{CheckmateMatrix(n, std::vector<uint8_t>(n, 0)), CheckmateMatrix(n, std::vector<uint8_t>(n, 0))};
  auto value = [&](int col) -> uint8_t { return col == kOne ? 1 : col >= 0 && x[col] > 0.5 ? 1 : 0; };
  for (size_t t = 0; t < n; ++t) {
    for (size_t i = 0; i < n; ++i) {
      s.R[t][i] = value(P.R[t][i]);
      s.S[t][i] = value(P.S[t][i]);
    }
  }
  return s;
}

// The columns of a schedule in the headroom program (a MIP start): R and S as they are, FREE as
// the accounting frees (checkmate_graph.h), U by its recurrence, in the program's size units.
void encode(const CheckmateGraph& g, const CheckmateProgram& P, const CheckmateSchedule& s, const std::vector<double>& ram,
            std::vector<int>* cols, std::vector<double>* vals) {
  auto put = [&](int col, double v) {
    if (col >= 0) {
      cols->push_back(col);
      vals->push_back(v);
    }
  };
  for (int t = 0; t < g.T; ++t) {
    const auto& r = s.R[at(t)];
    const auto& h = s.S[at(t)];
    for (int i = 0; i < g.T; ++i) {
      put(P.R[at(t)][at(i)], r[at(i)]);
      put(P.S[at(t)][at(i)], h[at(i)]);
    }
    double u = 0;
    for (int i = 0; i < t; ++i)
      if (h[at(i)]) u += ram[at(i)];
    for (int k = 0; k <= t; ++k) {
      if (r[at(k)]) u += ram[at(k)];
      put(P.U[at(t)][at(k)], u);
      for (int e : g.in_edges[at(k)]) {
        const int i = g.edges[at(e)].first;
        bool freed = r[at(k)] && !(t + 1 < g.T && s.S[at(t) + 1][at(i)]);
        for (int j : g.successors[at(i)])
          if (j > k && j <= t && r[at(j)]) freed = false;
        if (freed) u -= ram[at(i)];
        put(P.FREE[at(t)][at(e)], freed ? 1 : 0);
      }
    }
  }
}

// A lower bound on any schedule's peak: node t and all its inputs are in U[t][t] (an input read
// by t cannot have been freed before t runs). Above the budget, no schedule exists.
int64_t least_peak(const CheckmateGraph& g) {
  int64_t best = 0;
  for (int t = 0; t < g.T; ++t) {
    int64_t need = g.size_bytes[at(t)];
    for (int e : g.in_edges[at(t)]) need += g.size_bytes[at(g.edges[at(e)].first)];
    best = std::max(best, need);
  }
  return best;
}

// CBC's first incumbent: the greedy checkpoint set and the uniform ones of every k-th forward node
// (k = 2 .. ⌈√forward nodes⌉ + 1) that fit, each improved by the local search; the cheapest (the
// first of equals). greedy_cost gets the greedy's own cost (0 without one).
std::optional<CheckmateSchedule> best_start(const CheckmateGraph& g, int64_t budget, int64_t* greedy_cost) {
  std::optional<CheckmateSchedule> best;
  int64_t best_cost = 0;
  // Pair kicks are slow: one count for all starts, the greedy's first (the 41-node U-Net-like
  // graph of the benchmark needs about 22,000 from it to reach its optimum; at 65 nodes the count
  // bounds them to a few seconds on a loaded 2-core VM).
  int64_t pair_kicks_left = 30'000;
  auto consider = [&](const CheckmateSchedule& s) {
    CheckmateSchedule better = checkmate_improve(g, s, budget, &pair_kicks_left);
    const CheckmateEvaluation ev = checkmate_evaluate(g, better);
    if (!ev.invalid.empty() || ev.peak_bytes > budget) return;
    if (!best || ev.cost < best_cost) {
      best = std::move(better);
      best_cost = ev.cost;
    }
  };
  *greedy_cost = 0;
  if (std::optional<CheckmateSchedule> greedy = checkmate_greedy_start(g, budget)) {
    *greedy_cost = checkmate_evaluate(g, *greedy).cost;
    consider(*greedy);
  }
  int forward = 0;
  for (CheckmateNodeKind k : g.kind) forward += k == CheckmateNodeKind::Forward;
  const int most = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(forward)))) + 1;
  for (int every = 2; every <= most; ++every) {
    const CheckmateSchedule s = checkmate_checkpoint_schedule(g, checkmate_uniform_checkpoints(g, every));
    const CheckmateEvaluation ev = checkmate_evaluate(g, s);
    if (ev.invalid.empty() && ev.peak_bytes <= budget) consider(s);
  }
  return best;
}

}  // namespace

std::string checkmate_formulation_name(CheckmateFormulation f) {
  return f == CheckmateFormulation::Literal ? "literal" : "headroom";
}

std::string checkmate_status_name(CheckmateStatus s) {
  switch (s) {
    case CheckmateStatus::Optimal: return "optimal";
    case CheckmateStatus::Feasible: return "time limit (feasible)";
    case CheckmateStatus::Infeasible: return "infeasible";
    case CheckmateStatus::NoSolution: return "no solution found";
  }
  return "?";
}

CheckmateIlpResult solve_checkmate_ilp(const CheckmateGraph& g, int64_t budget_bytes,
                                       const CheckmateIlpOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  CheckmateIlpResult out;
  auto finish = [&] {
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
  };
  const bool literal = options.formulation == CheckmateFormulation::Literal;
  if (!literal) {
    // Bounds first: the least peak above the budget is a proof of infeasibility; the store-all
    // schedule within it has the least possible cost, a proof of optimality.
    if (least_peak(g) > budget_bytes) {
      out.status = CheckmateStatus::Infeasible;
      return finish();
    }
    CheckmateSchedule all = checkmate_store_all(g);
    const CheckmateEvaluation ev = checkmate_evaluate(g, all);
    if (ev.invalid.empty() && ev.peak_bytes <= budget_bytes) {
      out.status = CheckmateStatus::Optimal;
      out.cost = ev.cost;
      out.bound = static_cast<double>(ev.cost);
      out.schedule = std::move(all);
      out.solved_without_search = true;
      return finish();
    }
  }
  // The greedy start (headroom formulation): when it costs Σ cost_i it is optimal as it stands.
  std::optional<CheckmateSchedule> start_schedule;
  int64_t least_cost = 0;
  for (int64_t c : g.cost) least_cost += c;
  if (!literal) {
    start_schedule = best_start(g, budget_bytes, &out.greedy_cost);
    if (start_schedule) {
      const CheckmateEvaluation ev = checkmate_evaluate(g, *start_schedule);
      out.start_cost = ev.cost;
      if (ev.cost == least_cost) {
        out.status = CheckmateStatus::Optimal;
        out.cost = ev.cost;
        out.bound = static_cast<double>(ev.cost);
        out.schedule = std::move(*start_schedule);
        out.solved_without_search = true;
        return finish();
      }
    }
  }
  const int64_t ram_gcd = gcd_of(g.size_bytes, budget_bytes);
  const int64_t cpu_gcd = gcd_of(g.cost, 0);
  std::vector<double> ram, cpu;
  for (int64_t v : g.size_bytes) ram.push_back(static_cast<double>(v / ram_gcd));
  for (int64_t v : g.cost) cpu.push_back(static_cast<double>(v / cpu_gcd));
  const double budget = static_cast<double>(budget_bytes / ram_gcd);
  const CheckmateProgram P = literal ? build_literal(g, budget, ram, cpu) : build_headroom(g, budget, ram, cpu);
  out.variables = P.form.columns();
  out.constraints = P.form.rows();
  if (P.form.constant_rows_violated) {
    out.status = CheckmateStatus::Infeasible;
    return finish();
  }
  std::unique_ptr<Cbc_Model, void (*)(Cbc_Model*)> model(Cbc_newModel(), Cbc_deleteModel);
  Cbc_Model* m = model.get();
  load_form_into_cbc(P.form, m);
  // CBC's parameters are plan --graph's (remat_ilp.cc), the same for both formulations.
  Cbc_setLogLevel(m, 0);
  Cbc_setParameter(m, "log", "0");
  Cbc_setParameter(m, "slog", "0");
  Cbc_setParameter(m, "preprocess", "off");
  Cbc_setParameter(m, "timeMode", "elapsed");
  const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double left = std::max(0.01, options.time_limit_s - spent);
  Cbc_setMaximumSeconds(m, left);
  Cbc_setAllowableGap(m, 1e-7);
  Cbc_setAllowableFractionGap(m, 0);
  if (start_schedule) {
    std::vector<int> cols;
    std::vector<double> vals;
    encode(g, P, *start_schedule, ram, &cols, &vals);
    Cbc_setMIPStartI(m, static_cast<int>(cols.size()), cols.data(), vals.data());
  }
  const CbcOutcome cbc = solve_cbc_with_deadline(m, P.form.columns(), left + kDeadlineGraceS);
  const double scale = static_cast<double>(cpu_gcd);
  if (!cbc.has_solution && !cbc.finished && start_schedule) {
    // Killed at the deadline (in its root, under load) before CBC recorded the start: the start
    // stands, checked by checkmate_evaluate; without CBC's bound, the bound is Σ cost_i.
    out.status = CheckmateStatus::Feasible;
    out.cost = out.start_cost;
    out.bound = static_cast<double>(least_cost);
    out.schedule = std::move(*start_schedule);
    return finish();
  }
  if (!cbc.has_solution) {
    out.status = cbc.finished && (cbc.proven_infeasible || cbc.proven_optimal) ? CheckmateStatus::Infeasible
                                                                                 : CheckmateStatus::NoSolution;
    if (out.status == CheckmateStatus::NoSolution)
      out.bound = cbc.finished ? (cbc.best_possible + P.objective_constant) * scale : 0;
    return finish();
  }
  out.status = cbc.proven_optimal ? CheckmateStatus::Optimal : CheckmateStatus::Feasible;
  out.cost = std::llround((cbc.objective + P.objective_constant) * scale);
  out.bound = out.status == CheckmateStatus::Optimal
                  ? static_cast<double>(out.cost)
                  : std::min(static_cast<double>(out.cost), (cbc.best_possible + P.objective_constant) * scale);
  out.schedule = decode(g, P, cbc.solution.data());
  return finish();
}

}  // namespace headroom
