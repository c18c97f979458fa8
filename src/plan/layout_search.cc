#include "plan/layout_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>

#include "plan/evaluate.h"
#include "plan/layout_fit.h"
#include "plan/offload_traffic.h"
#include "plan/tensor_parallel_comm.h"
#include "schedule/transformer_blocks.h"
#include "util/checked.h"
#include "util/format.h"

namespace headroom {
namespace {

struct Engine {
  std::string name;
  DataParallelEngine kind;
  std::optional<int> zero_stage;
  std::optional<FsdpStrategy> fsdp;
  int64_t tensor_parallel = 1;
  // Offload families (estimate/offload.h), tried only when no other family fits.
  std::optional<OffloadDevice> offload_optimizer = std::nullopt;
  bool offload_params = false;
  int64_t pipeline_parallel = 1;  // plan/pipeline_layouts.h
  int64_t virtual_stages = 1;     // > 1: the interleaved schedule with that many model chunks per rank
  bool sequence_parallel = false;  // Megatron sequence parallelism over the T ranks
  // Megatron-LM's own DDP / distributed optimizer (--megatron): the sequence- and
  // pipeline-parallel families, which only Megatron-LM runs.
  bool megatron = false;
  bool offloads() const { return offload_optimizer.has_value() || offload_params; }
  int64_t model_parallel() const { return tensor_parallel * pipeline_parallel; }
  // Recompute levels tried when the plain program does not fit (plan/layout_fit.h): Megatron's
  // selective recompute first where its sequence-parallel layouts run, then every block.
  std::vector<Recompute> ladder() const {
    if (sequence_parallel) return {Recompute::None, Recompute::Selective, Recompute::Full};
    return {Recompute::None, Recompute::Full};
  }
};

const std::vector<Engine>& engines() {
  static const std::vector<Engine> all = {
      {"DDP", DataParallelEngine::Ddp, std::nullopt, std::nullopt},
      {"ZeRO-1", DataParallelEngine::Zero1, 1, std::nullopt},
      {"ZeRO-2", DataParallelEngine::Zero2, 2, std::nullopt},
      {"ZeRO-3", DataParallelEngine::Zero3, 3, std::nullopt},
      {"FSDP full", DataParallelEngine::FsdpFull, std::nullopt, FsdpStrategy::Full},
      {"FSDP grad-op", DataParallelEngine::FsdpGradOp, std::nullopt, FsdpStrategy::GradOp},
      {"ZeRO-2 offload", DataParallelEngine::Zero2, 2, std::nullopt, 1, OffloadDevice::Cpu, false},
      {"ZeRO-3 offload", DataParallelEngine::Zero3, 3, std::nullopt, 1, OffloadDevice::Cpu, true},
      {"FSDP offload", DataParallelEngine::FsdpFull, std::nullopt, FsdpStrategy::Full, 1, std::nullopt, true},
  };
  return all;
}

// Megatron tensor parallelism within one machine (T = 2, 4, 8 up to the GPUs per node), each
// with DDP and ZeRO-1, 2 and 3 across the N / T data-parallel groups (Megatron-DeepSpeed's
// combinations: DeepSpeed partitions over the data-parallel group its `mpu` argument names,
// runtime/engine.py DeepSpeedEngine(mpu=...) and zero/stage3.py's dp_process_group). FSDP 1.13
// has none (one rejection line). A T that does not divide N is rejected here; one that splits no
// whole head is rejected when its rank's graph is built.
std::vector<Engine> tensor_parallel_engines(int64_t gpus, int gpus_per_node, std::vector<LayoutRejection>& rejected) {
  std::vector<Engine> out;
  for (int64_t t = 2; t <= 8 && t <= gpus_per_node; t *= 2) {
    const std::string tp = fmt::format("TP {}", t);
    if (gpus % t != 0) {
      rejected.push_back({tp, fmt::format("{} GPUs are not a multiple of tensor-parallel {}", gpus, t)});
      continue;
    }
    out.push_back({tp + " x DDP", DataParallelEngine::Ddp, std::nullopt, std::nullopt, t});
    out.push_back({tp + " x ZeRO-1", DataParallelEngine::Zero1, 1, std::nullopt, t});
    out.push_back({tp + " x ZeRO-2", DataParallelEngine::Zero2, 2, std::nullopt, t});
    out.push_back({tp + " x ZeRO-3", DataParallelEngine::Zero3, 3, std::nullopt, t});
    // Megatron's sequence parallelism, with its own DDP or distributed optimizer (ZeRO-1).
    for (Engine e : {Engine{tp + " + SP x DDP", DataParallelEngine::Ddp, std::nullopt, std::nullopt, t},
                     Engine{tp + " + SP x ZeRO-1", DataParallelEngine::Zero1, 1, std::nullopt, t}}) {
      e.sequence_parallel = true;
      e.megatron = true;
      out.push_back(e);
    }
  }
  if (!out.empty()) {
    rejected.push_back({"TP x FSDP", "PyTorch 1.13's FSDP does not compose with tensor parallelism (2-D layouts came with DTensor in 2.x)"});
  }
  return out;
}

int64_t activation_element_bytes(Precision p) { return p == Precision::Fp32 ? 4 : 2; }

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

// The micro-batches a family tries, largest first, out of a rank batch of `batch`. 1.13's FSDP CPU
// offload cannot accumulate outside no_sync(): one micro-batch only. A pipeline needs at least P
// micro-batches in a step (m >= P; the interleaved schedule a multiple of P); none left rejects it.
std::vector<int64_t> family_micro_batches(const Engine& engine, int64_t batch) {
  const bool fsdp_offload = engine.fsdp && engine.offload_params;
  std::vector<int64_t> sizes = fsdp_offload ? std::vector<int64_t>{batch} : micro_batches(batch);
  if (engine.pipeline_parallel > 1) {
    const int64_t stages = engine.pipeline_parallel;
    std::erase_if(sizes, [&](int64_t m) { return batch / m < stages || (engine.virtual_stages > 1 && (batch / m) % stages != 0); });
  }
  return sizes;
}

}  // namespace

int64_t rank_batch(const LayoutPlan& plan, int64_t model_parallel) {
  return checked_mul(plan.global_batch / plan.gpus, model_parallel, "the batch of a model-parallel group");
}

EstimateOptions layout_options(const LayoutPlan& plan, const LayoutOption& option) {
  EstimateOptions o = plan.run;
  o.batch = rank_batch(plan, option.parallel.tensor_parallel * option.parallel.pipeline_parallel);
  o.parallel = option.parallel;
  if (option.micro_batches > 1 || option.parallel.pipeline_parallel > 1) o.micro_batch = option.micro_batch;
  // The recompute as the CLI names it (estimate --checkpoint blocks / attention builds the same
  // regions on the layout's graph; --emit megatron translates it to Megatron's flags).
  o.plan = {};
  if (option.recompute == Recompute::Full) o.checkpoint_ranges = {"blocks"};
  if (option.recompute == Recompute::Selective) o.checkpoint_ranges = {"attention"};
  return o;
}

namespace {

// The rejection of a layout whose every candidate holds the model state of `e` (plan/layout_fit.h):
// the state kept between steps where that alone is over the budget, else the optimizer step's.
std::string model_state_over(const Evaluation& e, int64_t budget) {
  if (e.held_bytes > budget) {
    return fmt::format("{} per GPU of parameters, gradients and optimizer states kept between steps (at any micro-batch), over the {} budget",
                       human_bytes(e.held_bytes), human_bytes(budget));
  }
  return fmt::format("{} per GPU in the optimizer step: parameters, gradients, optimizer states and the step's own buffers (at any micro-batch), over the {} budget",
                     human_bytes(e.optimizer_step_bytes), human_bytes(budget));
}

// What one family's search found, kept apart so that families can run on several threads and be
// merged in family order (the output does not depend on the threads).
struct FamilyOutcome {
  std::optional<LayoutOption> ranked;
  std::optional<LayoutRejection> rejected;
  std::optional<std::string> build_error;  // its rank graph could not be built (merge_outcome)
  int evaluations = 0;
  std::exception_ptr error;  // anything else thrown: rethrown by the merge, in family order
};

FamilyOutcome search_family(const Engine& engine, const LayoutPlan& plan, const LayoutRequest& request, PlanContext& ctx, std::vector<int64_t> sizes,
                            LayoutOption best);

// One family: its context (graphs shared through `graphs`), then its search; `evaluations`
// counts the candidates simulated (one asked twice is answered from memory).
FamilyOutcome fit_family(const Engine& engine, const LayoutPlan& plan, const LayoutRequest& request, const GpuSpec& spec, LayoutGraphs& graphs) {
  FamilyOutcome out;
  LayoutOption best;
  best.engine = engine.name;
  best.parallel.gpus = request.gpus;
  best.parallel.tensor_parallel = engine.tensor_parallel;
  best.parallel.zero_stage = engine.zero_stage;
  best.parallel.fsdp = engine.fsdp;
  best.parallel.offload_optimizer = engine.offload_optimizer;
  best.parallel.offload_params = engine.offload_params;
  best.parallel.pipeline_parallel = engine.pipeline_parallel;
  best.parallel.sequence_parallel = engine.sequence_parallel;
  best.parallel.megatron = engine.megatron;
  if (engine.virtual_stages > 1) {
    best.parallel.pipeline_schedule = PipelineScheduleKind::Interleaved;
    best.parallel.virtual_stages = engine.virtual_stages;
  }
  EstimateOptions o = plan.run;
  const int64_t batch = rank_batch(plan, engine.model_parallel());
  o.batch = batch;
  o.parallel = best.parallel;
  // Every GPU of a machine runs a rank whose host step (ZeRO-Offload, FSDP CPUOffload) shares the
  // machine's CPU with the others (cost_constants.h host_ranks).
  CostConstants constants;
  constants.host_ranks = static_cast<int>(std::min<int64_t>(request.gpus, plan.link.gpus_per_node));
  std::optional<PlanContext> ctx;
  std::vector<int64_t> sizes = family_micro_batches(engine, batch);
  try {
    ctx.emplace(o, plan.budget_bytes, CostModel(spec, constants), graphs);
    ctx->answer_for_layout_search();
    // The rank's graph at the largest micro-batch the family tries (the first tried, then
    // cached): a split the frontend refuses is found here.
    ctx->graph(sizes.empty() ? batch : sizes.front());
  } catch (const InputError& e) {
    out.build_error = e.what();  // merged in family order (merge_outcome)
    return out;
  }
  out = search_family(engine, plan, request, *ctx, std::move(sizes), best);
  out.evaluations = ctx->simulations();
  return out;
}

// The search of one family in its context (fit_family) over its micro-batches
// (family_micro_batches); `best` holds its layout.
FamilyOutcome search_family(const Engine& engine, const LayoutPlan& plan, const LayoutRequest& request, PlanContext& ctx, std::vector<int64_t> sizes,
                            LayoutOption best) {
  FamilyOutcome out;
  const int64_t batch = ctx.options().batch;
  const int64_t stages = engine.pipeline_parallel;
  std::vector<Recompute> ladder = engine.ladder();
  // A candidate over the budget in model state rejects the family (plan/layout_fit.h).
  auto state_over = [&](const Evaluation& e) {
    if (e.optimizer_step_bytes <= plan.budget_bytes) return false;
    out.rejected = LayoutRejection{engine.name, model_state_over(e, plan.budget_bytes)};
    return true;
  };
  // What a rejection adds about the recompute of the candidate it quotes.
  auto tried = [](Recompute level) {
    return level == Recompute::Full ? " with every block checkpointed" : level == Recompute::Selective ? " with each attention core recomputed" : "";
  };
  if (stages > 1) {
    // The micro-batch of a pipeline is always explicit (--micro-batch).
    if (sizes.empty()) {
      out.rejected = LayoutRejection{engine.name, fmt::format("{} samples per pipeline and step are fewer than its {} stages (m >= P micro-batches{})", batch, stages,
                                                              engine.virtual_stages > 1 ? ", a multiple of P when interleaved" : "")};
      return out;
    }
    // A pipeline evaluation simulates several stages over m micro-batches: the smallest
    // micro-batch (the least activation memory: every size keeps min(P, m) = P micro-batches in
    // flight on stage 0) is tried as a probe, at each recompute level; when none fits, no larger
    // one does, and when only recompute fits, no larger one fits without it. The probe is not
    // needed when the largest micro-batch fits, plain or with the ladder's heaviest recompute:
    // the family has a fit, and the fit below tries both candidates first and keeps them (they
    // are simulated first and answered from memory there). The probe is the costliest candidate
    // (the most micro-batches per step), the largest micro-batch the cheapest. Only the probe's
    // peaks are quoted (its rejection): every other candidate is asked fit_only, and one whose
    // first stage alone is over the budget in live bytes costs that stage's program only.
    bool largest_fits = false;
    if (sizes.size() > 1) {
      const Evaluation e = ctx.evaluate({MemoryPlan{}, sizes.front(), /*fit_only=*/true});
      if (state_over(e)) return out;
      largest_fits = e.feasible;
      if (!largest_fits && ladder.back() != Recompute::None) {
        MemoryPlan p = recompute_plan(ctx.graph(sizes.front()), ladder.back());
        if (!p.checkpoints.empty()) {
          const Evaluation recomputed = ctx.evaluate({std::move(p), sizes.front(), /*fit_only=*/true});
          if (state_over(recomputed)) return out;
          largest_fits = recomputed.feasible;
        }
      }
    }
    if (sizes.size() > 1 && !largest_fits) {
      bool fits = false, plain = false;
      int64_t smallest = 0;
      Recompute smallest_at = Recompute::None;  // the recompute of the smallest peak
      for (Recompute level : ladder) {
        MemoryPlan p = recompute_plan(ctx.graph(sizes.back()), level);
        if (level != Recompute::None && p.checkpoints.empty()) continue;
        const Evaluation probe = ctx.evaluate({p, sizes.back()});
        if (state_over(probe)) return out;
        if (smallest == 0 || probe.peak_bytes < smallest) {
          smallest = probe.peak_bytes;
          smallest_at = level;
        }
        if (probe.feasible) {
          fits = true;
          plain = level == Recompute::None;
          break;
        }
      }
      if (!fits) {
        out.rejected = LayoutRejection{engine.name, fmt::format("{} per GPU at micro-batch {}{}, over the {} budget", human_bytes(smallest),
                                                                sizes.back(), tried(smallest_at), human_bytes(plan.budget_bytes))};
        return out;
      }
      if (!plain) std::erase(ladder, Recompute::None);
    }
  }
  const int64_t data_parallel = request.gpus / engine.model_parallel();
  auto step_of = [&](const Evaluation& e, int64_t m, LayoutOption& out) {
    const Graph& g = ctx.graph(m);
    auto [param_bytes, grad_bytes] = parameter_and_gradient_bytes(g);
    auto [elements, element_bytes] = parameter_elements(g);
    out.micro_batch = m;
    out.micro_batches = batch / m;
    out.peak_bytes = e.peak_bytes;
    out.compute_ms = e.time.total_ms;
    out.optimizer_ms = e.time.optimizer_ms;
    // A data-parallel group's members are T GPUs apart: a machine holds gpus_per_node / T of them.
    Interconnect dp_link = plan.link;
    dp_link.gpus_per_node = std::max<int>(1, plan.link.gpus_per_node / static_cast<int>(engine.tensor_parallel));
    // A pipeline stage holds about 1 / P of the parameters and runs 1 / P of the layers.
    // Megatron-LM reduces its fp32 main_grad buffer (grad_reduce_in_fp32 under bf16): 4 bytes a gradient element.
    const int64_t reduced_grad_bytes = engine.megatron ? checked_mul(grad_bytes / element_bytes, 4, "gradient bytes") : grad_bytes;
    out.comm = step_communication(engine.kind, param_bytes / stages, reduced_grad_bytes / stages, data_parallel, out.micro_batches, dp_link);
    out.exposed_comm_ms = std::max(0.0, out.comm.ms - e.time.compute_ms * 2.0 / 3.0);
    Graph stage_dims;
    stage_dims.dims = g.dims;
    if (stages > 1 && stage_dims.dims.count("layers")) stage_dims.dims["layers"] /= stages;
    out.tensor_comm = tensor_parallel_communication(stage_dims, engine.tensor_parallel, out.micro_batches,
                                                    activation_element_bytes(plan.run.precision), plan.link, engine.sequence_parallel);
    if (stages > 1) {
      const int64_t hidden_bytes = checked_mul(checked_mul(checked_mul(m, g.dims.count("seq") ? g.dims.at("seq") : 1, "p2p"),
                                                           g.dims.count("hidden") ? g.dims.at("hidden") : 0, "p2p"),
                                               activation_element_bytes(plan.run.precision), "p2p");
      out.pipeline = pipeline_overhead(e.time.compute_ms, stages, engine.virtual_stages, out.micro_batches, hidden_bytes, request.gpus, plan.link);
    }
    out.offload_bytes = offload_bytes_per_step(engine.kind, engine.offload_optimizer.has_value(), engine.offload_params, elements,
                                               data_parallel, out.micro_batches, element_bytes);
    out.offload_ms = out.offload_bytes > 0 ? ctx.cost().transfer_ms(out.offload_bytes) : 0;
    out.step_ms = out.compute_ms + out.exposed_comm_ms + out.tensor_comm.ms + out.offload_ms + out.pipeline.bubble_ms + out.pipeline.p2p_ms;
    return out.step_ms;
  };
  // Pipeline stages checkpoint their own blocks (schedule/pipeline_plan.h).
  // A pipeline of several sizes reaches the fit only with a candidate that fits (above).
  const bool fit_assured = stages > 1 && sizes.size() > 1;
  EngineFit fit = fit_engine(
      ctx, sizes, ladder,
      [&](const Evaluation& e, int64_t m) {
        LayoutOption scratch = best;
        return step_of(e, m, scratch);
      },
      fit_assured);
  if (fit.found) {
    step_of(fit.evaluation, fit.micro_batch, best);
    best.checkpointed = fit.checkpointed;
    best.recompute = fit.recompute;
    best.plan = fit.plan;
    best.samples_per_s = best.step_ms > 0 ? static_cast<double>(plan.global_batch) / best.step_ms * 1e3 : 0;
    out.ranked = best;
  } else if (fit.model_state_over_budget) {
    out.rejected = LayoutRejection{engine.name, model_state_over(*fit.model_state_over_budget, plan.budget_bytes)};
  } else {
    out.rejected = LayoutRejection{engine.name, fmt::format("{} per GPU at micro-batch {}{}, over the {} budget",
                                                            human_bytes(fit.smallest_peak_bytes), fit.smallest_peak_micro_batch, tried(fit.smallest_peak_recompute),
                                                            human_bytes(plan.budget_bytes))};
  }
  return out;
}

// Every family of `families` searched, on up to request.threads threads (0: automatic, below),
// the outcomes in the order of `families`. Each family has its own PlanContext: nothing is shared
// between threads but read-only inputs and the graphs, each built once (LayoutGraphs).
std::vector<FamilyOutcome> fit_families(const std::vector<const Engine*>& families, const LayoutPlan& plan, const LayoutRequest& request,
                                        const GpuSpec& spec, LayoutGraphs& graphs) {
  std::vector<FamilyOutcome> out(families.size());
  auto run = [&](size_t i) {
    try {
      out[i] = fit_family(*families[i], plan, request, spec, graphs);
    } catch (...) {
      out[i].error = std::current_exception();
    }
  };
  // By default one thread per hardware thread: on the 2-core build machine unloaded, two threads
  // halve the wall time (docs/distributed.md); under a heavy load the second gained no wall time
  // and lost none.
  const size_t automatic = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min(families.size(), request.threads > 0 ? static_cast<size_t>(request.threads) : automatic);
  if (threads <= 1) {
    for (size_t i = 0; i < families.size(); ++i) run(i);
    return out;
  }
  // Threads take families in turn, the costliest kinds first so that the last ones taken are short
  // (longest first: a long family taken last would leave the other threads idle). A pipeline
  // family builds up to three stage programs of L / P layers per candidate (P = 2 the most), a
  // tensor-parallel one a rank's program of every layer: pipelines by P, then tensor-parallel,
  // then the others, each in family order. The outcomes stay in family order.
  std::vector<size_t> order(families.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto kind = [&](size_t i) {
    const Engine& e = *families[i];
    return e.pipeline_parallel > 1 ? std::pair<int, int64_t>{0, e.pipeline_parallel} : std::pair<int, int64_t>{e.tensor_parallel > 1 ? 1 : 2, 0};
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return kind(a) < kind(b); });
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (size_t k = next++; k < order.size(); k = next++) run(order[k]);
    });
  }
  for (std::thread& t : pool) t.join();
  return out;
}

// Adds a family's outcome to the plan, as the sequential search did.
void merge_outcome(const Engine& engine, FamilyOutcome& o, LayoutPlan& plan) {
  if (o.error) std::rethrow_exception(o.error);
  plan.evaluations += o.evaluations;
  if (o.build_error) {
    // A rank graph that cannot be built (no Megatron split, T not dividing the heads) rules out
    // every engine at that T: one line for it, none repeated.
    const bool tp = engine.tensor_parallel > 1;
    const std::string family = tp ? fmt::format("TP {}{}", engine.tensor_parallel, engine.sequence_parallel ? " + SP" : "") : engine.name;
    if (!tp || std::none_of(plan.rejected.begin(), plan.rejected.end(), [&](const LayoutRejection& r) {
          return r.why == *o.build_error || r.engine == family;
        })) {
      plan.rejected.push_back({family, *o.build_error});
    }
    return;
  }
  if (o.ranked) plan.ranked.push_back(std::move(*o.ranked));
  if (o.rejected) plan.rejected.push_back(std::move(*o.rejected));
}

}  // namespace

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
    // The plain data-parallel engines, then tensor parallelism, then (only when none of those fits)
    // the offload families.
    std::vector<Engine> families;
    for (const Engine& e : engines()) {
      if (!e.offloads()) families.push_back(e);
    }
    for (Engine& e : tensor_parallel_engines(request.gpus, plan.link.gpus_per_node, plan.rejected)) families.push_back(e);
    // Pipeline parallelism (P x T x ZeRO-1), over the blocks of the model's graph.
    {
      std::vector<std::pair<std::string, std::string>> why;
      const int blocks = static_cast<int>(transformer_blocks(build_graph(plan.run, 1)).segments.size());
      for (const PipelineShape& s : pipeline_shapes(blocks, request.gpus, plan.link.gpus_per_node, why)) {
        // 1F1B; with T > 1 also sequence-parallel; and the interleaved schedule with v = 2 and 4
        // model chunks where the stage's layers divide (Megatron's --num-layers-per-virtual-pipeline-stage).
        auto family = [&](int64_t v, bool sp) {
          const std::string pp = v > 1 ? fmt::format("PP {} (v {})", s.pipeline_parallel, v) : fmt::format("PP {}", s.pipeline_parallel);
          Engine e{s.tensor_parallel > 1 ? fmt::format("{} x TP {}{} x ZeRO-1", pp, s.tensor_parallel, sp ? " + SP" : "") : pp + " x ZeRO-1",
                   DataParallelEngine::Zero1, 1, std::nullopt, s.tensor_parallel};
          e.pipeline_parallel = s.pipeline_parallel;
          e.virtual_stages = v;
          e.sequence_parallel = sp;
          e.megatron = true;
          families.push_back(e);
        };
        family(1, false);
        if (s.tensor_parallel > 1) family(1, true);
        for (int64_t v : pipeline_virtual_stages(blocks, s.pipeline_parallel)) family(v, false);
      }
      for (auto& [family, reason] : why) plan.rejected.push_back({family, reason});
    }
    for (const Engine& e : engines()) {
      if (e.offloads()) families.push_back(e);
    }
    // The families without offloading, then (only when none of them fits) the offload families.
    std::vector<const Engine*> plain, offload;
    for (const Engine& e : families) (e.offloads() ? offload : plain).push_back(&e);
    LayoutGraphs graphs;  // each (T, SP, micro-batch) graph built once for every family
    std::vector<FamilyOutcome> found = fit_families(plain, plan, request, *spec, graphs);
    bool plain_fits = false;
    for (size_t i = 0; i < plain.size(); ++i) {
      plain_fits = plain_fits || found[i].ranked.has_value();
      merge_outcome(*plain[i], found[i], plan);
    }
    if (!plain_fits) {
      std::vector<FamilyOutcome> offloaded = fit_families(offload, plan, request, *spec, graphs);
      for (size_t i = 0; i < offload.size(); ++i) merge_outcome(*offload[i], offloaded[i], plan);
    }
    std::stable_sort(plan.ranked.begin(), plan.ranked.end(),
                     [](const LayoutOption& a, const LayoutOption& b) { return a.step_ms < b.step_ms; });
    return plan;
  });
}

}  // namespace headroom
