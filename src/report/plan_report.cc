#include "report/plan_report.h"

#include <fmt/format.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "util/format.h"

namespace headroom {
namespace {

// Runs of consecutive ops with the same action, as "first .. last (n ops)".
std::vector<std::string> runs_of(const Plan& plan, const std::string& action) {
  std::vector<std::string> out;
  const auto& d = plan.decisions;
  for (size_t i = 0; i < d.size();) {
    if (d[i].action != action) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j + 1 < d.size() && d[j + 1].action == action) ++j;
    out.push_back(i == j ? d[i].layer : fmt::format("{} .. {} ({} ops)", d[i].layer, d[j].layer, j - i + 1));
    i = j + 1;
  }
  return out;
}

nlohmann::ordered_json time_json(const IterationTime& t) {
  nlohmann::ordered_json j;
  j["compute_ms"] = t.compute_ms;
  j["recompute_ms"] = t.recompute_ms;
  j["optimizer_ms"] = t.optimizer_ms;
  j["stall_ms"] = t.stall_ms;
  j["transfer_ms"] = t.transfer_ms;
  j["transfer_bytes"] = t.transfer_bytes;
  return j;
}

}  // namespace

std::string plan_text(const Plan& p) {
  std::string s = fmt::format("headroom plan: {}, batch {}, training step; times on {} (roofline model)\n", p.model, p.batch, p.cost_gpu);
  s += fmt::format("budget {} ({} bytes)\n", human_bytes(p.budget_bytes), with_commas(p.budget_bytes));
  const double base_ms = p.baseline.time.total_ms;
  s += fmt::format("keep everything: peak {}, step {:.1f} ms -> {}\n", human_bytes(p.baseline.peak_bytes), base_ms,
                   p.baseline.feasible ? "fits" : "does not fit");
  if (p.feasible) {
    const Evaluation& e = p.chosen.eval;
    s += fmt::format("plan: {}{} -- peak {} ({} free), step {:.1f} ms ({:+.1f}%), micro-batch {}\n", p.strategy,
                     p.chosen.note.empty() ? "" : " (" + p.chosen.note + ")", human_bytes(e.peak_bytes),
                     human_bytes(p.budget_bytes - e.peak_bytes), e.time.total_ms, overhead_pct(e.time.total_ms, base_ms), e.micro_batch);
  } else {
    s += fmt::format("no plan fits: the smallest peak reached is {} ({}), {} over the budget\n", human_bytes(p.smallest_peak_bytes),
                     p.smallest_peak_strategy, human_bytes(p.smallest_peak_bytes - p.budget_bytes));
  }
  size_t w = 20;
  for (const StrategyResult& r : p.alternatives) w = std::max(w, r.name.size());
  s += fmt::format("\n{:<{}} {:>4}  {:>11}  {:>10}  {:>9}  {}\n", "strategy", w, "fits", "peak", "step (ms)", "overhead", "what");
  for (const StrategyResult& r : p.alternatives) {
    if (!r.applicable) {
      s += fmt::format("{:<{}} {:>4}  {:>11}  {:>10}  {:>9}  {}\n", r.name, w, "-", "-", "-", "-", r.note);
      continue;
    }
    s += fmt::format("{:<{}} {:>4}  {:>11}  {:>10.1f}  {:>8.1f}%  {}\n", r.name, w, r.eval.feasible ? "yes" : "no",
                     human_bytes(r.eval.peak_bytes), r.eval.time.total_ms, overhead_pct(r.eval.time.total_ms, base_ms), r.note);
  }
  if (!p.numerics.empty()) {
    s += "\nchanges numerics, not applied:\n";
    for (const NumericsOption& n : p.numerics) {
      if (!n.feasible) {
        s += fmt::format("  {:<9} does not fit even with accumulation or checkpointing (keep everything: {})\n", n.name,
                         human_bytes(n.peak_bytes));
        continue;
      }
      s += fmt::format("  {:<9} would also fit{}: peak {}, step {:.1f} ms ({:+.1f}%)\n", n.name,
                       n.with == "none" ? "" : " with " + n.with, human_bytes(n.peak_bytes), n.step_time_ms,
                       overhead_pct(n.step_time_ms, base_ms));
    }
  }
  if (p.feasible) {
    std::vector<std::string> rec = runs_of(p, "recompute"), off = runs_of(p, "offload");
    if (!rec.empty()) {
      s += fmt::format("\nrecomputed in the backward ({} segments):\n", p.chosen.candidate.plan.checkpoints.size());
      for (const std::string& r : rec) s += "  " + r + "\n";
    }
    if (!off.empty()) {
      s += fmt::format("\nsaved activations offloaded to host ({} layers, {} each way per step):\n", p.chosen.candidate.plan.offload.size(),
                       human_bytes(p.chosen.eval.time.transfer_bytes / 2));
      for (const std::string& r : off) s += "  " + r + "\n";
    }
    if (p.chosen.single_tensor_optimizer) s += "\noptimizer: the single-tensor implementation (foreach=False), same numerics\n";
    if (!p.chosen.candidate.plan.no_conv_workspace.empty()) {
      s += fmt::format("\nconvolutions with a workspace-free algorithm: {}\n", p.chosen.candidate.plan.no_conv_workspace.size());
    }
  }
  return s;
}

std::string plan_json(const Plan& p) {
  nlohmann::ordered_json j;
  j["feasible"] = p.feasible;
  j["strategy"] = p.strategy;
  j["budget_bytes"] = p.budget_bytes;
  j["peak_bytes"] = p.feasible ? p.chosen.eval.peak_bytes : p.smallest_peak_bytes;
  j["step_time_ms"] = p.feasible ? p.chosen.eval.time.total_ms : 0.0;
  j["baseline_step_time_ms"] = p.baseline.time.total_ms;
  j["overhead_pct"] = p.feasible ? overhead_pct(p.chosen.eval.time.total_ms, p.baseline.time.total_ms) : 0.0;
  j["micro_batch"] = p.feasible ? p.chosen.eval.micro_batch : p.batch;
  j["model"] = p.model;
  j["batch"] = p.batch;
  j["cost_gpu"] = p.cost_gpu;
  j["baseline_peak_bytes"] = p.baseline.peak_bytes;
  if (!p.feasible) {
    j["smallest_peak_bytes"] = p.smallest_peak_bytes;
    j["smallest_peak_strategy"] = p.smallest_peak_strategy;
  } else {
    j["time"] = time_json(p.chosen.eval.time);
    j["note"] = p.chosen.note;
  }
  nlohmann::ordered_json d;
  d["micro_batch"] = p.feasible ? p.chosen.eval.micro_batch : p.batch;
  d["micro_batches"] = p.feasible ? p.chosen.eval.micro_batches : 1;
  d["optimizer_foreach"] = p.foreach;
  nlohmann::ordered_json segs = nlohmann::ordered_json::array();
  if (p.feasible) {
    for (const std::string& r : runs_of(p, "recompute")) segs.push_back(r);
  }
  d["recomputed_runs"] = segs;
  // Nesting is containment: what plan.apply realises with nested checkpoint calls.
  d["checkpoint_regions"] = p.checkpoint_regions;
  d["checkpoint_impl"] = checkpoint_impl_name(p.run.plan.checkpoint_impl);
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (const LayerDecision& l : p.decisions) {
    nlohmann::ordered_json x;
    x["layer"] = l.layer;
    x["action"] = l.action;
    if (!l.conv_algorithm.empty()) x["conv_algorithm"] = l.conv_algorithm;
    layers.push_back(x);
  }
  d["layers"] = layers;
  j["decisions"] = d;
  nlohmann::ordered_json alts = nlohmann::ordered_json::array();
  for (const StrategyResult& r : p.alternatives) {
    nlohmann::ordered_json a;
    a["strategy"] = r.name;
    a["applicable"] = r.applicable;
    a["feasible"] = r.applicable && r.eval.feasible;
    a["peak_bytes"] = r.applicable ? r.eval.peak_bytes : 0;
    a["step_time_ms"] = r.applicable ? r.eval.time.total_ms : 0.0;
    a["overhead_pct"] = r.applicable ? overhead_pct(r.eval.time.total_ms, p.baseline.time.total_ms) : 0.0;
    a["micro_batch"] = r.applicable ? r.eval.micro_batch : p.batch;
    a["note"] = r.note;
    alts.push_back(a);
  }
  j["alternatives"] = alts;
  nlohmann::ordered_json nums = nlohmann::ordered_json::array();
  for (const NumericsOption& n : p.numerics) {
    nlohmann::ordered_json x;
    x["precision"] = n.name;
    x["feasible"] = n.feasible;
    x["peak_bytes"] = n.peak_bytes;
    x["step_time_ms"] = n.step_time_ms;
    x["with"] = n.with;
    nums.push_back(x);
  }
  j["numerics_alternatives"] = nums;
  j["simulations"] = p.evaluations;
  return j.dump(2) + "\n";
}

}  // namespace headroom
