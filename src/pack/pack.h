// pack: several models on one GPU. Pipeline (pack()):
//   load       each model's graph at the batch and its inference peak (estimate(), mode inference);
//   layers     the weight-owning layers of each model and their configuration keys (pack/layers.h);
//   identical  layers whose weights are bit-identical (files that carry their weights): shared for
//              free, reported apart (pack/identical.h);
//   plan       the merge plan: groups of identical layers across models, greedy order, savings
//              curve, per-model layer-memory distribution (pack/merge_plan.h);
//   residency  with a GPU: which models fit together, per sharing choice (pack/sharing.h: none,
//              free sharing only, free sharing + the merge plan);
//   simulate   with a workload: requests served with weight swapping, per eviction policy and
//              sharing choice (pack/swap_sim.h).
//
// Residency rule. A set of models is resident together when
//     CUDA context + reserved peak of the set's program <= usable memory
// where the set's program (pack/set_program.h) is what one serving process holding the set runs:
// the set's weights (each pool of shared layers once, pack/sharing.h), then one inference request
// per model in set order, on the caching-allocator model estimate uses (estimate/device_memory.h:
// block rounding, segments, caching, one cuBLAS handle workspace). One model executes at a time
// (GEMEL and Clockwork time-share the GPU) and each request's buffers are freed before the next, so
// the allocator reuses them. A set whose replay runs out of memory does not fit; usable memory is
// memory less the margin, as estimate computes it. A set of one is the model's own program, so a
// one-model set fits exactly when `estimate --mode infer` says it fits.
// "All together" tests every model; the greedy set starts empty and repeatedly adds the model that
// raises the total least (ties: lowest index) while the set fits.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/weight_data.h"
#include "pack/identical.h"
#include "pack/layers.h"
#include "pack/merge_plan.h"
#include "pack/sharing.h"
#include "pack/swap_sim.h"
#include "pack/workload.h"
#include "sim/device_catalog.h"
#include "util/error.h"

namespace headroom {

// A model at one batch size, for inference.
struct LoadedModel {
  Graph graph;
  int64_t inference_peak_bytes = 0;  // exact bytes, what estimate() reports in inference mode
  // The weights' values, by the graph's weight names, when the source has them (an ONNX file
  // read with onnx_weights.h); none for built-in architectures.
  std::optional<WeightData> weights;
};

// Loads MODEL (as the user wrote it) at a batch size; throws InputError. The library's loader
// knows built-in models; the CLI wraps it to route ONNX files to the ONNX frontend.
using ModelLoader = std::function<LoadedModel(const std::string& model, int64_t batch)>;
LoadedModel load_builtin_model(const std::string& spec, int64_t batch);
// The inference peak of an already built graph (an imported file), computed as estimate() does.
LoadedModel loaded_from_graph(Graph g);

// Achieved fraction of a host link's theoretical per-direction bandwidth for pinned copies: the
// time model's (cost/cost_constants.h; docs/pack.md).
inline constexpr double kHostLinkEfficiency = CostConstants{}.host_link_efficiency;
// The host link assumed without a catalog GPU: PCIe 3.0 x16.
inline constexpr double kDefaultHostLinkBytesPerS = 15.75e9;

struct PackOptions {
  std::vector<std::string> models;
  int64_t batch = 1;
  std::string gpu;                    // catalog name; "" for none
  std::optional<int64_t> gpu_memory;  // overrides the catalog's memory
  std::optional<Workload> workload;
  // --merged-groups N: the merges counted by "free + merges" (residency, swap simulation) are the
  // first N groups of the greedy order only, the prefix a joint retraining kept (headroom.joint_train
  // backs off by shortening the prefix). Unset: every group. The plan itself is reported whole.
  std::optional<int32_t> merged_groups;
  // Fraction of GPU memory kept free, as estimate's --margin: a set fits when its total is at most
  // memory x (1 - margin). 0 in the library (GpuOptions' default); the CLI's default is estimate's, 5%.
  double margin = 0.0;
};

struct PackModel {
  std::string label;   // as written; a repeated model gets "#2", "#3"
  std::string source;  // as written
  ModelLayers layers;
  int64_t weights_bytes = 0;
  int64_t inference_peak_bytes = 0;  // at PackOptions::batch
  int64_t activation_bytes = 0;      // peak - weights
  // With a GPU (--gpu or --gpu-memory): the model's inference program alone on the caching
  // allocator (device_memory(), as estimate --mode infer replays it).
  int64_t reserved_peak_bytes = 0;   // torch.cuda.max_memory_reserved
  int64_t device_need_bytes = 0;     // reserved peak - weights (alone)
  bool allocator_oom = false;        // the replay alone ran out of memory
};

struct ResidentSet {
  std::vector<int32_t> models;  // indices, in the order added
  int64_t weights_bytes = 0;     // exact, each pool once (pack/sharing.h)
  int64_t activation_bytes = 0;  // the set program's reserved peak - weights_bytes
  int64_t total_bytes = 0;       // context + the set program's reserved peak
  bool fits = false;
};

struct Residency {
  std::string gpu;  // catalog name or "custom"
  int64_t memory_bytes = 0;
  double margin = 0.0;
  int64_t usable_bytes = 0;  // memory less the margin, as estimate's DeviceMemory::usable_bytes
  int64_t context_bytes = 0;
  // unshared: no sharing; free: bit-identical layers only; shared: free sharing + the merge plan.
  ResidentSet all_unshared, all_free, all_shared;
  ResidentSet greedy_unshared, greedy_free, greedy_shared;
  const ResidentSet& all(Sharing s) const;
  const ResidentSet& greedy(Sharing s) const;
};

struct SimulatedModel {
  std::string label;
  int64_t batch = 1;
  double exec_s = 0;
  std::string exec_source;  // "workload" or "roofline on <gpu>"
  double latency_target_s = 0;
  int64_t requests = 0;
  int64_t activation_bytes = 0;  // at this batch: exact inference peak - weights
  // Its inference program at this batch replayed alone on the caching allocator of the simulated
  // GPU memory: reserved peak - weights. 0 when the workload gives weights_capacity (no replay).
  int64_t device_need_bytes = 0;
};

struct SimulationSetup {
  int64_t memory_bytes = 0;           // 0 when weights_capacity was given
  int64_t context_bytes = 0;
  int64_t activation_reserve_bytes = 0;  // the largest device_need_bytes; 0 with weights_capacity
  int64_t weights_capacity_bytes = 0;
  LoadCostModel load;
  std::string bandwidth_source;
  double window_s = 0;
  uint64_t seed = 0;
  std::vector<SimulatedModel> models;
  std::vector<std::string> not_simulated;  // MODEL arguments the workload does not name
};

struct SimulationRun {
  EvictionPolicy policy = EvictionPolicy::Lru;
  Sharing sharing = Sharing::None;
  SwapResult result;
};

struct PackReport {
  PackOptions options;
  std::vector<PackModel> models;
  MergePlan plan;
  int32_t merged_groups = 0;               // the prefix of plan.groups that "merged" counts
  IdenticalPlan identical;                 // free sharing of bit-identical layers
  std::optional<Residency> residency;      // with a GPU
  std::optional<SimulationSetup> setup;    // with a workload
  std::vector<SimulationRun> runs;         // policy-major, then kSharingChoices order
};

// The plan restricted to its first r.merged_groups groups (what the "merged" choice shares).
MergePlan accepted_merges(const PackReport& r);

Result<PackReport> pack(const PackOptions& options, const ModelLoader& loader = load_builtin_model);

// Execution time of one inference of g on a GPU: the forward of every model-stage op on the time
// model that estimate and plan use (cost/cost_model.h: the dtype's peak, launch cost).
// `efficiency` (the workload's exec_efficiency), when given, replaces both the compute and the
// memory efficiency of CostConstants.
double roofline_seconds(const Graph& g, const GpuSpec& gpu, std::optional<double> efficiency);

}  // namespace headroom
