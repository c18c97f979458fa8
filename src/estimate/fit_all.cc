#include "estimate/fit_all.h"

#include <limits>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include "estimate/device_budget.h"
#include "sim/allocated_lower_bound.h"
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
    int64_t rounded_peak = 0;  // rounded_live_peak: no replay of the program reserves less
    Program* program = nullptr;  // owned by the sweep; one per size, shared by its workspaces
    // When the program is shared: its cuBLAS workspace buffers, set to `workspace` bytes before
    // each replay of this run.
    std::vector<BufferId> workspace_buffers;
    int64_t workspace = 0;
  };

  explicit SharedSweep(const FitOptions& o) : o_(o) {}

  // The estimate at size v with workspace `key`, without a GPU (the program and its exact peak).
  // A second workspace at the same size replays the first program with the workspace buffers
  // resized: the workspace changes nothing else in a program (Interpreter::cublas_workspace).
  // Generation runs are built again: the workspace can change which window holds the peak.
  Run& run(int64_t v, int64_t key) {
    auto [it, added] = runs_.try_emplace({v, key});
    Run& r = it->second;
    if (!added) return r;
    Run* base = nullptr;
    int64_t base_key = 0;
    for (auto b = runs_.lower_bound({v, std::numeric_limits<int64_t>::min()}); b != runs_.end() && b->first.first == v; ++b) {
      if (b->first.second > 0 && b->second.ok) {
        base = &b->second;
        base_key = b->first.second;
        break;
      }
    }
    if (key > 0 && !o_.estimate.generation && base) {
      if (base->workspace_buffers.empty()) {
        for (size_t i = 0; i < base->program->buffers.size(); ++i) {
          const Buffer& b = base->program->buffers[i];
          if (b.category == Category::Workspaces && b.name.rfind("cuBLAS workspace", 0) == 0) {
            HEADROOM_CHECK(b.bytes == base_key, "a cuBLAS workspace buffer has the workspace's size");
            base->workspace_buffers.push_back(static_cast<BufferId>(i));
          }
        }
        base->workspace = base_key;
      }
      r.program = base->program;
      r.workspace_buffers = base->workspace_buffers;
      r.workspace = key;
      use(r);
      Result<SimResult> sim = capture_input_errors([&] { return simulate(*r.program); });
      if (!sim.ok()) {
        r.error = sim.error();
        r.program = nullptr;
        return r;
      }
      r.ok = true;
      r.peak_bytes = sim.value().peak.bytes;
      r.rounded_peak = rounded_live_peak(*r.program);
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
    programs_.push_back(std::make_unique<Program>(std::move(est.value().program)));
    r.program = programs_.back().get();
    r.rounded_peak = rounded_live_peak(*r.program);
    return r;
  }

  // The allocator stats of run (v, key) on a GPU with these allocator settings and budget.
  const CachingAllocatorStats& replay(int64_t v, int64_t key, const GpuOptions& g, const DeviceBudget& b) {
    const Run& r = runs_.at({v, key});
    const CachingAllocatorOptions& a = g.allocator;
    const ReplayKey settings{v, key, a.max_split_size_bytes, a.max_non_split_rounding_bytes, a.expandable_segments, 0};
    if (!a.expandable_segments) {
      const CachingAllocatorStats& unlimited = replay_once(settings, r, a);
      if (unlimited.peak_reserved_bytes <= b.allocator_bytes) return unlimited;
    }
    ReplayKey limited = settings;
    std::get<5>(limited) = b.allocator_bytes;
    return replay_once(limited, r, allocator_options(g, b));
  }

 private:
  // Sets a shared program's workspace buffers to this run's workspace.
  static void use(const Run& r) {
    for (BufferId id : r.workspace_buffers) r.program->buffers[static_cast<size_t>(id)].bytes = r.workspace;
  }

  const FitOptions& o_;
  std::map<std::pair<int64_t, int64_t>, Run> runs_;
  std::vector<std::unique_ptr<Program>> programs_;
  // (size, workspace, max_split_size, max_non_split_rounding, expandable, capacity; 0 = none).
  using ReplayKey = std::tuple<int64_t, int64_t, int64_t, int64_t, bool, int64_t>;
  const CachingAllocatorStats& replay_once(const ReplayKey& k, const Run& r, CachingAllocatorOptions a) {
    auto [it, added] = replays_.try_emplace(k);
    if (added) {
      a.capacity_bytes = std::get<5>(k);
      CachingAllocator alloc(a);
      use(r);
      simulate(*r.program, &alloc);
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
    if (!misfits_.count(v)) ++evaluations_;
    Result<FitPoint> p = capture_input_errors([&] { return point(v); });
    if (!p.ok()) {
      if (first) throw InputError(p.error());
      invalid_ = p.error();
      return nullptr;
    }
    return &cache_.emplace(v, p.value()).first->second;
  }

  // Without a replay when no replay could fit: the program's rounded live peak is a lower bound
  // on every replay's reserved peak (sim/allocated_lower_bound.h), and with the context and NCCL
  // it already passes the usable memory, so the point's headroom is negative (or the replay runs
  // out of memory): device_memory_from() says it does not fit either way.
  bool fits(int64_t v) override {
    auto it = cache_.find(v);
    if (it != cache_.end()) return it->second.device.fits;
    if (misfits_.count(v)) return false;
    ++evaluations_;
    Result<bool> f = capture_input_errors([&] {
      const SharedSweep::Run& r = run(v);
      if (!budget_) budget_ = device_budget(g_);
      if (budget_->context_bytes + budget_->nccl_bytes + r.rounded_peak > usable_bytes(*budget_)) {
        misfits_.insert(v);
        return false;
      }
      return cache_.emplace(v, point(v)).first->second.device.fits;
    });
    if (!f.ok()) {
      invalid_ = f.error();
      return false;
    }
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
    if (!key_) key_ = workspace_key(o_.estimate, g_);
    const SharedSweep::Run& r = sweep_.run(v, *key_);
    if (!r.ok) throw InputError(r.error);
    return r;
  }

  // What estimate() with this GPU reports at v.
  FitPoint point(int64_t v) {
    const SharedSweep::Run& r = run(v);
    if (!budget_) budget_ = device_budget(g_);
    return FitPoint{v, r.peak_bytes, device_memory_from(*budget_, sweep_.replay(v, *key_, g_, *budget_))};
  }

  const FitOptions& o_;
  const GpuOptions& g_;
  SharedSweep& sweep_;
  std::optional<int64_t> key_;
  std::optional<DeviceBudget> budget_;
  std::map<int64_t, FitPoint> cache_;
  std::set<int64_t> misfits_;  // valid sizes fits() answered without a point: none fits
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
