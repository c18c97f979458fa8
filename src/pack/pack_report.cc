#include "pack/pack_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "util/format.h"

namespace headroom {
namespace {

using ojson = nlohmann::ordered_json;

std::string ms(int64_t ns) { return fmt::format("{:.1f} ms", static_cast<double>(ns) * 1e-6); }

std::string pct_label(double f) { return fmt::format("{:.0f}%", f * 100); }

std::string names_of(const PackReport& r, const std::vector<int32_t>& set) {
  std::string s;
  for (int32_t m : set) s += (s.empty() ? "" : ", ") + r.models[static_cast<size_t>(m)].label;
  return s.empty() ? "none" : s;
}

// "conv2d [256,64,1,1]": the kind and the shape of its first weight, from the key.
std::string short_config(const MergeGroup& g) {
  std::string k = g.config;
  size_t bar = k.find('|');
  std::string kind = k.substr(0, bar);
  if (bar == std::string::npos) return kind;
  size_t lb = k.find('[', bar), rb = k.find(']', bar);
  return lb == std::string::npos ? kind : kind + " " + k.substr(lb, rb - lb + 1);
}

std::string members_text(const PackReport& r, const MergeGroup& g) {
  std::string s;
  for (const GroupMember& mb : g.members) {
    const PackModel& m = r.models[static_cast<size_t>(mb.model)];
    s += (s.empty() ? "" : ", ") + m.label + ":" + m.layers.layers[static_cast<size_t>(mb.layer)].name;
  }
  return s;
}

std::string identical_members_text(const PackReport& r, const IdenticalGroup& g) {
  std::string s;
  for (const IdenticalMember& mb : g.members) {
    const PackModel& m = r.models[static_cast<size_t>(mb.model)];
    s += (s.empty() ? "" : ", ") + m.label + ":" + m.layers.layers[static_cast<size_t>(mb.layer)].name;
  }
  return s;
}

// The free part: which models could be checked, and the groups of bit-identical layers.
std::string identical_text(const PackReport& r) {
  const IdenticalPlan& id = r.identical;
  std::string s = "\nidentical weights (bit-identical layers share one copy for free, without retraining)\n";
  size_t w = 16;
  for (const PackModel& m : r.models) w = std::max(w, m.label.size());
  for (size_t i = 0; i < r.models.size(); ++i) {
    s += fmt::format("  {:<{}} {}\n", r.models[i].label, w, weight_check_text(id.checks[i]));
  }
  int64_t layers = 0;
  for (const IdenticalGroup& g : id.groups) layers += static_cast<int64_t>(g.members.size());
  s += fmt::format("  {} groups of bit-identical layers ({} layers), saving {}\n", id.groups.size(), layers,
                   human_bytes(id.saved_bytes));
  size_t shown = std::min<size_t>(id.groups.size(), 10);
  if (shown > 0) {
    s += fmt::format("  {:>3} {:>10} {:>6}  {:<14} {}\n", "#", "saved", "layers", "kind", "members");
    for (size_t i = 0; i < shown; ++i) {
      const IdenticalGroup& g = id.groups[i];
      s += fmt::format("  {:>3} {:>10} {:>6}  {:<14} {}\n", i + 1, human_bytes(g.bytes_saved), g.members.size(),
                       op_kind_name(g.kind), identical_members_text(r, g));
    }
    if (shown < id.groups.size()) s += fmt::format("  and {} more (--json has them all)\n", id.groups.size() - shown);
  }
  return s;
}

ojson set_json(const PackReport& r, const ResidentSet& s) {
  ojson j;
  ojson names = ojson::array();
  for (int32_t m : s.models) names.push_back(r.models[static_cast<size_t>(m)].label);
  j["models"] = names;
  j["weights_bytes"] = s.weights_bytes;
  j["activation_bytes"] = s.activation_bytes;
  j["total_bytes"] = s.total_bytes;
  j["fits"] = s.fits;
  return j;
}

ojson stats_json(const SwapResult& res) {
  ojson j;
  ojson models = ojson::array();
  for (const SwapModelStats& s : res.models) {
    ojson m;
    m["model"] = s.name;
    m["requests"] = s.requests;
    m["finished_in_window"] = s.finished_in_window;
    m["throughput_rps"] = s.throughput_rps;
    m["p50_latency_ms"] = static_cast<double>(s.p50_ns) * 1e-6;
    m["p95_latency_ms"] = static_cast<double>(s.p95_ns) * 1e-6;
    m["p99_latency_ms"] = static_cast<double>(s.p99_ns) * 1e-6;
    m["max_latency_ms"] = static_cast<double>(s.max_ns) * 1e-6;
    m["deadline_misses"] = s.deadline_misses;
    m["loads"] = s.loads;
    m["bytes_moved"] = s.bytes_moved;
    m["load_wait_ms"] = static_cast<double>(s.load_wait_ns) * 1e-6;
    models.push_back(m);
  }
  j["models"] = models;
  j["bytes_moved"] = res.bytes_moved;
  j["load_wait_ms"] = static_cast<double>(res.load_wait_ns) * 1e-6;
  j["exec_ms"] = static_cast<double>(res.exec_ns) * 1e-6;
  j["makespan_ms"] = static_cast<double>(res.makespan_ns) * 1e-6;
  j["evictions"] = res.evictions;
  return j;
}

// With --merged-groups: which merges "merged" counts (nothing when it counts the whole plan).
std::string merged_prefix_text(const PackReport& r) {
  if (static_cast<size_t>(r.merged_groups) == r.plan.groups.size()) return "";
  return fmt::format("  merges counted: the first {} of {} groups (--merged-groups), saving {}\n", r.merged_groups,
                     r.plan.groups.size(), human_bytes(accepted_merges(r).saved_bytes));
}

}  // namespace

std::string pack_text(const PackReport& r) {
  const MergePlan& p = r.plan;
  std::string s = "headroom pack: ";
  for (size_t i = 0; i < r.models.size(); ++i) s += (i ? ", " : "") + r.models[i].label;
  s += fmt::format(" | batch {} | inference, fp32", r.options.batch);
  if (r.residency) s += fmt::format(" | gpu {} ({})", r.residency->gpu, human_bytes(r.residency->memory_bytes));
  s += "\n\n";

  size_t w = 16;
  for (const PackModel& m : r.models) w = std::max(w, m.label.size());
  s += fmt::format("{:<{}} {:>10} {:>7} {:>10}  {:>7} {:>7} {:>7}  {:>14}\n", "model", w, "weights", "layers",
                   "other", "top 1%", "10%", "50%", "inference peak");
  for (size_t i = 0; i < r.models.size(); ++i) {
    const PackModel& m = r.models[i];
    const LayerDistribution& d = p.distributions[i];
    auto share = [&](size_t k) { return fmt::format("{:.1f}%", 100 * d.top[k].share); };
    s += fmt::format("{:<{}} {:>10} {:>7} {:>10}  {:>7} {:>7} {:>7}  {:>14}\n", m.label, w, human_bytes(m.weights_bytes),
                     d.layers, human_bytes(m.layers.other_bytes), share(0), share(1), share(2),
                     human_bytes(m.inference_peak_bytes));
  }
  s += "(top N%: share of the layer memory held by the largest N% of layers; other: weights outside layers)\n\n";

  const IdenticalPlan& id = r.identical;
  s += fmt::format("weights without sharing   {:>10}\n", human_bytes(p.unshared_bytes));
  s += fmt::format("with free sharing only    {:>10}   saved {} ({}): bit-identical layers, no retraining\n",
                   human_bytes(id.shared_bytes), human_bytes(id.saved_bytes), percent(id.saved_bytes, id.unshared_bytes));
  s += fmt::format("with every merge          {:>10}   saved {} ({}): equal configurations, needs joint retraining\n",
                   human_bytes(p.shared_bytes),
                   human_bytes(p.saved_bytes), percent(p.saved_bytes, p.unshared_bytes));
  int64_t merged_layers = 0;
  for (const MergeGroup& g : p.groups) merged_layers += static_cast<int64_t>(g.members.size());
  s += fmt::format("candidates: {} groups of identical layers ({} layers)", p.groups.size(), merged_layers);
  if (p.saved_bytes > 0) {
    std::string fr, n;
    for (const SavingThreshold& t : p.thresholds) {
      fr += (fr.empty() ? "" : "/") + fmt::format("{:.0f}", t.fraction * 100);
      n += (n.empty() ? "" : " / ") + std::to_string(t.groups);
    }
    s += fmt::format("\ngreedy groups to reach {}% of the saving: {}", fr, n);
  }
  s += "\n";

  if (!p.groups.empty()) {
    s += "\nsavings curve (greedy, largest first)\n";
    s += fmt::format("  {:>6} {:>12} {:>9}\n", "groups", "saved", "of total");
    std::vector<size_t> points;
    for (size_t n : {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}) {
      if (n < p.groups.size()) points.push_back(n);
    }
    points.push_back(p.groups.size());
    for (size_t n : points) {
      int64_t c = p.cumulative_saved[n - 1];
      s += fmt::format("  {:>6} {:>12} {:>9}\n", n, human_bytes(c), percent(c, p.saved_bytes));
    }
    size_t shown = std::min<size_t>(p.groups.size(), 10);
    s += fmt::format("\nlargest merges ({} of {}; --json has the whole plan)\n", shown, p.groups.size());
    s += fmt::format("  {:>3} {:>10} {:>6}  {:<26} {}\n", "#", "saved", "models", "layer", "members");
    for (size_t i = 0; i < shown; ++i) {
      const MergeGroup& g = p.groups[i];
      s += fmt::format("  {:>3} {:>10} {:>6}  {:<26} {}\n", i + 1, human_bytes(g.bytes_saved), g.members.size(),
                       short_config(g), members_text(r, g));
    }
  }

  s += identical_text(r);

  if (r.residency) {
    const Residency& rs = *r.residency;
    const std::string usable =
        rs.margin > 0 ? fmt::format("; {} usable with a {:g}% margin", human_bytes(rs.usable_bytes), 100 * rs.margin) : "";
    s += fmt::format("\nresidency on {} ({}{}): context {} + the reserved peak of the set's program (its weights, "
                     "a pool once, then one request per model on one caching allocator)\n",
                     rs.gpu, human_bytes(rs.memory_bytes), usable, human_bytes(rs.context_bytes));
    auto line = [&](const char* what, const ResidentSet& all, const ResidentSet& greedy) {
      std::string out = fmt::format("  {:<13} all {} together: {} ({})", what, r.models.size(), human_bytes(all.total_bytes),
                                    all.fits ? "fits" : "does not fit");
      if (!all.fits) {
        out += fmt::format("; greedy set: {} ({})", names_of(r, greedy.models),
                           greedy.models.empty() ? "none fits" : human_bytes(greedy.total_bytes));
      }
      return out + "\n";
    };
    s += line("no sharing", rs.all_unshared, rs.greedy_unshared);
    s += line("free only", rs.all_free, rs.greedy_free);
    s += line("free + merges", rs.all_shared, rs.greedy_shared);
    s += "  (free: bit-identical layers, no retraining; merges: the merge plan, joint retraining; a layer "
         "counts once)\n";
    s += merged_prefix_text(r);
  }

  if (r.setup) {
    const SimulationSetup& st = *r.setup;
    s += fmt::format("\nswap simulation: window {} s, seed {}, weight capacity {}", st.window_s, st.seed,
                     human_bytes(st.weights_capacity_bytes));
    if (st.memory_bytes > 0) {
      s += fmt::format(" (= {} - context {} - largest device need {})", human_bytes(st.memory_bytes),
                       human_bytes(st.context_bytes), human_bytes(st.activation_reserve_bytes));
    }
    s += fmt::format("\nload = {:.2f} ms + {:.1f} us/tensor + bytes / {:.2f} GB/s ({}, {})\n", st.load.fixed_s * 1e3,
                     st.load.per_tensor_s * 1e6,
                     st.load.bandwidth_bytes_per_s * (st.load.pinned ? 1.0 : st.load.pageable_factor) * 1e-9,
                     st.load.pinned ? "pinned" : fmt::format("pageable x {}", st.load.pageable_factor), st.bandwidth_source);
    for (const SimulatedModel& m : st.models) {
      s += fmt::format("  {:<16} batch {:<3} exec {:>8} ({})  target {:>8}  requests {}\n", m.label, m.batch,
                       ms(static_cast<int64_t>(m.exec_s * 1e9)), m.exec_source,
                       ms(static_cast<int64_t>(m.latency_target_s * 1e9)), m.requests);
    }
    if (!st.not_simulated.empty()) {
      std::string names;
      for (const std::string& n : st.not_simulated) names += (names.empty() ? "" : ", ") + n;
      s += "  not in the workload: " + names + "\n";
    }
    if (!r.residency) s += merged_prefix_text(r);
    s += fmt::format("\n  {:<7} {:<8} {:<16} {:>8} {:>9} {:>9} {:>9} {:>7} {:>6} {:>10} {:>10}\n", "policy", "sharing",
                     "model", "req/s", "p50", "p95", "p99", "misses", "loads", "moved", "load wait");
    for (const SimulationRun& run : r.runs) {
      for (const SwapModelStats& m : run.result.models) {
        s += fmt::format("  {:<7} {:<8} {:<16} {:>8.2f} {:>9} {:>9} {:>9} {:>7} {:>6} {:>10} {:>10}\n",
                         eviction_policy_name(run.policy), sharing_label(run.sharing), m.name, m.throughput_rps,
                         ms(m.p50_ns), ms(m.p95_ns), ms(m.p99_ns), m.deadline_misses, m.loads,
                         human_bytes(m.bytes_moved), ms(m.load_wait_ns));
      }
    }
  }
  return s;
}

std::string pack_json(const PackReport& r) {
  const MergePlan& p = r.plan;
  ojson j;
  j["batch"] = r.options.batch;
  j["mode"] = "infer";
  j["precision"] = "fp32";
  j["gpu"] = r.residency ? ojson(r.residency->gpu) : ojson(nullptr);
  ojson models = ojson::array();
  for (size_t i = 0; i < r.models.size(); ++i) {
    const PackModel& m = r.models[i];
    ojson o;
    o["model"] = m.label;
    o["source"] = m.source;
    o["weights_bytes"] = m.weights_bytes;
    o["layer_bytes"] = m.layers.layer_bytes;
    o["other_weights_bytes"] = m.layers.other_bytes;
    o["layers"] = m.layers.layers.size();
    o["inference_peak_bytes"] = m.inference_peak_bytes;
    o["activation_bytes"] = m.activation_bytes;
    if (r.residency) {
      o["reserved_peak_bytes"] = m.reserved_peak_bytes;
      o["device_need_bytes"] = m.device_need_bytes;
      o["allocator_oom"] = m.allocator_oom;
    }
    ojson dist = ojson::array();
    for (const LayerDistribution::Top& t : p.distributions[i].top) {
      dist.push_back({{"fraction_of_layers", t.fraction}, {"layers", t.count}, {"bytes", t.bytes}, {"share", t.share}});
    }
    o["largest_layers"] = dist;
    const WeightCheck& c = r.identical.checks[i];
    o["weight_values"] = {{"status", std::string(weight_check_name(c.status))},
                          {"hashed_layers", c.hashed_layers},
                          {"missing_tensors", c.missing_tensors},
                          {"note", weight_check_text(c)}};
    models.push_back(o);
  }
  j["models"] = models;
  j["unshared_weights_bytes"] = p.unshared_bytes;
  j["shared_weights_bytes"] = p.shared_bytes;
  j["saved_bytes"] = p.saved_bytes;
  ojson th = ojson::object();
  for (const SavingThreshold& t : p.thresholds) th[pct_label(t.fraction)] = t.groups;
  j["groups_to_reach"] = th;
  // What "shared" (free + merges) counts in residency and simulation: the greedy prefix kept.
  j["merged_groups"] = r.merged_groups;
  j["merged_saved_bytes"] = accepted_merges(r).saved_bytes;
  ojson groups = ojson::array();
  for (size_t i = 0; i < p.groups.size(); ++i) {
    const MergeGroup& g = p.groups[i];
    ojson o;
    o["order"] = i + 1;
    o["kind"] = std::string(op_kind_name(g.kind));
    o["config"] = g.config;
    o["occurrence"] = g.occurrence;
    o["layer_bytes"] = g.layer_bytes;
    o["bytes_saved"] = g.bytes_saved;
    o["cumulative_saved_bytes"] = p.cumulative_saved[i];
    ojson mem = ojson::array();
    for (const GroupMember& mb : g.members) {
      const PackModel& m = r.models[static_cast<size_t>(mb.model)];
      mem.push_back({{"model", m.label}, {"layer", m.layers.layers[static_cast<size_t>(mb.layer)].name}});
    }
    o["members"] = mem;
    groups.push_back(o);
  }
  j["groups"] = groups;
  const IdenticalPlan& id = r.identical;
  j["identical_saved_bytes"] = id.saved_bytes;
  j["identical_shared_weights_bytes"] = id.shared_bytes;
  ojson igroups = ojson::array();
  for (const IdenticalGroup& g : id.groups) {
    ojson o;
    o["kind"] = std::string(op_kind_name(g.kind));
    o["layer_bytes"] = g.layer_bytes;
    o["bytes_saved"] = g.bytes_saved;
    ojson mem = ojson::array();
    for (const IdenticalMember& mb : g.members) {
      const PackModel& m = r.models[static_cast<size_t>(mb.model)];
      mem.push_back({{"model", m.label}, {"layer", m.layers.layers[static_cast<size_t>(mb.layer)].name}});
    }
    o["members"] = mem;
    igroups.push_back(o);
  }
  j["identical_groups"] = igroups;
  if (r.residency) {
    const Residency& rs = *r.residency;
    ojson o;
    o["gpu"] = rs.gpu;
    o["memory_bytes"] = rs.memory_bytes;
    o["margin"] = rs.margin;
    o["usable_bytes"] = rs.usable_bytes;
    o["context_bytes"] = rs.context_bytes;
    o["all_unshared"] = set_json(r, rs.all_unshared);
    o["all_free"] = set_json(r, rs.all_free);
    o["all_shared"] = set_json(r, rs.all_shared);
    o["greedy_unshared"] = set_json(r, rs.greedy_unshared);
    o["greedy_free"] = set_json(r, rs.greedy_free);
    o["greedy_shared"] = set_json(r, rs.greedy_shared);
    j["residency"] = o;
  }
  if (r.setup) {
    const SimulationSetup& st = *r.setup;
    ojson o;
    o["window_s"] = st.window_s;
    o["seed"] = st.seed;
    o["memory_bytes"] = st.memory_bytes;
    o["context_bytes"] = st.context_bytes;
    o["activation_reserve_bytes"] = st.activation_reserve_bytes;
    o["weights_capacity_bytes"] = st.weights_capacity_bytes;
    o["load"] = {{"fixed_ms", st.load.fixed_s * 1e3},
                 {"per_tensor_us", st.load.per_tensor_s * 1e6},
                 {"bandwidth_gb_per_s", st.load.bandwidth_bytes_per_s * 1e-9},
                 {"bandwidth_source", st.bandwidth_source},
                 {"pinned", st.load.pinned},
                 {"pageable_factor", st.load.pageable_factor}};
    ojson ms_ = ojson::array();
    for (const SimulatedModel& m : st.models) {
      ms_.push_back({{"model", m.label},
                     {"batch", m.batch},
                     {"exec_ms", m.exec_s * 1e3},
                     {"exec_source", m.exec_source},
                     {"latency_target_ms", m.latency_target_s * 1e3},
                     {"requests", m.requests},
                     {"activation_bytes", m.activation_bytes},
                     {"device_need_bytes", m.device_need_bytes}});
    }
    o["models"] = ms_;
    o["not_simulated"] = st.not_simulated;
    j["simulation_setup"] = o;
    ojson sim = ojson::object();
    for (const SimulationRun& run : r.runs) {
      sim[std::string(eviction_policy_name(run.policy))][std::string(sharing_key(run.sharing))] = stats_json(run.result);
    }
    j["simulation"] = sim;
  }
  return j.dump(2) + "\n";
}

}  // namespace headroom
