#include "pack/pack.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "cost/cost_model.h"
#include "estimate/device_memory.h"
#include "estimate/estimate.h"
#include "pack/set_program.h"
#include "schedule/build_program.h"
#include "sim/simulate.h"
#include "util/checked.h"

namespace headroom {
namespace {

constexpr int64_t kMaxSimulatedRequests = 5'000'000;

EstimateOptions inference_options(const std::string& spec, int64_t batch) {
  EstimateOptions o;
  o.model = spec;
  o.batch = batch;
  o.mode = RunMode::Inference;
  o.top_tensors = 0;
  return o;
}

// What residency needs to replay a candidate set: the models' inference programs at the batch
// and the GPU options estimate would use.
struct SetReplay {
  const std::vector<PackModel>& models;
  const std::vector<ModelLayers>& layers;
  const std::vector<Program>& programs;
  const MergePlan& plan;
  const IdenticalPlan& identical;
  const GpuOptions& gpu;
};

// A set's total is the reserved peak of its own program (pack/set_program.h: the set's weights
// once per pool, then one request per model, on one caching allocator) plus the context; its
// weights are the exact bytes of the sharing rule, and activation_bytes the rest of the reserved
// peak.
ResidentSet make_set(std::vector<int32_t> members, Sharing sharing, const SetReplay& in, const Residency& r) {
  ResidentSet s;
  s.models = std::move(members);
  s.weights_bytes = weights_with_sharing(in.layers, in.plan, in.identical, sharing, s.models);
  if (s.models.empty()) {
    s.total_bytes = r.context_bytes;
    s.fits = s.total_bytes <= r.usable_bytes;
    return s;
  }
  const std::vector<SharedPool> pools = shared_pools(in.layers, in.plan, in.identical, sharing, s.models);
  const std::vector<std::set<std::string>> borrowed = borrowed_weights(in.layers, pools, s.models);
  std::vector<SetMember> set;
  for (size_t k = 0; k < s.models.size(); ++k) {
    const auto m = static_cast<size_t>(s.models[k]);
    set.push_back({&in.programs[m], in.models[m].label, borrowed[k]});
  }
  const DeviceMemory d = device_memory(resident_set_program(set), in.gpu);
  s.total_bytes = d.device_total_bytes;
  s.activation_bytes = std::max<int64_t>(0, d.reserved_peak_bytes - s.weights_bytes);
  s.fits = d.fits;
  return s;
}

Residency residency(const SetReplay& in, const std::string& gpu_name, const DeviceMemory& device) {
  Residency r;
  r.gpu = gpu_name;
  r.memory_bytes = device.capacity_bytes;
  r.usable_bytes = device.usable_bytes;
  r.context_bytes = device.context_bytes;
  const std::vector<PackModel>& models = in.models;
  std::vector<int32_t> all;
  for (size_t i = 0; i < models.size(); ++i) all.push_back(static_cast<int32_t>(i));
  for (Sharing sharing : kSharingChoices) {
    ResidentSet& all_set = sharing == Sharing::None ? r.all_unshared : sharing == Sharing::Free ? r.all_free : r.all_shared;
    all_set = make_set(all, sharing, in, r);
    std::vector<int32_t> set;
    std::vector<bool> in_set(models.size(), false);
    ResidentSet best = make_set({}, sharing, in, r);
    for (;;) {
      std::optional<ResidentSet> pick;
      for (size_t m = 0; m < models.size(); ++m) {
        if (in_set[m]) continue;
        std::vector<int32_t> trial = set;
        trial.push_back(static_cast<int32_t>(m));
        ResidentSet s = make_set(trial, sharing, in, r);
        if (!pick || s.total_bytes < pick->total_bytes) pick = s;
      }
      if (!pick || !pick->fits) break;
      best = *pick;
      set = best.models;
      in_set[static_cast<size_t>(set.back())] = true;
    }
    best.fits = !best.models.empty();
    (sharing == Sharing::None ? r.greedy_unshared : sharing == Sharing::Free ? r.greedy_free : r.greedy_shared) = best;
  }
  return r;
}

// The model's inference program with the GPU's cuBLAS workspace: the program `estimate --mode
// infer` builds with these GPU options.
Program inference_program(const Graph& g, const GpuOptions& go) {
  EstimateOptions eo;
  eo.mode = RunMode::Inference;
  eo.gpu = go;
  return build_program(g, schedule_options(eo));
}

// The model's program replayed alone on the caching-allocator model: what estimate --mode infer
// replays with these GPU options.
DeviceMemory place_on_device(const Program& p, const GpuOptions& go, PackModel& pm) {
  const DeviceMemory d = device_memory(p, go);
  pm.reserved_peak_bytes = d.reserved_peak_bytes;
  pm.allocator_oom = d.allocator_oom;
  // Weights are never freed in an inference program, so the reserved peak holds them all.
  HEADROOM_CHECK(d.allocator_oom || d.reserved_peak_bytes >= pm.weights_bytes, "reserved peak below the weights");
  pm.device_need_bytes = std::max<int64_t>(0, d.reserved_peak_bytes - pm.weights_bytes);
  return d;
}

std::string label_for(const std::string& model, std::map<std::string, int>& seen) {
  int n = ++seen[model];
  return n == 1 ? model : fmt::format("{}#{}", model, n);
}

// The swap configuration of the simulated models under a sharing choice: a block per pool of the
// simulated models (pack/sharing.h), used once by each model with a layer in it, and each model's
// rest (its weights less its pooled layers); without sharing, one block per model.
SwapConfig swap_config(const PackReport& rep, const MergePlan& merges, const std::vector<ModelLayers>& layers,
                       const std::vector<int32_t>& sim_models, const std::vector<std::vector<int64_t>>& arrivals,
                       Sharing sharing) {
  const SimulationSetup& st = *rep.setup;
  SwapConfig c;
  c.capacity_bytes = st.weights_capacity_bytes;
  c.load = st.load;
  c.window_ns = static_cast<int64_t>(std::llround(st.window_s * 1e9));
  std::vector<int64_t> rest_bytes, rest_tensors;
  for (int32_t m : sim_models) {
    const PackModel& pm = rep.models[static_cast<size_t>(m)];
    int64_t tensors = pm.layers.other_tensors;
    for (const Layer& l : pm.layers.layers) tensors += l.tensors;
    rest_bytes.push_back(pm.weights_bytes);
    rest_tensors.push_back(tensors);
  }
  c.models.resize(sim_models.size());
  std::vector<SharedPool> pools = shared_pools(layers, merges, rep.identical, sharing, sim_models);
  for (size_t pi = 0; pi < pools.size(); ++pi) {
    const SharedPool& p = pools[pi];
    int32_t block = static_cast<int32_t>(c.blocks.size());
    c.blocks.push_back({fmt::format("pool {}", pi + 1), p.layer_bytes, p.tensors});
    for (const IdenticalMember& mb : p.members) {
      // Workload entries name distinct models (workload.h), so a model is one entry.
      size_t u = static_cast<size_t>(std::find(sim_models.begin(), sim_models.end(), mb.model) - sim_models.begin());
      HEADROOM_CHECK(u < sim_models.size(), "a pool member outside the simulated models");
      std::vector<int32_t>& blocks = c.models[u].blocks;
      if (blocks.empty() || blocks.back() != block) blocks.push_back(block);
      rest_bytes[u] -= p.layer_bytes;
      rest_tensors[u] -= p.tensors;
    }
  }
  for (size_t i = 0; i < sim_models.size(); ++i) {
    const SimulatedModel& sm = st.models[i];
    c.models[i].name = sm.label;
    c.models[i].blocks.push_back(static_cast<int32_t>(c.blocks.size()));
    c.blocks.push_back({sm.label + (sharing == Sharing::None ? "" : ":rest"), rest_bytes[i], rest_tensors[i]});
    c.models[i].arrivals_ns = arrivals[i];
    c.models[i].exec_ns = checked_round(sm.exec_s * 1e9, "an execution time in nanoseconds");
    c.models[i].deadline_ns = checked_round(sm.latency_target_s * 1e9, "a latency target in nanoseconds");
  }
  return c;
}

void simulate_workload(const PackOptions& o, const ModelLoader& loader, const GpuSpec* gpu,
                       const std::vector<ModelLayers>& layers, std::map<std::pair<int32_t, int64_t>, LoadedModel>& cache, PackReport& rep) {
  const Workload& w = *o.workload;
  SimulationSetup st;
  st.window_s = w.window_s;
  st.seed = w.seed;

  std::vector<int32_t> sim_models;
  std::vector<bool> named(rep.models.size(), false);
  for (const WorkloadModel& wm : w.models) {
    auto it = std::find_if(rep.models.begin(), rep.models.end(), [&](const PackModel& m) { return m.label == wm.model; });
    if (it == rep.models.end()) {
      std::string labels;
      for (const PackModel& m : rep.models) labels += (labels.empty() ? "" : ", ") + m.label;
      throw InputError(fmt::format("{}: model '{}' is not one of the MODEL arguments ({})", w.origin, wm.model, labels));
    }
    int32_t mi = static_cast<int32_t>(it - rep.models.begin());
    sim_models.push_back(mi);
    named[static_cast<size_t>(mi)] = true;
  }
  for (size_t wi = 0; wi < w.models.size(); ++wi) {
    const WorkloadModel& wm = w.models[wi];
    const int32_t mi = sim_models[wi];
    auto key = std::make_pair(mi, wm.batch);
    if (cache.count(key) == 0) cache.emplace(key, loader(rep.models[static_cast<size_t>(mi)].source, wm.batch));
    const LoadedModel& lm = cache.at(key);
    SimulatedModel sm;
    sm.label = wm.model;
    sm.batch = wm.batch;
    sm.latency_target_s = wm.latency_target_s;
    sm.activation_bytes = lm.inference_peak_bytes - lm.graph.weights_bytes();
    if (wm.exec_s) {
      sm.exec_s = *wm.exec_s;
      sm.exec_source = "workload";
    } else {
      if (gpu == nullptr) {
        throw InputError(fmt::format("{}: model '{}' has no 'exec_ms' and no catalog GPU (--gpu) to estimate it on",
                                     w.origin, wm.model));
      }
      sm.exec_s = roofline_seconds(lm.graph, *gpu, w.exec_efficiency);
      sm.exec_source = "roofline on " + gpu->name;
    }
    st.models.push_back(sm);
  }
  for (size_t i = 0; i < rep.models.size(); ++i) {
    if (!named[i]) st.not_simulated.push_back(rep.models[i].label);
  }

  if (w.weights_capacity) {
    st.weights_capacity_bytes = *w.weights_capacity;
    st.context_bytes = 0;
  } else {
    std::optional<int64_t> mem = w.gpu_memory ? w.gpu_memory : o.gpu_memory;
    if (!mem && gpu) mem = gpu->memory_bytes;
    if (!mem) {
      throw InputError(w.origin + ": the simulation needs GPU memory: give --gpu NAME, or 'gpu_memory' or "
                                  "'weights_capacity' in the workload");
    }
    st.memory_bytes = *mem;
    // One model runs at a time: room for the largest device need among the simulated models, each
    // model's inference program at its batch replayed alone on the caching allocator of this
    // memory (what residency counts per model): reserved peak - weights.
    GpuOptions go;
    go.gpu = o.gpu;
    go.gpu_memory = st.memory_bytes;
    for (size_t wi = 0; wi < w.models.size(); ++wi) {
      SimulatedModel& sm = st.models[wi];
      const LoadedModel& lm = cache.at(std::make_pair(sim_models[wi], sm.batch));
      const DeviceMemory d = device_memory(inference_program(lm.graph, go), go);
      if (d.allocator_oom) {
        throw InputError(fmt::format("{}: model '{}' at batch {} alone runs out of the {} bytes of GPU memory", w.origin,
                                     sm.label, sm.batch, st.memory_bytes));
      }
      sm.device_need_bytes = std::max<int64_t>(0, d.reserved_peak_bytes - lm.graph.weights_bytes());
      // One process serves them all: its context holds what every model loaded, the largest
      // one's (inference contexts differ only by cuDNN; estimate/cuda_context.h).
      st.context_bytes = std::max(st.context_bytes, d.context_bytes);
      st.activation_reserve_bytes = std::max(st.activation_reserve_bytes, sm.device_need_bytes);
    }
    st.weights_capacity_bytes = st.memory_bytes - st.context_bytes - st.activation_reserve_bytes;
    if (st.weights_capacity_bytes <= 0) {
      throw InputError(fmt::format("{}: no memory left for weights: {} bytes of GPU memory - CUDA context {} - largest "
                                   "device need {}",
                                   w.origin, st.memory_bytes, st.context_bytes, st.activation_reserve_bytes));
    }
  }

  LoadCostModel& load = st.load;
  if (w.load.bandwidth_bytes_per_s) {
    load.bandwidth_bytes_per_s = *w.load.bandwidth_bytes_per_s;
    st.bandwidth_source = "workload";
  } else if (gpu && gpu->host_link.bandwidth_bytes_per_s > 0) {
    load.bandwidth_bytes_per_s = gpu->host_link.bandwidth_bytes_per_s * kHostLinkEfficiency;
    st.bandwidth_source = fmt::format("{} {} x {:.2f}", gpu->name, gpu->host_link.kind, kHostLinkEfficiency);
  } else {
    load.bandwidth_bytes_per_s = kDefaultHostLinkBytesPerS * kHostLinkEfficiency;
    st.bandwidth_source = fmt::format("PCIe 3.0 x16 default x {:.2f}", kHostLinkEfficiency);
  }
  if (w.load.fixed_s) load.fixed_s = *w.load.fixed_s;
  if (w.load.per_tensor_s) load.per_tensor_s = *w.load.per_tensor_s;
  if (w.load.pinned) load.pinned = *w.load.pinned;
  if (w.load.pageable_factor) load.pageable_factor = *w.load.pageable_factor;

  // Arrivals: one random stream per workload entry (its position), so the same seed gives the
  // same trace on every run and platform.
  const int64_t window_ns = checked_round(w.window_s * 1e9, "the window in nanoseconds");
  std::vector<std::vector<int64_t>> arrivals;
  int64_t total = 0;
  for (size_t i = 0; i < w.models.size(); ++i) {
    const WorkloadModel& wm = w.models[i];
    double expected = wm.rate ? *wm.rate * w.window_s : wm.fps ? *wm.fps * w.window_s : 0;
    if (expected > static_cast<double>(kMaxSimulatedRequests)) {
      throw InputError(fmt::format("{}: model '{}' would get about {:.0f} requests; at most {} are simulated", w.origin,
                                   wm.model, expected, kMaxSimulatedRequests));
    }
    std::vector<int64_t> a;
    if (wm.rate) {
      a = poisson_arrivals(*wm.rate, window_ns, w.seed, i);
    } else if (wm.fps) {
      a = periodic_arrivals(*wm.fps, window_ns, wm.phase_s);
    } else {
      for (double t : *wm.arrivals_s) {
        int64_t ns = checked_round(t * 1e9, "an arrival time in nanoseconds");
        if (ns < window_ns) a.push_back(ns);
      }
    }
    total += static_cast<int64_t>(a.size());
    st.models[i].requests = static_cast<int64_t>(a.size());
    arrivals.push_back(std::move(a));
  }
  if (total > kMaxSimulatedRequests) {
    throw InputError(fmt::format("{}: {} requests in the window; at most {} are simulated", w.origin, total,
                                 kMaxSimulatedRequests));
  }
  rep.setup = st;
  const MergePlan merges = accepted_merges(rep);
  for (EvictionPolicy p : kEvictionPolicies) {
    for (Sharing sharing : kSharingChoices) {
      SwapConfig c = swap_config(rep, merges, layers, sim_models, arrivals, sharing);
      c.policy = p;
      SimulationRun run;
      run.policy = p;
      run.sharing = sharing;
      run.result = simulate_swaps(c);
      rep.runs.push_back(std::move(run));
    }
  }
}

}  // namespace

const ResidentSet& Residency::all(Sharing s) const {
  return s == Sharing::None ? all_unshared : s == Sharing::Free ? all_free : all_shared;
}

const ResidentSet& Residency::greedy(Sharing s) const {
  return s == Sharing::None ? greedy_unshared : s == Sharing::Free ? greedy_free : greedy_shared;
}

MergePlan accepted_merges(const PackReport& r) {
  MergePlan m = r.plan;
  HEADROOM_CHECK(r.merged_groups >= 0 && static_cast<size_t>(r.merged_groups) <= m.groups.size(), "merged groups");
  m.groups.resize(static_cast<size_t>(r.merged_groups));
  m.cumulative_saved.resize(m.groups.size());
  m.saved_bytes = m.cumulative_saved.empty() ? 0 : m.cumulative_saved.back();
  m.shared_bytes = m.unshared_bytes - m.saved_bytes;
  return m;
}

LoadedModel load_builtin_model(const std::string& spec, int64_t batch) {
  EstimateOptions o = inference_options(spec, batch);
  Result<Estimate> e = estimate(o);
  if (!e.ok()) throw InputError(e.error());
  LoadedModel lm;
  lm.graph = build_graph(o, batch);
  lm.inference_peak_bytes = e.value().peak_bytes;
  return lm;
}

LoadedModel loaded_from_graph(Graph g) {
  EstimateOptions o;
  o.mode = RunMode::Inference;
  Program p = build_program(g, schedule_options(o));
  SimResult sim = simulate(p);
  LoadedModel lm;
  lm.graph = std::move(g);
  lm.inference_peak_bytes = sim.peak.bytes;
  return lm;
}

double roofline_seconds(const Graph& g, const GpuSpec& gpu, std::optional<double> efficiency) {
  CostConstants c;
  if (efficiency) {
    HEADROOM_CHECK(*efficiency > 0 && *efficiency <= 1, "exec efficiency in (0, 1]");
    c.compute_efficiency = c.memory_efficiency = *efficiency;
  }
  const CostModel model(gpu, c);
  double ms = 0;
  for (const Op& op : g.ops) {
    if (op.stage == OpStage::Model) ms += model.op_cost(g, op).forward_ms;
  }
  return ms * 1e-3;
}

Result<PackReport> pack(const PackOptions& o, const ModelLoader& loader) {
  return capture_input_errors([&]() -> PackReport {
    if (o.models.empty()) throw InputError("pack needs at least one MODEL");
    if (o.batch <= 0) throw InputError("batch must be a positive integer, got " + std::to_string(o.batch));
    const GpuSpec* gpu = o.gpu.empty() ? nullptr : &DeviceCatalog::builtin().find(o.gpu);
    PackReport rep;
    rep.options = o;
    std::map<std::string, int> seen;
    std::map<std::pair<int32_t, int64_t>, LoadedModel> cache;  // (model, batch) -> loaded
    std::vector<ModelLayers> layers;
    for (size_t i = 0; i < o.models.size(); ++i) {
      LoadedModel lm = loader(o.models[i], o.batch);
      PackModel pm;
      pm.label = label_for(o.models[i], seen);
      pm.source = o.models[i];
      pm.layers = extract_layers(lm.graph);
      pm.layers.model = pm.label;
      pm.weights_bytes = pm.layers.weights_bytes;
      pm.inference_peak_bytes = lm.inference_peak_bytes;
      HEADROOM_CHECK(pm.inference_peak_bytes >= pm.weights_bytes, "inference peak below the weights");
      pm.activation_bytes = pm.inference_peak_bytes - pm.weights_bytes;
      layers.push_back(pm.layers);
      rep.models.push_back(std::move(pm));
      cache.emplace(std::make_pair(static_cast<int32_t>(i), o.batch), std::move(lm));
    }
    rep.plan = plan_merges(layers);
    rep.merged_groups = static_cast<int32_t>(rep.plan.groups.size());
    if (o.merged_groups) {
      if (!gpu && !o.gpu_memory && !o.workload) {
        throw InputError("--merged-groups applies to residency and the swap simulation: give --gpu, --gpu-memory or "
                         "--workload");
      }
      if (*o.merged_groups < 0 || static_cast<size_t>(*o.merged_groups) > rep.plan.groups.size()) {
        throw InputError(fmt::format("--merged-groups {}: the merge plan has {} groups (0..{})", *o.merged_groups,
                                     rep.plan.groups.size(), rep.plan.groups.size()));
      }
      rep.merged_groups = *o.merged_groups;
    }
    std::vector<const WeightData*> values;
    for (size_t i = 0; i < o.models.size(); ++i) {
      const LoadedModel& lm = cache.at(std::make_pair(static_cast<int32_t>(i), o.batch));
      values.push_back(lm.weights ? &*lm.weights : nullptr);
    }
    rep.identical = find_identical_layers(layers, values);
    if (gpu || o.gpu_memory) {
      GpuOptions go;
      go.gpu = o.gpu;
      go.gpu_memory = o.gpu_memory;
      go.margin = o.margin;
      DeviceMemory device;
      std::vector<Program> programs;
      for (size_t i = 0; i < o.models.size(); ++i) {
        const LoadedModel& lm = cache.at(std::make_pair(static_cast<int32_t>(i), o.batch));
        programs.push_back(inference_program(lm.graph, go));
        device = place_on_device(programs.back(), go, rep.models[i]);
      }
      const MergePlan merges = accepted_merges(rep);
      const SetReplay replay{rep.models, layers, programs, merges, rep.identical, go};
      rep.residency = residency(replay, gpu ? gpu->name : "custom", device);
      rep.residency->margin = o.margin;
    }
    if (o.workload) simulate_workload(o, loader, gpu, layers, cache, rep);
    return rep;
  });
}

}  // namespace headroom
