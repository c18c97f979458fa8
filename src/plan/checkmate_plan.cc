// Checkmate's program under a budget, the check of its schedule, and the output (checkmate_plan.h).
#include "plan/checkmate_plan.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "util/format.h"

namespace headroom {

Result<CheckmatePlan> solve_checkmate(const CheckmateGraph& g, int64_t budget_bytes,
                                      const CheckmateIlpOptions& options) {
  return capture_input_errors([&]() -> CheckmatePlan {
    if (budget_bytes < 0) throw InputError("budget is " + std::to_string(budget_bytes) + " bytes, it cannot be negative");
    if (!(options.time_limit_s > 0)) throw InputError("the time limit must be a positive number of seconds");
    const int64_t T = g.T, E = static_cast<int64_t>(g.edges.size());
    const int64_t variables = 3 * T * T + T * E;  // the literal program's R, S, U and FREE_E
    if (variables > kMaxCheckmateProgramTerms)
      throw InputError("the graph's " + std::to_string(T) + " nodes and " + std::to_string(E) +
                       " edges make an integer program of " + std::to_string(variables) +
                       " variables (3 T^2 + T E), over the limit of " + std::to_string(kMaxCheckmateProgramTerms));
    const CheckmateIlpResult r = solve_checkmate_ilp(g, budget_bytes, options);
    CheckmatePlan p;
    p.status = r.status;
    p.formulation = options.formulation;
    p.budget_bytes = budget_bytes;
    for (int64_t c : g.cost) p.no_recompute_cost += c;
    p.bound = r.bound;
    p.time_limit_s = options.time_limit_s;
    p.variables = r.variables;
    p.constraints = r.constraints;
    p.solved_without_search = r.solved_without_search;
    p.greedy_cost = r.greedy_cost;
    p.start_cost = r.start_cost;
    p.solve_seconds = r.seconds;
    if (!p.has_schedule()) return p;
    const CheckmateEvaluation ev = checkmate_evaluate(g, r.schedule);
    HEADROOM_CHECK(ev.invalid.empty(), "Checkmate program's schedule breaks a rule: " + ev.invalid);
    HEADROOM_CHECK(ev.peak_bytes <= budget_bytes, "Checkmate program's schedule peaks at " +
                                                      std::to_string(ev.peak_bytes) + " bytes, over the budget");
    HEADROOM_CHECK(ev.cost == r.cost, "Checkmate program's schedule costs " + std::to_string(ev.cost) +
                                          ", its objective is " + std::to_string(r.cost));
    p.cost = ev.cost;
    p.peak_bytes = ev.peak_bytes;
    for (int t = 0; t < g.T; ++t) {
      std::vector<int> c, h;
      for (int i = 0; i < g.T; ++i) {
        if (r.schedule.R[static_cast<size_t>(t)][static_cast<size_t>(i)]) c.push_back(i);
        if (r.schedule.S[static_cast<size_t>(t)][static_cast<size_t>(i)]) h.push_back(i);
      }
      p.compute.push_back(std::move(c));
      p.held.push_back(std::move(h));
    }
    return p;
  });
}

std::string checkmate_plan_json(const CheckmatePlan& p) {
  using J = nlohmann::ordered_json;
  const bool has = p.has_schedule();
  J j;
  j["memory_model"] = "checkmate";
  j["formulation"] = checkmate_formulation_name(p.formulation);
  j["status"] = checkmate_status_name(p.status);
  j["optimal"] = p.status == CheckmateStatus::Optimal;
  j["budget_bytes"] = p.budget_bytes;
  j["cost"] = has ? J(p.cost) : J(nullptr);
  j["best_bound"] = has || p.status == CheckmateStatus::NoSolution ? J(p.bound) : J(nullptr);
  j["no_recompute_cost"] = p.no_recompute_cost;
  j["peak_bytes"] = has ? J(p.peak_bytes) : J(nullptr);
  j["time_limit_s"] = p.time_limit_s;
  j["stages"] = J::array();
  for (size_t t = 0; t < p.compute.size(); ++t) j["stages"].push_back({{"compute", p.compute[t]}, {"held", p.held[t]}});
  return j.dump(2) + "\n";
}

std::string checkmate_plan_text(const CheckmatePlan& p) {
  std::ostringstream os;
  os << "Checkmate memory model (" << checkmate_formulation_name(p.formulation) << " formulation), budget "
     << human_bytes(p.budget_bytes) << " (" << p.budget_bytes << " bytes)\n";
  os << "status: " << checkmate_status_name(p.status) << "\n";
  if (p.status == CheckmateStatus::Infeasible) {
    os << "infeasible: no schedule fits the budget\n";
    return os.str();
  }
  if (p.status == CheckmateStatus::NoSolution) {
    os << "no schedule found within the time limit; the optimal cost is at least " << p.bound << "\n";
    return os.str();
  }
  os << "cost " << p.cost << " (every node once: " << p.no_recompute_cost << ", recomputation "
     << p.cost - p.no_recompute_cost << "), best bound " << p.bound << "\n";
  os << "peak " << human_bytes(p.peak_bytes) << " (" << p.peak_bytes << " bytes)\n";
  for (size_t t = 0; t < p.compute.size(); ++t) {
    os << "stage " << t << ": compute";
    for (int i : p.compute[t]) os << " " << i;
    if (!p.held[t].empty()) {
      os << "; held";
      for (int i : p.held[t]) os << " " << i;
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace headroom
