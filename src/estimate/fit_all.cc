#include "estimate/fit_all.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>

#include "estimate/device_budget.h"
#include "estimate/estimate_program.h"
#include "sim/allocated_lower_bound.h"
#include "sim/caching_allocator.h"
#include "sim/replay.h"
#include "sim/simulate.h"

namespace headroom {
namespace {

// What of a GPU goes into its program: the cuBLAS workspace (the user's override, else the
// GPU's; -1: the device default, for --gpu-memory without a name, as schedule_options() picks
// it) and the SM counts its CUDA reductions split over (the GPU's, else the measured H100's).
struct GpuKey {
  int64_t workspace = -1;
  ReduceDevice reduce = kMeasuredGpu;
  bool operator<(const GpuKey& o) const {
    return std::tie(workspace, reduce.multiprocessors, reduce.max_threads_per_multiprocessor) <
           std::tie(o.workspace, o.reduce.multiprocessors, o.reduce.max_threads_per_multiprocessor);
  }
};

// Only a backward stages reductions (training/op_rules.cc): inference and generation programs
// are the same on every SM count, and key on the measured H100's.
GpuKey gpu_key(const EstimateOptions& e, const GpuOptions& g) {
  const GpuSpec* spec = g.gpu.empty() ? nullptr : gpu_spec(g);
  GpuKey k;
  k.workspace = e.cublas_workspace_bytes ? *e.cublas_workspace_bytes : spec ? cublas_workspace_for(spec) : -1;
  k.reduce = e.reduce_device ? *e.reduce_device : reduce_device_for(spec);
  if (e.generation || e.mode != RunMode::Training) k.reduce = kMeasuredGpu;
  return k;
}

// The largest segment any allocation of the program can make the caching allocator ask the
// device for (get_allocation_size of each request).
int64_t largest_segment(const Program& p) {
  int64_t s = 0;
  for (const Buffer& b : p.buffers) {
    if (b.bytes > 0) s = std::max(s, cuda_caching::allocation_size(cuda_caching::round_size(b.bytes)));
  }
  return s;
}

// The programs of the sweep, each built once and shared by the GPUs it is the program of, and
// their exact peaks and allocator replays, each computed once per version of a program (its
// workspace and staging sizes) when first asked.
class SharedSweep {
 public:
  // A program as built, and what other GPUs change in it.
  struct Built {
    std::unique_ptr<Program> program;
    size_t index = 0;  // in built_
    GpuKey key;  // what it was built with
    std::vector<BufferId> workspace_buffers;  // its cuBLAS workspaces (none when key.workspace <= 0)
    // Each reduction's staging buffer bytes for each set of SM counts that shares it: [0] as built.
    std::vector<std::vector<int64_t>> stagings;
    std::vector<BufferId> staging_buffers;  // Buffer::reduction >= 0
  };
  struct Run {
    bool ok = false;
    std::string error;  // when !ok: estimate()'s error at this size
    int64_t rounded_peak = 0;  // rounded_live_peak: no replay of the program reserves less
    int64_t largest_segment = 0;
    Built* built = nullptr;  // the program this run uses
    int64_t workspace = 0;   // its workspace buffers' size here (when built.key.workspace > 0)
    size_t staging = 0;      // its staging sizes here: built->stagings[staging]
  };

  SharedSweep(const FitOptions& o, FitAllWork& work) : o_(o), work_(work) {}

  // The program at size v for a GPU with `key`, without a GPU, or estimate()'s error there.
  // A program built at v for another key is reused when it is this key's program but for sizes:
  // its workspace is this key's, or both are positive (the workspace buffers are resized: the
  // workspace changes nothing else in a program, Interpreter::cublas_workspace), and each of its
  // CUDA reductions borrows staging on this key's SM counts exactly when it did on its own (the
  // staging buffers are resized, the semaphores do not depend on the GPU). A pipelined run
  // needs the same SM counts: the staging can change which stage it reports. Generation runs
  // are built again: the workspace can change which window holds the peak.
  Run& run(int64_t v, const GpuKey& key) {
    auto [it, added] = runs_.try_emplace({v, key});
    Run& r = it->second;
    if (!added) return r;
    if (share(v, key, r)) {
      auto [bounds, fresh] = bounds_.try_emplace(version(r));
      if (fresh) {
        use(r);
        Result<bool> sized = capture_input_errors([&] {
          check_program_size(*r.built->program);  // what simulate() checks first
          return true;
        });
        if (sized.ok()) bounds->second = measure(*r.built->program);
        else bounds->second.error = sized.error();
      }
      set_bounds(r, bounds->second);
      return r;
    }
    EstimateOptions e = o_.estimate;
    e.gpu.reset();
    if (o_.axis == FitAxis::Batch) e.batch = v;
    else e.seq = v;
    e.top_tensors = 0;
    e.keep_program = true;
    if (key.workspace >= 0) e.cublas_workspace_bytes = key.workspace;
    e.reduce_device = key.reduce;
    ++work_.programs;
    std::optional<int64_t> peak;
    std::unique_ptr<Program> program;
    if (e.generation || e.parallel.pipeline_parallel > 1) {
      // These runs choose their program by simulating it: estimate() gives both.
      ++work_.exact_peaks;
      Result<Estimate> est = estimate(e);
      if (!est.ok()) {
        r.error = est.error();
        return r;
      }
      program = std::make_unique<Program>(std::move(est.value().program));
      peak = est.value().peak_bytes;
    } else {
      Result<Program> p = estimate_program(e);
      if (!p.ok()) {
        r.error = p.error();
        return r;
      }
      // A copy, not a move: the compact copy keeps the heap from fragmenting while the sweep
      // holds a program per size (docs/speed.md, "fit --gpu all").
      program = std::make_unique<Program>(p.value());
    }
    built_.push_back(std::make_unique<Built>());
    Built& b = *built_.back();
    b.index = built_.size() - 1;
    b.program = std::move(program);
    b.key = key;
    b.stagings.push_back(staging_sizes(*b.program, key.reduce));
    for (size_t i = 0; i < b.program->buffers.size(); ++i) {
      const Buffer& buf = b.program->buffers[i];
      if (buf.reduction >= 0) b.staging_buffers.push_back(static_cast<BufferId>(i));
      if (key.workspace > 0 && buf.category == Category::Workspaces && buf.name.rfind("cuBLAS workspace", 0) == 0) {
        HEADROOM_CHECK(buf.bytes == key.workspace, "a cuBLAS workspace buffer has the workspace's size");
        b.workspace_buffers.push_back(static_cast<BufferId>(i));
      }
    }
    built_at_[v].push_back(&b);
    r.built = &b;
    r.workspace = key.workspace;
    if (peak) peaks_[version(r)] = *peak;
    set_bounds(r, bounds_[version(r)] = measure(*b.program));
    return r;
  }

  // estimate()'s peak_bytes at run (v, key).
  int64_t peak_bytes(int64_t v, const GpuKey& key) {
    const Run& r = runs_.at({v, key});
    auto [it, added] = peaks_.try_emplace(version(r));
    if (added) {
      ++work_.exact_peaks;
      use(r);
      it->second = simulate(*r.built->program).peak.bytes;
    }
    return it->second;
  }

  // The allocator stats of run (v, key) without a capacity, with these allocator settings.
  const CachingAllocatorStats& unlimited(int64_t v, const GpuKey& key, const CachingAllocatorOptions& a) {
    return replay_once(runs_.at({v, key}), a, 0);
  }

  // The allocator stats of run (v, key) on a GPU with these allocator settings and budget.
  const CachingAllocatorStats& replay(int64_t v, const GpuKey& key, const GpuOptions& g, const DeviceBudget& b) {
    const CachingAllocatorOptions& a = g.allocator;
    if (!a.expandable_segments) {
      const CachingAllocatorStats& u = unlimited(v, key, a);
      if (u.peak_reserved_bytes <= b.allocator_bytes) return u;
    }
    return replay_once(runs_.at({v, key}), allocator_options(g, b), b.allocator_bytes);
  }

 private:
  // Each reduction's staging buffer bytes on SM counts `d` (0: none borrowed).
  static std::vector<int64_t> staging_sizes(const Program& p, const ReduceDevice& d) {
    std::vector<int64_t> s;
    s.reserve(p.cuda_reductions.size());
    for (const CudaReduction& r : p.cuda_reductions) s.push_back(cuda_reduce_staging(r, d).buffer_bytes);
    return s;
  }

  // Points r at a program built at v that is key's but for sizes (run() says when), preferring
  // one built with key's workspace; false when there is none.
  bool share(int64_t v, const GpuKey& key, Run& r) {
    if (o_.estimate.generation) return false;
    const bool pipelined = o_.estimate.parallel.pipeline_parallel > 1;
    Built* found = nullptr;
    std::vector<int64_t> found_sizes;
    auto at = built_at_.find(v);
    if (at == built_at_.end()) return false;
    for (Built* candidate : at->second) {
      Built& built = *candidate;
      const bool same_workspace = built.key.workspace == key.workspace;
      if (!same_workspace && !(built.key.workspace > 0 && key.workspace > 0)) continue;
      if (pipelined && !(built.key.reduce == key.reduce)) continue;
      if (found && (found->key.workspace == key.workspace || !same_workspace)) continue;
      std::vector<int64_t> sizes = staging_sizes(*built.program, key.reduce);
      const std::vector<int64_t>& own = built.stagings.front();
      bool borrows_alike = true;
      for (size_t i = 0; i < sizes.size(); ++i) borrows_alike = borrows_alike && (sizes[i] == 0) == (own[i] == 0);
      if (!borrows_alike) continue;
      found = &built;
      found_sizes = std::move(sizes);
    }
    if (!found) return false;
    auto same = std::find(found->stagings.begin(), found->stagings.end(), found_sizes);
    r.staging = static_cast<size_t>(same - found->stagings.begin());
    if (same == found->stagings.end()) found->stagings.push_back(std::move(found_sizes));
    r.built = found;
    r.workspace = key.workspace;
    ++(found->key.workspace != key.workspace ? work_.resized : work_.shared);
    return true;
  }

  // Sets a shared program's workspace and staging buffers to this run's sizes.
  static void use(const Run& r) {
    Program& p = *r.built->program;
    for (BufferId id : r.built->workspace_buffers) p.buffers[static_cast<size_t>(id)].bytes = r.workspace;
    const std::vector<int64_t>& sizes = r.built->stagings[r.staging];
    for (BufferId id : r.built->staging_buffers) {
      Buffer& b = p.buffers[static_cast<size_t>(id)];
      b.bytes = sizes[static_cast<size_t>(b.reduction)];
    }
  }
  // What a run reads of its version of a program: the bounds, or the size check's error.
  struct Bounds {
    std::string error;
    int64_t rounded_peak = 0;
    int64_t largest_segment = 0;
  };
  static Bounds measure(const Program& p) { return Bounds{"", rounded_live_peak(p), largest_segment(p)}; }
  static void set_bounds(Run& r, const Bounds& b) {
    if (!b.error.empty()) {
      r.error = b.error;
      r.built = nullptr;
      return;
    }
    r.ok = true;
    r.rounded_peak = b.rounded_peak;
    r.largest_segment = b.largest_segment;
  }

  // A version of a program: the program (its index in built_), its workspace and its staging sizes.
  using Version = std::tuple<size_t, int64_t, size_t>;
  static Version version(const Run& r) { return {r.built->index, r.workspace, r.staging}; }

  const FitOptions& o_;
  FitAllWork& work_;
  std::map<std::pair<int64_t, GpuKey>, Run> runs_;
  std::vector<std::unique_ptr<Built>> built_;
  std::map<int64_t, std::vector<Built*>> built_at_;  // by size, in the order built
  std::map<Version, int64_t> peaks_;  // exact peaks
  std::map<Version, Bounds> bounds_;
  // (version, max_split_size, max_non_split_rounding, expandable, capacity; 0 = none).
  using ReplayKey = std::tuple<Version, int64_t, int64_t, bool, int64_t>;
  const CachingAllocatorStats& replay_once(const Run& r, CachingAllocatorOptions a, int64_t capacity) {
    const ReplayKey k{version(r), a.max_split_size_bytes, a.max_non_split_rounding_bytes, a.expandable_segments, capacity};
    auto [it, added] = replays_.try_emplace(k);
    if (added) {
      ++work_.replays;
      a.capacity_bytes = capacity;
      CachingAllocator alloc(a);
      use(r);
      replay_allocations(*r.built->program, alloc);
      it->second = alloc.stats();
    }
    return it->second;
  }
  std::map<ReplayKey, CachingAllocatorStats> replays_;
};

// One GPU's points, read from the shared sweep; the same points, errors and count as fit()'s.
class GpuPoints final : public FitPoints {
 public:
  GpuPoints(const FitOptions& o, const GpuOptions& g, SharedSweep& sweep) : o_(o), g_(g), sweep_(sweep) {}

  const FitPoint* at(int64_t v, bool first) override {
    auto it = cache_.find(v);
    if (it != cache_.end()) return &it->second;
    // fit() counts every request of a rejected size (it keeps only the points): so does this.
    // A size fits() answered was valid, and counted then.
    if (!answered_.count(v)) ++evaluations_;
    Result<FitPoint> p = capture_input_errors([&] { return point(v); });
    if (!p.ok()) {
      if (first) throw InputError(p.error());
      invalid_ = p.error();
      return nullptr;
    }
    return &cache_.emplace(v, p.value()).first->second;
  }

  // Whether at(v) would give a point that fits, without its exact peak (which does not decide
  // it), and without a replay when one of two bounds already says no:
  //  - the program's rounded live peak is a lower bound on every replay's reserved peak
  //    (sim/allocated_lower_bound.h): with the context and NCCL past the usable memory, the
  //    point's headroom is negative (or the replay runs out of memory);
  //  - without expandable segments, a replay with this GPU's capacity makes the same calls as the
  //    unlimited one until a new segment would pass the capacity A. When the unlimited replay
  //    reserves more than A, that happens, at a segment of S bytes with more than A - S already
  //    reserved, so the limited replay's reserved peak is above A - S. When A - S is at least the
  //    usable memory less the context and NCCL, for S the program's largest segment, the point's
  //    headroom is negative (or the replay runs out of memory) again.
  bool fits(int64_t v) override {
    auto it = cache_.find(v);
    if (it != cache_.end()) return it->second.device.fits;
    auto known = answered_.find(v);
    if (known != answered_.end()) return known->second;
    ++evaluations_;
    Result<bool> f = capture_input_errors([&] {
      const SharedSweep::Run& r = run(v);
      const DeviceBudget b = budget(r);
      const int64_t room = usable_bytes(b) - b.context_bytes - b.nccl_bytes;
      if (r.rounded_peak > room) return false;
      if (!g_.allocator.expandable_segments &&
          sweep_.unlimited(v, *key_, g_.allocator).peak_reserved_bytes > b.allocator_bytes &&
          b.allocator_bytes - r.largest_segment >= room) {
        return false;
      }
      return device_memory_from(b, sweep_.replay(v, *key_, g_, b)).fits;
    });
    if (!f.ok()) {
      invalid_ = f.error();
      return false;
    }
    answered_.emplace(v, f.value());
    return f.value();
  }
  const std::string& invalid() const override { return invalid_; }
  int evaluations() const override { return evaluations_; }

 private:
  // The run at v, or estimate()'s error with this GPU, in its order of checks: the run's own
  // errors, then the GPU's.
  const SharedSweep::Run& run(int64_t v) {
    if (o_.estimate.device != "cuda") {
      // estimate() refuses a GPU off CUDA, at a place in its checks that depends on the run
      // (before a generation run, after building any other): its own error is fit()'s.
      EstimateOptions e = o_.estimate;
      e.gpu = g_;
      if (o_.axis == FitAxis::Batch) e.batch = v;
      else e.seq = v;
      Result<Estimate> refused = estimate(e);
      HEADROOM_CHECK(!refused.ok(), "estimate() refuses a GPU without --device cuda");
      throw InputError(refused.error());
    }
    if (!key_) key_ = gpu_key(o_.estimate, g_);
    const SharedSweep::Run& r = sweep_.run(v, *key_);
    if (!r.ok) throw InputError(r.error);
    return r;
  }

  // The GPU's budget for a run: the CUDA context depends on what its program uses.
  DeviceBudget budget(const SharedSweep::Run& r) const { return device_budget(g_, r.built->program->context_use); }

  // What estimate() with this GPU reports at v.
  FitPoint point(int64_t v) {
    const DeviceBudget b = budget(run(v));
    return FitPoint{v, sweep_.peak_bytes(v, *key_), device_memory_from(b, sweep_.replay(v, *key_, g_, b))};
  }

  const FitOptions& o_;
  const GpuOptions& g_;
  SharedSweep& sweep_;
  std::optional<GpuKey> key_;
  std::map<int64_t, FitPoint> cache_;
  std::map<int64_t, bool> answered_;  // valid sizes fits() answered without a point
  int evaluations_ = 0;
  std::string invalid_;
};

}  // namespace

Result<std::vector<FitResult>> fit_all(const FitOptions& o, const std::vector<GpuOptions>& gpus,
                                       const FitProgress& progress, FitAllWork* work) {
  FitAllWork counted;
  Result<std::vector<FitResult>> out = capture_input_errors([&]() -> std::vector<FitResult> {
    if (o.limit < 1) throw InputError("fit limit must be positive");
    SharedSweep sweep(o, counted);
    std::vector<FitResult> results;
    for (size_t i = 0; i < gpus.size(); ++i) {
      if (progress) progress(i, gpus.size(), gpus[i].gpu);
      GpuPoints points(o, gpus[i], sweep);
      results.push_back(fit_search(o, points));
    }
    return results;
  });
  if (work) *work = counted;
  return out;
}

}  // namespace headroom
