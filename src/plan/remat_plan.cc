#include "plan/remat_plan.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "plan/chain_dp.h"
#include "plan/remat_simulate.h"
#include "plan/remat_start.h"
#include "plan/schedule_text.h"
#include "util/format.h"

namespace headroom {
namespace {

// An unrestricted solve of a graph with skip edges, in two phases (docs/ilp.md §4). Phase 1 solves
// the persistent program (a subset of the unrestricted schedules, with a much tighter relaxation)
// from the bundled-chain schedule (remat_start.h) for at most kPersistentShare of the limit, and
// stops once within kPersistentStopGapPct of its bound: it only has to supply a good schedule.
// Phase 2 solves the unrestricted program for the rest of the limit with phase 1's makespan as
// CBC's cutoff (only strictly faster schedules are searched for) and no start (the sweep is above
// the cutoff). Measured (docs/ilp.md §7): CBC's heuristics find more this way than from phase 1's
// near-optimal schedule as the start, and phase 2 does not see phase 1's schedule, only its value. The answer is phase 2's unless phase 1's schedule is strictly faster
// (including when phase 2 finds nothing under the cutoff), so it is never slower than phase 1's
// persistent schedule; the bound is always phase 2's (phase 1's bounds only persistent schedules).
constexpr double kPersistentShare = 0.5;
constexpr double kIncumbentShare = 0.5;
constexpr double kPersistentStopGapPct = 1;

RematIlpResult solve_in_two_phases(const RematGraph& slot_graph, int slots,
                                   const RematIlpOptions& options,
                                   const std::vector<RematOp>& initial) {
  RematIlpOptions first = options;
  first.persistent = true;
  first.time_limit_s = kPersistentShare * options.time_limit_s;
  first.stop_gap_pct = kPersistentStopGapPct;
  const RematIlpResult p = solve_remat_ilp(slot_graph, slots, first, initial);
  RematIlpOptions second = options;
  second.time_limit_s = std::max(0.05 * options.time_limit_s, options.time_limit_s - p.seconds);
  const bool has_p = !p.schedule.empty();
  if (has_p) second.cutoff_ms = p.objective_ms;
  RematIlpResult r = solve_remat_ilp(slot_graph, slots, second);  // no start below the cutoff
  r.seconds += p.seconds;
  if (has_p && (r.schedule.empty() || p.objective_ms < r.objective_ms)) {
    // Phase 2 proved that nothing is faster than the cutoff: phase 1's schedule is optimal.
    const bool proven = r.status == RematIlpStatus::Infeasible;
    r.objective_ms = p.objective_ms;
    r.schedule = p.schedule;
    r.status = proven ? RematIlpStatus::Optimal : RematIlpStatus::Feasible;
    r.bound_ms = proven ? r.objective_ms : std::min(r.bound_ms, r.objective_ms);
    r.gap_pct = 100.0 * (r.objective_ms - r.bound_ms) / r.objective_ms;
  }
  r.start_ms = p.start_ms > 0 ? p.start_ms : r.start_ms;
  return r;
}

}  // namespace

void check_remat_size(const RematGraph& graph) {
  const int64_t L = graph.length();
  if (L > kMaxRematStages) {
    throw InputError("the graph has " + std::to_string(L) + " stages, over the integer program's limit of " +
                     std::to_string(kMaxRematStages) + " (plan --chain solves chains of any length)");
  }
  int64_t edges = 0;
  for (const std::vector<int>& p : graph.preds) edges += static_cast<int64_t>(p.size());
  // Per stage of the program: R and S per activation, FREE per edge (docs/ilp.md).
  const int64_t terms = (L + 1) * (3 * L + 2 * edges);
  if (terms > kMaxRematProgramTerms) {
    throw InputError("the graph's " + std::to_string(L) + " stages and " + std::to_string(edges) +
                     " edges make an integer program of about " + std::to_string(terms) +
                     " variables, over the limit of " + std::to_string(kMaxRematProgramTerms));
  }
}

Result<RematPlan> solve_remat(const RematGraph& graph, int64_t budget, int slots,
                              const RematIlpOptions& options) {
  return capture_input_errors([&]() -> RematPlan {
    validate_remat_graph(graph);
    if (budget < 0)
      throw InputError("budget is " + std::to_string(budget) + " bytes, it cannot be negative");
    if (slots < 1) throw InputError("slots is " + std::to_string(slots) + ", at least 1 is needed");
    if (budget < slots) {
      throw InputError("budget of " + std::to_string(budget) + " bytes is smaller than " +
                       std::to_string(slots) + " slots: a slot would hold 0 bytes");
    }
    if (!(options.time_limit_s > 0) || !std::isfinite(options.time_limit_s))
      throw InputError("time limit is " + ms_text(options.time_limit_s) + " s, it must be positive");
    check_remat_size(graph);
    const auto start = std::chrono::steady_clock::now();
    RematPlan plan;
    plan.budget_bytes = budget;
    plan.slots = slots;
    plan.unit_bytes = budget / slots;
    plan.no_checkpoint_makespan_ms = no_checkpoint_makespan_ms(graph.sizes);
    plan.store_all_bytes = remat_store_all_peak(graph);
    plan.time_limit_s = options.time_limit_s;
    plan.persistent = options.persistent;
    const RematGraph slot_graph{discretize_chain(graph.sizes, plan.unit_bytes), graph.preds};
    // On a chain, the DP's optimal persistent schedule is the first incumbent (optimal already
    // for the persistent program; the unrestricted one starts from it).
    std::vector<RematOp> initial;
    // The first incumbent's dynamic program gets at most half of the time limit; past it the
    // integer program starts without one (docs/limits.md).
    const Deadline incumbent_deadline =
        start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(kIncumbentShare * options.time_limit_s));
    bool chain = true;
    for (int i = 0; i < graph.length(); ++i)
      chain = chain && graph.preds[static_cast<size_t>(i)] == std::vector<int>{i};
    if (chain && chain_dp_table_bytes(graph.length(), slots) <= kMaxChainTableBytes) {
      const ChainDpResult dp = solve_chain_dp(slot_graph.sizes, slots, 0, incumbent_deadline);
      for (ChainOp op : dp.schedule) initial.push_back(parse_remat_op_token(op_token(op)));
    } else if (!chain) {
      // Otherwise the chain DP on the bundled chain (remat_start.h), translated.
      initial = remat_bundled_chain_schedule(slot_graph, slots, incumbent_deadline);
    }
    // The time limit covers the whole plan: the first incumbent's search is spent already.
    RematIlpOptions left = options;
    left.time_limit_s = std::max(0.05 * options.time_limit_s,
                                 options.time_limit_s - std::chrono::duration<double>(
                                                            std::chrono::steady_clock::now() - start).count());
    const RematIlpResult r = chain || options.persistent
                                 ? solve_remat_ilp(slot_graph, slots, left, initial)
                                 : solve_in_two_phases(slot_graph, slots, left, initial);
    plan.status = r.status;
    plan.bound_ms = r.bound_ms;
    plan.gap_pct = r.gap_pct;
    plan.variables = r.variables;
    plan.constraints = r.constraints;
    plan.solve_seconds = r.seconds;
    plan.start_ms = r.start_ms;
    if (!plan.has_schedule()) return plan;

    // The independent simulator re-runs the decoded schedule.
    Result<RematSimResult> in_slots = simulate_remat(slot_graph, r.schedule);
    HEADROOM_CHECK(in_slots.ok(),
                   "the decoded schedule is valid: " + (in_slots.ok() ? "" : in_slots.error()));
    HEADROOM_CHECK(in_slots.value().peak <= slots, "the decoded schedule fits its slots");
    const double sim_ms = in_slots.value().makespan_ms;
    HEADROOM_CHECK(std::abs(sim_ms - r.objective_ms) <= 1e-6 * std::max(1.0, sim_ms),
                   "the schedule's makespan is the program's objective (" + ms_text(sim_ms) +
                       " vs " + ms_text(r.objective_ms) + ")");
    Result<RematSimResult> in_bytes = simulate_remat(graph, r.schedule);
    HEADROOM_CHECK(in_bytes.ok() && in_bytes.value().peak <= budget, "slots fit implies bytes fit");
    plan.makespan_ms = sim_ms;
    plan.peak_bytes = in_bytes.value().peak;
    for (RematOp op : r.schedule) plan.schedule.push_back(remat_op_token(op));
    return plan;
  });
}

std::string remat_plan_json(const RematPlan& p) {
  using J = nlohmann::ordered_json;
  const bool has = p.has_schedule();
  J j;
  j["status"] = remat_status_name(p.status);
  j["optimal"] = p.status == RematIlpStatus::Optimal;
  j["budget_bytes"] = p.budget_bytes;
  j["slots"] = p.slots;
  j["makespan_ms"] = has ? J(p.makespan_ms) : J(nullptr);
  j["best_bound_ms"] = has || p.status == RematIlpStatus::NoSolution ? J(p.bound_ms) : J(nullptr);
  j["gap_pct"] = has ? J(p.gap_pct) : J(nullptr);
  j["no_checkpoint_makespan_ms"] = p.no_checkpoint_makespan_ms;
  j["peak_bytes"] = has ? J(p.peak_bytes) : J(nullptr);
  j["store_all_bytes"] = p.store_all_bytes;
  j["time_limit_s"] = p.time_limit_s;
  j["persistent"] = p.persistent;
  j["schedule"] = p.schedule;
  return j.dump(2) + "\n";
}

std::string remat_plan_text(const RematPlan& p) {
  std::ostringstream os;
  os << budget_lines(p.budget_bytes, p.slots, p.unit_bytes, p.store_all_bytes, p.no_checkpoint_makespan_ms);
  os << "status: " << remat_status_name(p.status);
  if (p.persistent) os << " (persistent schedules only)";
  os << "\n";
  if (p.status == RematIlpStatus::Infeasible) {
    os << "infeasible: no schedule fits the budget at this slot count\n";
    return os.str();
  }
  if (p.status == RematIlpStatus::NoSolution) {
    os << "no schedule found within " << ms_text(p.time_limit_s) << " s; the optimum is at least "
       << ms_text(p.bound_ms) << " ms if a schedule exists\n";
    return os.str();
  }
  os << makespan_line(p.makespan_ms, p.no_checkpoint_makespan_ms);
  os << "best bound " << ms_text(p.bound_ms) << " ms, gap " << ms_text(p.gap_pct) << "%\n";
  os << peak_and_schedule_lines(p.peak_bytes, p.budget_bytes, p.schedule);
  return os.str();
}

}  // namespace headroom
