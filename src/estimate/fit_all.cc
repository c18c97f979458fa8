#include "estimate/fit_all.h"

#include <limits>
#include <map>
#include <memory>
#include <tuple>

#include "estimate/device_budget.h"
#include "sim/simulate.h"

namespace headroom {
namespace {

// The cuBLAS workspace a GPU's program uses: the user's override, else the GPU's (-1: the device
// default, for --gpu-memory without a name), as schedule_options() picks it.
int64_t workspace_key(const EstimateOptions& e, const GpuOptions& g) {
  if (e.cublas_workspace_bytes) return *e.cublas_workspace_bytes;
  if (!g.gpu.empty()) return cublas_workspace_for(gpu_spec(g));
  return -1;
}

// The programs of the sweep, each simulated once, and their allocator replays.
class SharedSweep {
 public:
  struct Run {
    bool ok = false;
    std::string error;  // when !ok: estimate()'s error at this size
    int64_t peak_bytes = 0;
    std::unique_ptr<Program> program;
  };

  explicit SharedSweep(const FitOptions& o) : o_(o) {}

  // The estimate at size v with workspace `key`, without a GPU (the program and its exact peak).
  // A second workspace at the same size reuses the first program with the workspace buffers
  // resized: the workspace changes nothing else in a program (Interpreter::cublas_workspace).
  // Generation runs are built again: the workspace can change which window holds the peak.
  Run& run(int64_t v, int64_t key) {
    auto [it, added] = runs_.try_emplace({v, key});
    Run& r = it->second;
    if (!added) return r;
    const Run* base = nullptr;
    int64_t base_key = 0;
    for (auto b = runs_.lower_bound({v, std::numeric_limits<int64_t>::min()}); b != runs_.end() && b->first.first == v; ++b) {
      if (b->first.second > 0 && b->second.ok) {
        base = &b->second;
        base_key = b->first.second;
        break;
      }
    }
    if (key > 0 && !o_.estimate.generation && base) {
      r.program = std::make_unique<Program>(*base->program);
      for (Buffer& b : r.program->buffers) {
        if (b.category == Category::Workspaces && b.name.rfind("cuBLAS workspace", 0) == 0) {
          HEADROOM_CHECK(b.bytes == base_key, "a cuBLAS workspace buffer has the workspace's size");
          b.bytes = key;
        }
      }
      Result<SimResult> sim = capture_input_errors([&] { return simulate(*r.program); });
      if (!sim.ok()) {
        r.error = sim.error();
        r.program.reset();
        return r;
      }
      r.ok = true;
      r.peak_bytes = sim.value().peak.bytes;
      return r;
    }
    EstimateOptions e = o_.estimate;
    e.gpu.reset();
    if (o_.axis == FitAxis::Batch) e.batch = v;
    else e.seq = v;
    e.top_tensors = 0;
    e.keep_program = true;
    if (key >= 0) e.cublas_workspace_bytes = key;
    Result<Estimate> est = estimate(e);
    if (!est.ok()) {
      r.error = est.error();
      return r;
    }
    r.ok = true;
    r.peak_bytes = est.value().peak_bytes;
    r.program = std::make_unique<Program>(std::move(est.value().program));
    return r;
  }

  // The allocator stats of run (v, key) on a GPU with these allocator settings and budget.
  const CachingAllocatorStats& replay(int64_t v, int64_t key, const GpuOptions& g, const DeviceBudget& b) {
    const Program& p = *runs_.at({v, key}).program;
    const CachingAllocatorOptions& a = g.allocator;
    const ReplayKey settings{v, key, a.max_split_size_bytes, a.max_non_split_rounding_bytes, a.expandable_segments, 0};
    if (!a.expandable_segments) {
      const CachingAllocatorStats& unlimited = replay_once(settings, p, a);
      if (unlimited.peak_reserved_bytes <= b.allocator_bytes) return unlimited;
    }
    ReplayKey limited = settings;
    std::get<5>(limited) = b.allocator_bytes;
    return replay_once(limited, p, allocator_options(g, b));
  }

 private:
  const FitOptions& o_;
  std::map<std::pair<int64_t, int64_t>, Run> runs_;
  // (size, workspace, max_split_size, max_non_split_rounding, expandable, capacity; 0 = none).
  using ReplayKey = std::tuple<int64_t, int64_t, int64_t, int64_t, bool, int64_t>;
  const CachingAllocatorStats& replay_once(const ReplayKey& k, const Program& p, CachingAllocatorOptions a) {
    auto [it, added] = replays_.try_emplace(k);
    if (added) {
      a.capacity_bytes = std::get<5>(k);
      CachingAllocator alloc(a);
      simulate(p, &alloc);
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
    ++evaluations_;
    Result<FitPoint> p = point(v);
    if (!p.ok()) {
      if (first) throw InputError(p.error());
      invalid_ = p.error();
      return nullptr;
    }
    return &cache_.emplace(v, p.value()).first->second;
  }
  const std::string& invalid() const override { return invalid_; }
  int evaluations() const override { return evaluations_; }

 private:
  // What estimate() with this GPU reports at v, in its order of checks: the run's own errors,
  // then the GPU's.
  Result<FitPoint> point(int64_t v) {
    return capture_input_errors([&]() -> FitPoint {
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
      if (!key_) key_ = workspace_key(o_.estimate, g_);
      SharedSweep::Run& r = sweep_.run(v, *key_);
      if (!r.ok) throw InputError(r.error);
      if (!budget_) budget_ = device_budget(g_);
      return FitPoint{v, r.peak_bytes, device_memory_from(*budget_, sweep_.replay(v, *key_, g_, *budget_))};
    });
  }

  const FitOptions& o_;
  const GpuOptions& g_;
  SharedSweep& sweep_;
  std::optional<int64_t> key_;
  std::optional<DeviceBudget> budget_;
  std::map<int64_t, FitPoint> cache_;
  int evaluations_ = 0;
  std::string invalid_;
};

}  // namespace

Result<std::vector<FitResult>> fit_all(const FitOptions& o, const std::vector<GpuOptions>& gpus,
                                       const FitProgress& progress) {
  return capture_input_errors([&]() -> std::vector<FitResult> {
    if (o.limit < 1) throw InputError("fit limit must be positive");
    SharedSweep sweep(o);
    std::vector<FitResult> results;
    for (size_t i = 0; i < gpus.size(); ++i) {
      if (progress) progress(i, gpus.size(), gpus[i].gpu);
      GpuPoints points(o, gpus[i], sweep);
      results.push_back(fit_search(o, points));
    }
    return results;
  });
}

}  // namespace headroom
