#include "estimate/fit_all.h"

#include <algorithm>
#include <limits>
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

GpuKey gpu_key(const EstimateOptions& e, const GpuOptions& g) {
  const GpuSpec* spec = g.gpu.empty() ? nullptr : gpu_spec(g);
  GpuKey k;
  k.workspace = e.cublas_workspace_bytes ? *e.cublas_workspace_bytes : spec ? cublas_workspace_for(spec) : -1;
  k.reduce = e.reduce_device ? *e.reduce_device : reduce_device_for(spec);
  return k;
}

// Whether every CUDA reduction of `p` stages the same on SM counts `a` and `b`: then p, built
// with either, is the program of both (Program::cuda_reductions).
bool same_staging(const Program& p, const ReduceDevice& a, const ReduceDevice& b) {
  if (a == b) return true;
  for (const CudaReduction& r : p.cuda_reductions) {
    if (!(cuda_reduce_staging(r, a) == cuda_reduce_staging(r, b))) return false;
  }
  return true;
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

// The programs of the sweep, each built once, and their exact peaks and allocator replays, each
// computed once per (program, workspace) when first asked.
class SharedSweep {
 public:
  struct Run {
    bool ok = false;
    std::string error;  // when !ok: estimate()'s error at this size
    int64_t rounded_peak = 0;  // rounded_live_peak: no replay of the program reserves less
    int64_t largest_segment = 0;
    Program* program = nullptr;  // owned by the sweep; shared by the runs it is the program of
    ReduceDevice staged_for;     // the SM counts the program was built with
    // The run's cuBLAS workspace; when the program is shared and was built with a positive one,
    // its workspace buffers, set to `workspace` bytes before each use of this run.
    int64_t workspace = 0;
    std::vector<BufferId> workspace_buffers;
  };

  SharedSweep(const FitOptions& o, FitAllWork& work) : o_(o), work_(work) {}

  // The program at size v for a GPU with `key`, without a GPU, or estimate()'s error there.
  // A program already built at v is reused when it is this key's program: its reductions stage
  // the same on this key's SM counts (a pipelined run needs the same counts: they can change
  // which stage it reports), and its workspace is this key's or both are positive (the workspace
  // buffers are resized: the workspace changes nothing else in a program,
  // Interpreter::cublas_workspace). Generation runs are built again: the workspace can change
  // which window holds the peak.
  Run& run(int64_t v, const GpuKey& key) {
    auto [it, added] = runs_.try_emplace({v, key});
    Run& r = it->second;
    if (!added) return r;
    if (Run* base = shared_base(v, key)) {
      const bool resized = base->workspace != key.workspace;
      if (base->workspace > 0 && base->workspace_buffers.empty()) {
        for (size_t i = 0; i < base->program->buffers.size(); ++i) {
          const Buffer& b = base->program->buffers[i];
          if (b.category == Category::Workspaces && b.name.rfind("cuBLAS workspace", 0) == 0) {
            HEADROOM_CHECK(b.bytes == base->workspace, "a cuBLAS workspace buffer has the workspace's size");
            base->workspace_buffers.push_back(static_cast<BufferId>(i));
          }
        }
      }
      r.program = base->program;
      r.staged_for = base->staged_for;
      r.workspace = key.workspace;
      r.workspace_buffers = base->workspace_buffers;
      ++(resized ? work_.resized : work_.shared);
      use(r);
      Result<bool> sized = capture_input_errors([&] {
        check_program_size(*r.program);  // what simulate() checks first
        return true;
      });
      if (!sized.ok()) {
        r.error = sized.error();
        r.program = nullptr;
        return r;
      }
      measure(r);
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
    r.staged_for = key.reduce;
    r.workspace = key.workspace;
    ++work_.programs;
    if (e.generation || e.parallel.pipeline_parallel > 1) {
      // These runs choose their program by simulating it: estimate() gives both.
      ++work_.exact_peaks;
      Result<Estimate> est = estimate(e);
      if (!est.ok()) {
        r.error = est.error();
        return r;
      }
      programs_.push_back(std::make_unique<Program>(std::move(est.value().program)));
      peaks_[{programs_.back().get(), r.workspace}] = est.value().peak_bytes;
    } else {
      Result<Program> p = estimate_program(e);
      if (!p.ok()) {
        r.error = p.error();
        return r;
      }
      programs_.push_back(std::make_unique<Program>(p.value()));
    }
    r.program = programs_.back().get();
    measure(r);
    return r;
  }

  // estimate()'s peak_bytes at run (v, key).
  int64_t peak_bytes(int64_t v, const GpuKey& key) {
    const Run& r = runs_.at({v, key});
    auto [it, added] = peaks_.try_emplace({r.program, r.workspace});
    if (added) {
      ++work_.exact_peaks;
      use(r);
      it->second = simulate(*r.program).peak.bytes;
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
  // A run at v whose program is key's, preferring one with key's workspace (no resizing).
  Run* shared_base(int64_t v, const GpuKey& key) {
    if (o_.estimate.generation) return nullptr;
    const bool pipelined = o_.estimate.parallel.pipeline_parallel > 1;
    Run* resizable = nullptr;
    for (auto b = runs_.lower_bound({v, GpuKey{std::numeric_limits<int64_t>::min(), {}}}); b != runs_.end() && b->first.first == v; ++b) {
      Run& base = b->second;
      if (!base.ok) continue;
      if (pipelined ? !(base.staged_for == key.reduce) : !same_staging(*base.program, base.staged_for, key.reduce)) continue;
      if (base.workspace == key.workspace) return &base;
      if (!resizable && base.workspace > 0 && key.workspace > 0) resizable = &base;
    }
    return resizable;
  }
  // Sets a shared program's workspace buffers to this run's workspace.
  static void use(const Run& r) {
    for (BufferId id : r.workspace_buffers) r.program->buffers[static_cast<size_t>(id)].bytes = r.workspace;
  }
  // The bounds of a built run, read from its program.
  static void measure(Run& r) {
    r.ok = true;
    r.rounded_peak = rounded_live_peak(*r.program);
    r.largest_segment = largest_segment(*r.program);
  }

  const FitOptions& o_;
  FitAllWork& work_;
  std::map<std::pair<int64_t, GpuKey>, Run> runs_;
  std::vector<std::unique_ptr<Program>> programs_;
  // Exact peaks by (program, workspace).
  std::map<std::pair<const Program*, int64_t>, int64_t> peaks_;
  // (program, workspace, max_split_size, max_non_split_rounding, expandable, capacity; 0 = none).
  using ReplayKey = std::tuple<const Program*, int64_t, int64_t, int64_t, bool, int64_t>;
  const CachingAllocatorStats& replay_once(const Run& r, CachingAllocatorOptions a, int64_t capacity) {
    const ReplayKey k{r.program, r.workspace, a.max_split_size_bytes, a.max_non_split_rounding_bytes, a.expandable_segments, capacity};
    auto [it, added] = replays_.try_emplace(k);
    if (added) {
      ++work_.replays;
      a.capacity_bytes = capacity;
      CachingAllocator alloc(a);
      use(r);
      replay_allocations(*r.program, alloc);
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
  DeviceBudget budget(const SharedSweep::Run& r) const { return device_budget(g_, r.program->context_use); }

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
