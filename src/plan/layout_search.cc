#include "plan/layout_search.h"

#include <fmt/format.h>

#include <algorithm>

#include "plan/evaluate.h"
#include "plan/layout_fit.h"
#include "plan/offload_traffic.h"
#include "util/checked.h"
#include "util/format.h"

namespace headroom {
namespace {

struct Engine {
  const char* name;
  DataParallelEngine kind;
  std::optional<int> zero_stage;
  std::optional<FsdpStrategy> fsdp;
  // Offload families (estimate/offload.h), tried only when no other family fits.
  std::optional<OffloadDevice> offload_optimizer = std::nullopt;
  bool offload_params = false;
};

const std::vector<Engine>& engines() {
  static const std::vector<Engine> all = {
      {"DDP", DataParallelEngine::Ddp, std::nullopt, std::nullopt},
      {"ZeRO-1", DataParallelEngine::Zero1, 1, std::nullopt},
      {"ZeRO-2", DataParallelEngine::Zero2, 2, std::nullopt},
      {"ZeRO-3", DataParallelEngine::Zero3, 3, std::nullopt},
      {"FSDP full", DataParallelEngine::FsdpFull, std::nullopt, FsdpStrategy::Full},
      {"FSDP grad-op", DataParallelEngine::FsdpGradOp, std::nullopt, FsdpStrategy::GradOp},
      {"ZeRO-2 offload", DataParallelEngine::Zero2, 2, std::nullopt, OffloadDevice::Cpu, false},
      {"ZeRO-3 offload", DataParallelEngine::Zero3, 3, std::nullopt, OffloadDevice::Cpu, true},
      {"FSDP offload", DataParallelEngine::FsdpFull, std::nullopt, FsdpStrategy::Full, std::nullopt, true},
  };
  return all;
}

// Parameter bytes one rank computes with, and the gradient bytes of the trainable ones.
std::pair<int64_t, int64_t> parameter_and_gradient_bytes(const Graph& g) {
  int64_t params = 0, grads = 0;
  for (const Tensor& t : g.tensors) {
    if (t.role != TensorRole::Parameter || t.tied_to != kNone) continue;
    params += t.bytes();
    if (t.requires_grad()) grads += t.bytes();
  }
  return {params, grads};
}

// Parameter elements and the bytes of one (the graph's parameter dtype).
std::pair<int64_t, int64_t> parameter_elements(const Graph& g) {
  int64_t n = 0, elem = 4;
  for (const Tensor& t : g.tensors) {
    if (t.role != TensorRole::Parameter || t.tied_to != kNone) continue;
    n += t.numel();
    elem = dtype_size(t.dtype);
  }
  return {n, elem};
}

// Micro-batches tried, largest first: the per-GPU batch and its halvings while they divide it.
std::vector<int64_t> micro_batches(int64_t batch) {
  std::vector<int64_t> m;
  for (int64_t b = batch; b >= 1; b /= 2) {
    m.push_back(b);
    if (b % 2 != 0) break;
  }
  if (m.back() != 1) m.push_back(1);
  return m;
}

}  // namespace

EstimateOptions layout_options(const LayoutPlan& plan, const LayoutOption& option) {
  EstimateOptions o = plan.run;
  o.batch = plan.batch_per_gpu;
  o.parallel = option.parallel;
  o.plan = option.plan;
  if (option.micro_batches > 1) o.micro_batch = option.micro_batch;
  return o;
}

Result<LayoutPlan> search_layouts(const LayoutRequest& request) {
  return capture_input_errors([&]() -> LayoutPlan {
    const EstimateOptions& run = request.run;
    if (run.mode != RunMode::Training) throw InputError("plan --gpus searches training layouts (--mode train)");
    if (run.device != "cuda") throw InputError("plan --gpus needs --device cuda");
    if (!run.gpu || run.gpu->gpu.empty()) throw InputError("plan --gpus N needs --gpu NAME (its memory, links and speed)");
    if (run.parallel.given()) throw InputError("plan --gpus searches the layout itself: give --gpus N without --zero, --fsdp or --tensor-parallel");
    if (run.micro_batch) throw InputError("plan --gpus chooses the micro-batch itself: leave out --micro-batch");
    if (request.gpus < 2 || request.gpus > 4096) throw InputError("--gpus must be 2 to 4096 for a layout search");
    const GpuSpec* spec = gpu_spec(*run.gpu);
    HEADROOM_CHECK(spec != nullptr, "a named GPU has a spec");
    LayoutPlan plan;
    plan.model = run.model;
    plan.gpu = spec->name;
    plan.gpus = request.gpus;
    plan.global_batch = request.global_batch.value_or(checked_mul(run.batch, request.gpus, "--batch x --gpus"));
    if (plan.global_batch % request.gpus != 0) {
      throw InputError(fmt::format("--global-batch {} is not a multiple of --gpus {}", plan.global_batch, request.gpus));
    }
    plan.batch_per_gpu = plan.global_batch / request.gpus;
    const int64_t capacity = run.gpu->gpu_memory.value_or(spec->memory_bytes);
    plan.budget_bytes = capacity - static_cast<int64_t>(static_cast<double>(capacity) * run.gpu->margin);
    plan.link = default_interconnect(*spec, request.interconnect_bytes_per_s);
    plan.run = run;
    plan.run.plan = {};
    bool plain_fits = false;  // a family without offloading fits
    for (const Engine& engine : engines()) {
      const bool offloads = engine.offload_optimizer || engine.offload_params;
      if (offloads && plain_fits) continue;  // offloading only when nothing else fits
      LayoutOption best;
      best.engine = engine.name;
      best.parallel.gpus = request.gpus;
      best.parallel.zero_stage = engine.zero_stage;
      best.parallel.fsdp = engine.fsdp;
      best.parallel.offload_optimizer = engine.offload_optimizer;
      best.parallel.offload_params = engine.offload_params;
      EstimateOptions o = plan.run;
      o.batch = plan.batch_per_gpu;
      o.parallel = best.parallel;
      std::optional<PlanContext> ctx;
      try {
        ctx.emplace(o, plan.budget_bytes, CostModel(*spec));
      } catch (const InputError& e) {
        plan.rejected.push_back({engine.name, e.what()});
        continue;
      }
      // 1.13's FSDP CPU offload cannot accumulate outside no_sync(): one micro-batch only.
      const bool fsdp_offload = engine.fsdp && engine.offload_params;
      const std::vector<int64_t> sizes = fsdp_offload ? std::vector<int64_t>{plan.batch_per_gpu} : micro_batches(plan.batch_per_gpu);
      auto step_of = [&](const Evaluation& e, int64_t m, LayoutOption& out) {
        const Graph& g = ctx->graph(m);
        auto [param_bytes, grad_bytes] = parameter_and_gradient_bytes(g);
        auto [elements, element_bytes] = parameter_elements(g);
        out.micro_batch = m;
        out.micro_batches = plan.batch_per_gpu / m;
        out.peak_bytes = e.peak_bytes;
        out.compute_ms = e.time.total_ms;
        out.comm = step_communication(engine.kind, param_bytes, grad_bytes, request.gpus, out.micro_batches, plan.link);
        out.exposed_comm_ms = std::max(0.0, out.comm.ms - e.time.compute_ms * 2.0 / 3.0);
        out.offload_bytes = offload_bytes_per_step(engine.kind, engine.offload_optimizer.has_value(), engine.offload_params, elements,
                                                   request.gpus, out.micro_batches, element_bytes);
        out.offload_ms = out.offload_bytes > 0 ? ctx->cost().transfer_ms(out.offload_bytes) : 0;
        out.step_ms = out.compute_ms + out.exposed_comm_ms + out.offload_ms;
        return out.step_ms;
      };
      EngineFit fit = fit_engine(*ctx, sizes, /*try_checkpointing=*/true, [&](const Evaluation& e, int64_t m) {
        LayoutOption scratch = best;
        return step_of(e, m, scratch);
      });
      plan.evaluations += fit.evaluations;
      if (fit.found) {
        step_of(fit.evaluation, fit.micro_batch, best);
        best.checkpointed = fit.checkpointed;
        best.plan = fit.plan;
        best.samples_per_s = best.step_ms > 0 ? static_cast<double>(plan.global_batch) / best.step_ms * 1e3 : 0;
        plan.ranked.push_back(best);
        plain_fits = plain_fits || !offloads;
      } else {
        plan.rejected.push_back({engine.name, fmt::format("{} per GPU at micro-batch {}{}, over the {} budget",
                                                          human_bytes(fit.smallest_peak_bytes), sizes.back(),
                                                          fit.evaluations > static_cast<int>(sizes.size()) ? " with every block checkpointed" : "",
                                                          human_bytes(plan.budget_bytes))});
      }
    }
    std::stable_sort(plan.ranked.begin(), plan.ranked.end(),
                     [](const LayoutOption& a, const LayoutOption& b) { return a.step_ms < b.step_ms; });
    return plan;
  });
}

}  // namespace headroom
