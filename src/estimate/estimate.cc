#include "estimate/estimate.h"

#include <algorithm>
#include <map>

#include "frontends/zoo/registry.h"
#include "training/autocast.h"
#include "util/checked.h"
#include "util/suggest.h"

namespace headroom {

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::Fp32: return "fp32";
    case Precision::AmpFp16: return "amp-fp16";
    case Precision::AmpBf16: return "amp-bf16";
    case Precision::Bf16: return "bf16";
  }
  return "?";
}

std::optional<Precision> parse_precision(std::string_view s) {
  for (Precision p : {Precision::Fp32, Precision::AmpFp16, Precision::AmpBf16, Precision::Bf16}) {
    if (precision_name(p) == s) return p;
  }
  return std::nullopt;
}

Graph build_graph(const EstimateOptions& o, int64_t batch) {
  BuildConfig cfg;
  cfg.batch = batch;
  cfg.seq = o.seq;
  cfg.loss = o.loss;
  cfg.dropout_scale = o.dropout ? 1.0 : 0.0;
  cfg.inference = o.mode == RunMode::Inference;
  cfg.dtype = o.precision == Precision::Bf16 ? DType::BF16 : DType::F32;
  cfg.tensor_parallel = o.parallel.tensor_parallel;
  if (o.graph_loader && cfg.tensor_parallel > 1) throw InputError("--tensor-parallel applies to built-in models with a Megatron split (gpt2, llama)");
  Graph g = o.graph_loader ? o.graph_loader(cfg) : build_model(o.model, cfg);
  if (o.precision == Precision::AmpFp16) return apply_autocast(g, DType::F16, /*grad_scaler=*/o.mode == RunMode::Training);
  // bf16 has fp32's range: autocast to bf16 is used without a GradScaler.
  if (o.precision == Precision::AmpBf16) return apply_autocast(g, DType::BF16, /*grad_scaler=*/false);
  return g;
}

ScheduleOptions schedule_options(const EstimateOptions& o) {
  ScheduleOptions s;
  s.mode = o.mode;
  s.optimizer = o.optimizer;
  s.device = o.device == "cpu" ? DeviceProfile::cpu() : DeviceProfile::cuda();
  s.foreach = o.foreach.value_or(s.device.default_foreach);
  if (o.device == "cuda") {
    if (o.gpu && !o.gpu->gpu.empty()) s.device.cublas_workspace_bytes = cublas_workspace_for(gpu_spec(*o.gpu));
    if (o.cublas_workspace_bytes) s.device.cublas_workspace_bytes = *o.cublas_workspace_bytes;
    if (o.conv_workspace) s.device.conv_workspace = *o.conv_workspace;
    s.device.conv_workspace_bytes = o.conv_workspace_bytes;
  }
  s.iterations = o.iterations;
  s.zero_grad = o.zero_grad;
  if (o.mode == RunMode::Training) s.plan = o.plan;
  s.sharding = resolve_sharding(o.parallel, o.mode == RunMode::Training, o.device == "cuda",
                                o.precision == Precision::AmpFp16 || o.precision == Precision::AmpBf16,
                                o.zero_grad == ZeroGrad::Zeros);
  return s;
}

Estimate summarize(const EstimateOptions& o, const Graph& g, const Program& p, const SimResult& sim) {
  Estimate e;
  e.options = o;
  e.parameter_count = g.parameter_count();
  e.weights_bytes = g.weights_bytes();
  e.input_bytes = g.input_bytes();
  e.peak_bytes = sim.peak.bytes;
  e.breakdown_at_peak = sim.at_peak;
  e.op_count = static_cast<int64_t>(g.ops.size());
  e.notes = g.notes;
  if (sim.peak.step >= 0) {
    const Step& st = p.steps[static_cast<size_t>(sim.peak.step)];
    e.peak_phase = st.phase;
    e.peak_op = st.label;
    e.peak_iteration = st.iteration;
    std::vector<BufferId> live = live_after(p, sim.peak.event);
    std::stable_sort(live.begin(), live.end(), [&](BufferId a, BufferId b) {
      return p.buffers[static_cast<size_t>(a)].bytes > p.buffers[static_cast<size_t>(b)].bytes;
    });
    // Categories at the peak can differ from the category at birth (a stolen gradient).
    std::vector<Category> cat(p.buffers.size());
    for (int32_t ei = 0; ei <= sim.peak.event; ++ei) {
      const Event& ev = p.events[static_cast<size_t>(ei)];
      if (ev.kind == Event::Kind::Alloc) cat[static_cast<size_t>(ev.buffer)] = p.buffers[static_cast<size_t>(ev.buffer)].category;
      if (ev.kind == Event::Kind::Retag) cat[static_cast<size_t>(ev.buffer)] = ev.category;
    }
    for (size_t i = 0; i < live.size() && static_cast<int>(i) < o.top_tensors; ++i) {
      const Buffer& b = p.buffers[static_cast<size_t>(live[i])];
      e.largest_at_peak.push_back({b.name, cat[static_cast<size_t>(live[i])], b.bytes,
                                   b.op == kNone ? "" : g.op(b.op).name});
    }
  }
  for (const IterationPeaks& ip : sim.iterations) {
    IterationSummary s;
    s.iteration = ip.iteration;
    s.peak_bytes = ip.peak.bytes;
    const Step& st = p.steps[static_cast<size_t>(ip.peak.step)];
    s.peak_phase = st.phase;
    s.peak_op = st.label;
    for (const auto& [phase, pp] : ip.by_phase) {
      s.phases.push_back({phase, pp.bytes, p.steps[static_cast<size_t>(pp.step)].label});
    }
    e.iterations.push_back(std::move(s));
  }
  return e;
}

void add_checkpoint_ranges(const Graph& g, const std::vector<std::string>& ranges, MemoryPlan& plan) {
  std::map<std::string, OpId> by_name;
  std::vector<std::string> names;
  for (const Op& op : g.ops) {
    by_name.emplace(op.name, op.id);
    names.push_back(op.name);
  }
  auto find = [&](const std::string& name, const std::string& range) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      throw InputError("--checkpoint " + range + ": no op named '" + name + "'" + suggestion_suffix(name, names));
    }
    return it->second;
  };
  for (const std::string& r : ranges) {
    size_t dots = r.find("..");
    if (dots == std::string::npos || dots == 0 || dots + 2 >= r.size()) throw InputError("--checkpoint '" + r + "' is not FIRST..LAST");
    OpId first = find(r.substr(0, dots), r), last = find(r.substr(dots + 2), r);
    if (first > last) throw InputError("--checkpoint " + r + ": the first op runs after the last");
    if (g.op(last).stage != OpStage::Model) throw InputError("--checkpoint " + r + ": a segment cannot hold loss ops");
    if (!checkpoint_gets_gradients(g, first, last)) {
      throw InputError("--checkpoint " + r + ": no input of the segment requires grad, so torch.utils.checkpoint would give its parameters no gradients; start it after an op with parameters");
    }
    plan.checkpoints.push_back({first, last});
  }
  std::sort(plan.checkpoints.begin(), plan.checkpoints.end(), [](const CheckpointSegment& a, const CheckpointSegment& b) { return a.first < b.first; });
  for (size_t i = 1; i < plan.checkpoints.size(); ++i) {
    if (plan.checkpoints[i].first <= plan.checkpoints[i - 1].last) throw InputError("--checkpoint segments overlap");
  }
}

Result<Estimate> estimate(const EstimateOptions& o) {
  return capture_input_errors([&]() -> Estimate {
    if (o.batch <= 0) throw InputError("batch must be a positive integer, got " + std::to_string(o.batch));
    if (o.seq && *o.seq <= 0) throw InputError("sequence length must be positive, got " + std::to_string(*o.seq));
    if (o.device != "cuda" && o.device != "cpu") throw InputError("unknown device '" + o.device + "' (cuda or cpu)");
    int64_t micro = o.batch;
    int micro_batches = 1;
    if (o.micro_batch) {
      if (o.mode != RunMode::Training) throw InputError("--micro-batch applies to training only");
      if (*o.micro_batch <= 0 || *o.micro_batch > o.batch || o.batch % *o.micro_batch != 0) {
        throw InputError("micro-batch " + std::to_string(*o.micro_batch) + " must divide the batch " +
                         std::to_string(o.batch));
      }
      micro = *o.micro_batch;
      micro_batches = static_cast<int>(o.batch / micro);
    }
    Graph g = build_graph(o, micro);
    ScheduleOptions so = schedule_options(o);
    so.micro_batches = micro_batches;
    if (!o.checkpoint_ranges.empty()) {
      if (o.mode != RunMode::Training) throw InputError("--checkpoint applies to training only");
      add_checkpoint_ranges(g, o.checkpoint_ranges, so.plan);
    }
    Program p = build_program(g, so);
    if (o.gpu && o.device != "cuda") throw InputError("--gpu needs --device cuda");
    SimResult sim = simulate(p);
    Estimate e = summarize(o, g, p, sim);
    if (o.gpu) e.device = device_memory(p, *o.gpu);
    if (o.parallel.given()) e.per_gpu = per_gpu_summary(o.parallel, so.sharding, p, sim);
    e.foreach = so.foreach;
    e.micro_batch = micro;
    e.micro_batches = micro_batches;
    if (o.keep_program) e.program = std::move(p);
    return e;
  });
}

}  // namespace headroom
