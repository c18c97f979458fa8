// Swap simulation: several models served by one GPU whose memory holds only some of their weights
// at once, so a request for a model that is not resident first loads its weights over the host
// link, evicting other models (Clockwork, PipeSwitch, GEMEL's time/space sharing baseline).
//
// The simulated server (a discrete-event simulation in its simplest exact form):
//   - requests are served one at a time, first come first served; arrivals at the same time are
//     ordered by model index, then by their order in the model's list;
//   - a request starts when the GPU is free and it has arrived; if its model is not resident, the
//     GPU first waits for the load (no overlap of loading with execution: PipeSwitch's pipelining
//     is not modelled), then executes for the model's execution time;
//   - weights are held in blocks: without sharing, one block per model; with sharing, one block
//     per pool of shared layers (pack/sharing.h: bit-identical layers, and merged groups with the
//     merge plan; used once by each member model) plus one block per model for the rest. A model
//     is resident when all its blocks are. Residency is decided per model: while the blocks of the
//     resident models plus the requested one exceed the capacity, the policy evicts a resident
//     model, and blocks that no resident model (nor the requested one) uses are freed. Then the
//     requested model's blocks that are not resident are loaded: a shared layer already resident
//     is not loaded again. A load of zero bytes costs nothing.
//
// Load time of one swap-in of B bytes in T tensors:
//     fixed_s + T * per_tensor_s + B / (bandwidth * (pinned ? 1 : pageable_factor))
// (defaults and their sources: docs/pack.md).
//
// Policies pick the resident model to evict (ties: lowest model index):
//   Lru     the one whose last request started longest ago;
//   Mru     the one whose last request started most recently (GEMEL's choice: with requests that
//           cycle through more models than fit, LRU evicts exactly the model needed next);
//   Belady  offline oracle: the one whose next request comes furthest in the future (never = +inf),
//           read from the known arrival trace. Not deployable; a reference point for the others.
//
// Statistics per model: throughput (requests finished by the end of the window / window),
// latency percentiles by nearest rank (the ceil(p/100 * n)-th smallest), deadline misses
// (latency > target), loads, bytes moved, and the time the GPU waited for the model's loads.
// Every request is served, including those still queued when the window closes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cost/cost_constants.h"

namespace headroom {

enum class EvictionPolicy : uint8_t { Lru, Mru, Belady };
std::string_view eviction_policy_name(EvictionPolicy p);
inline constexpr EvictionPolicy kEvictionPolicies[] = {EvictionPolicy::Lru, EvictionPolicy::Mru,
                                                       EvictionPolicy::Belady};

// Host-to-device copy cost of a swap-in; the defaults are the time model's (cost/cost_constants.h).
struct LoadCostModel {
  double fixed_s = CostConstants{}.load_fixed_us * 1e-6;          // per swap-in: synchronization, allocation
  double per_tensor_s = CostConstants{}.load_per_tensor_us * 1e-6;  // per tensor: one cudaMemcpyAsync launch
  double bandwidth_bytes_per_s = 0; // achieved pinned host-to-device rate
  bool pinned = true;               // weights in page-locked host memory
  double pageable_factor = CostConstants{}.pageable_factor;  // fraction of the pinned rate a pageable copy achieves
  // REQUIRES: bandwidth_bytes_per_s > 0. Rounded to whole nanoseconds.
  int64_t nanoseconds(int64_t bytes, int64_t tensors) const;
};

struct SwapBlock {
  std::string name;  // for reports: "model:rest" or "group 3"
  int64_t bytes = 0;
  int64_t tensors = 0;
};

struct SwapModel {
  std::string name;
  std::vector<int32_t> blocks;        // indices into SwapConfig::blocks
  std::vector<int64_t> arrivals_ns;   // sorted, within [0, window)
  int64_t exec_ns = 0;                // one request (one batch)
  int64_t deadline_ns = 0;            // latency target
};

struct SwapConfig {
  std::vector<SwapBlock> blocks;
  std::vector<SwapModel> models;
  int64_t capacity_bytes = 0;  // memory for weights
  LoadCostModel load;
  EvictionPolicy policy = EvictionPolicy::Lru;
  int64_t window_ns = 0;
};

struct SwapModelStats {
  std::string name;
  int64_t requests = 0;
  int64_t finished_in_window = 0;
  double throughput_rps = 0;
  int64_t p50_ns = 0, p95_ns = 0, p99_ns = 0, max_ns = 0;
  int64_t deadline_misses = 0;
  int64_t loads = 0;         // swap-ins that moved bytes
  int64_t bytes_moved = 0;
  int64_t load_wait_ns = 0;  // GPU idle waiting for this model's loads
};

struct SwapRequestTrace {  // one served request, in service order (for tests and --trace)
  int32_t model = 0;
  int64_t arrival_ns = 0, start_ns = 0, load_ns = 0, finish_ns = 0;
  int64_t bytes_loaded = 0;
  std::vector<int32_t> evicted;  // models evicted for it
};

struct SwapResult {
  std::vector<SwapModelStats> models;
  int64_t bytes_moved = 0;
  int64_t load_wait_ns = 0;
  int64_t exec_ns = 0;      // GPU time executing
  int64_t makespan_ns = 0;  // when the last request finished
  int64_t evictions = 0;
  std::vector<SwapRequestTrace> trace;
};

// Throws InputError when a model's blocks alone exceed the capacity or the config is malformed.
SwapResult simulate_swaps(const SwapConfig& config);

// Arrival times in [0, window): a Poisson process of `rate` per second (exponential gaps drawn by
// inversion from std::mt19937_64, seeded with `seed` mixed with `stream`: the sequence is the same on
// every platform and standard library), or, with rate == 0, periodic at `fps` starting at
// `phase_s`.
std::vector<int64_t> poisson_arrivals(double rate_per_s, int64_t window_ns, uint64_t seed, uint64_t stream);
std::vector<int64_t> periodic_arrivals(double fps, int64_t window_ns, double phase_s);

// Uniform double in [0, 1) from the top 53 bits of one 64-bit draw.
double unit_interval(uint64_t draw);

}  // namespace headroom
