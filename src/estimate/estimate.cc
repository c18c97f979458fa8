#include "estimate/estimate.h"
#include "estimate/estimate_program.h"

#include <algorithm>
#include <map>
#include <regex>

#include "estimate/offload.h"
#include "estimate/pipeline_estimate.h"
#include "frontends/zoo/registry.h"
#include "schedule/transformer_blocks.h"
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
    case Precision::Fp16: return "fp16";
  }
  return "?";
}

std::optional<Precision> parse_precision(std::string_view s) {
  for (Precision p : {Precision::Fp32, Precision::AmpFp16, Precision::AmpBf16, Precision::Bf16, Precision::Fp16}) {
    if (precision_name(p) == s) return p;
  }
  return std::nullopt;
}

void apply_freeze(Graph& g, const std::vector<std::string>& patterns) {
  for (const std::string& pattern : patterns) {
    std::regex re;
    try {
      re = std::regex(pattern);
    } catch (const std::regex_error&) {
      throw InputError("--freeze '" + pattern + "' is not a regular expression");
    }
    bool any = false;
    for (Tensor& t : g.tensors) {
      // named_parameters() lists a tied parameter once, under its first name.
      if (t.role == TensorRole::Parameter && t.tied_to == kNone && std::regex_search(t.name, re)) {
        t.frozen = true;
        any = true;
      }
    }
    if (!any) throw InputError("--freeze '" + pattern + "' matches no parameter of " + g.model);
  }
  // A tied parameter is the same tensor as the one it is tied to.
  for (Tensor& t : g.tensors) {
    if (t.tied_to != kNone) t.frozen = g.tensors[static_cast<size_t>(t.tied_to)].frozen;
  }
}

Graph build_graph(const EstimateOptions& o, int64_t batch) {
  BuildConfig cfg;
  cfg.batch = batch;
  cfg.seq = o.seq;
  cfg.loss = o.loss;
  cfg.dropout_scale = o.dropout ? 1.0 : 0.0;
  cfg.inference = o.mode == RunMode::Inference;
  cfg.mha_sdpa = (o.device == "cpu" ? DeviceProfile::cpu() : DeviceProfile::cuda()).mha_sdpa;
  cfg.dtype = o.precision == Precision::Bf16 ? DType::BF16 : o.precision == Precision::Fp16 ? DType::F16 : DType::F32;
  cfg.attention = o.attention;
  cfg.lora = o.lora;
  cfg.weights = o.weights;
  cfg.logits_to_keep = o.logits_to_keep;
  if (o.group_size) {
    if (o.weights != WeightFormat::Int4) throw InputError("--group-size applies to --weights int4");
    cfg.group_size = *o.group_size;
  }
  cfg.tensor_parallel = o.parallel.tensor_parallel;
  cfg.sequence_parallel = o.parallel.sequence_parallel;
  // The frontend builds one rank's graph, or rejects a split it does not know (select_frontend).
  Graph g = o.graph_loader ? o.graph_loader(cfg) : build_model(o.model, cfg);
  apply_freeze(g, o.freeze);
  // A model without parameters at all gets its own message (estimate()); this one is for --freeze.
  if (o.mode == RunMode::Training && g.parameter_count() > 0 && g.trainable_parameter_count() == 0) {
    throw InputError("every parameter is frozen: a training step has nothing to train");
  }
  if (o.parallel.sequence_parallel && (o.precision == Precision::AmpFp16 || o.precision == Precision::AmpBf16)) {
    // The all-gathers feed Megatron's linears in the model's own 16-bit dtype (Float16Module);
    // autocast would cast the gathered sequence instead (resolve_sharding says the same).
    throw InputError("--sequence-parallel: Megatron runs its model in 16 bits itself (Float16Module), not through autocast: use --precision bf16 (or fp32)");
  }
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
  s.foreach = optimizer_has_foreach(o.optimizer) && o.foreach.value_or(s.device.default_foreach);
  if (o.device == "cpu") s.device.threads = o.threads.value_or(1);
  if (o.device == "cuda") {
    if (o.gpu && !o.gpu->gpu.empty()) {
      const GpuSpec* spec = gpu_spec(*o.gpu);
      s.device.cublas_workspace_bytes = cublas_workspace_for(spec);
      s.device.reduce_device = reduce_device_for(spec);
    }
    if (o.cublas_workspace_bytes) s.device.cublas_workspace_bytes = *o.cublas_workspace_bytes;
    if (o.reduce_device) s.device.reduce_device = *o.reduce_device;
    if (o.conv_workspace) s.device.conv_workspace = *o.conv_workspace;
    s.device.conv_workspace_bytes = o.conv_workspace_bytes;
  }
  s.iterations = o.iterations;
  s.zero_grad = o.zero_grad;
  if (o.mode == RunMode::Training) s.plan = o.plan;
  s.sharding = resolve_sharding(o.parallel, o.mode == RunMode::Training, o.device == "cuda",
                                o.precision == Precision::AmpFp16 || o.precision == Precision::AmpBf16,
                                o.zero_grad == ZeroGrad::Zeros);
  resolve_offload(o.parallel, o.optimizer, o.micro_batch && *o.micro_batch > 0 ? o.batch / *o.micro_batch : 1, s.sharding);
  return s;
}

Estimate summarize(const EstimateOptions& o, const Graph& g, const Program& p, const SimResult& sim) {
  Estimate e;
  e.options = o;
  e.parameter_count = g.parameter_count();
  e.trainable_parameter_count = g.trainable_parameter_count();
  e.weights_bytes = g.weights_bytes();
  e.input_bytes = g.input_bytes();
  e.peak_bytes = sim.peak.bytes;
  e.breakdown_at_peak = sim.at_peak;
  e.op_count = static_cast<int64_t>(g.ops.size());
  e.notes = g.notes;
  e.block_class = g.block_class;
  if (sim.peak.step >= 0) {
    const Step& st = p.steps[static_cast<size_t>(sim.peak.step)];
    e.peak_phase = st.phase;
    e.peak_op = st.label;
    e.peak_iteration = st.iteration;
  }
  // The largest live tensors, when asked for (fit asks for none at each size it tries).
  if (sim.peak.step >= 0 && o.top_tensors > 0) {
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

void add_offload_ops(const Graph& g, const std::vector<std::string>& names, MemoryPlan& plan) {
  std::vector<std::string> all;
  for (const Op& op : g.ops) all.push_back(op.name);
  for (const std::string& n : names) {
    const Op* found = nullptr;
    for (const Op& op : g.ops) {
      if (op.name == n) found = &op;
    }
    if (!found) throw InputError("--offload: no op named '" + n + "'" + suggestion_suffix(n, all));
    if (found->stage != OpStage::Model) throw InputError("--offload " + n + ": a loss op's activations are not offloaded");
    if (std::find(plan.offload.begin(), plan.offload.end(), found->id) == plan.offload.end()) plan.offload.push_back(found->id);
  }
  std::sort(plan.offload.begin(), plan.offload.end());
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
    if (r == "blocks") {
      // Every repeated block (HF gradient_checkpointing_enable(): one checkpoint per layer).
      TransformerBlocks blocks = transformer_blocks(g);
      if (blocks.segments.empty()) throw InputError("--checkpoint blocks: the model has no repeated blocks (module paths PREFIX.0., PREFIX.1., ...)");
      for (const CheckpointSegment& s : blocks.segments) plan.checkpoints.push_back(s);
      continue;
    }
    if (r == "attention") {
      std::vector<CheckpointSegment> cores = attention_cores(g);
      if (cores.empty()) {
        throw InputError("--checkpoint attention: no eager attention core (matmul_scores .. matmul_context) in every block of the model (gpt2, llama, or a Hugging Face decoder config with --attention eager)");
      }
      for (const CheckpointSegment& s : cores) plan.checkpoints.push_back(s);
      continue;
    }
    size_t dots = r.find("..");
    if (dots == std::string::npos || dots == 0 || dots + 2 >= r.size()) throw InputError("--checkpoint '" + r + "' is not FIRST..LAST");
    OpId first = find(r.substr(0, dots), r), last = find(r.substr(dots + 2), r);
    if (first > last) throw InputError("--checkpoint " + r + ": the first op runs after the last");
    if (g.op(last).stage != OpStage::Model) throw InputError("--checkpoint " + r + ": a segment cannot hold loss ops");
    // Reentrant only: a non-reentrant call records the segment's graph in the forward.
    if (plan.checkpoint_impl == CheckpointImpl::Reentrant && !checkpoint_gets_gradients(g, first, last)) {
      throw InputError("--checkpoint " + r + ": no input of the segment requires grad, so torch.utils.checkpoint would give its parameters no gradients; start it after an op with parameters (or use --checkpoint-impl non-reentrant)");
    }
    plan.checkpoints.push_back({first, last});
  }
  // Ranges may nest (a checkpointed function calling checkpoint); partial overlaps are errors.
  sort_checkpoints(plan.checkpoints);
  try {
    validate_plan(g, plan);
  } catch (const InputError& e) {
    throw InputError(std::string("--checkpoint: ") + e.what());
  }
}

std::string forward_name(int64_t forward) { return forward == 0 ? "prefill" : "decode " + std::to_string(forward); }

namespace {

// The forward a step belongs to, from the op-name prefix the HF decoder gives generation graphs
// ("prefill.", "decode<i>.").
int64_t forward_of_label(const std::string& label) {
  if (label.rfind("decode", 0) != 0) return 0;
  return std::stoll(label.substr(6, label.find('.') - 6));
}

// Whether time is predicted: a catalog GPU to take the roofline from, on one GPU. Time-only
// options without it are errors.
bool times_run(const EstimateOptions& o) {
  const bool gpu = o.gpu && !o.gpu->gpu.empty() && o.device == "cuda";
  const char* given = o.run_length ? (o.run_length->tokens ? "--tokens" : "--samples") : o.host_memory ? "--host-memory" : nullptr;
  if (given && !gpu) throw InputError(std::string(given) + " needs --gpu NAME: time comes from that GPU's roofline (headroom gpus)");
  if (given && o.parallel.given()) throw InputError(std::string(given) + " applies to one GPU: time is not predicted with --gpus");
  if (o.run_length && o.generation) throw InputError(std::string(given) + " applies to --mode train and infer, not generate");
  return gpu && !o.parallel.given();
}

// Load time, the step on the timeline and what follows from it (cost/run_time.h).
RunTime step_run_time(const EstimateOptions& o, const Graph& g, const Program& p, const ScheduleOptions& so) {
  CostModel model(*gpu_spec(*o.gpu));
  RunTime t;
  t.gpu = model.gpu().name;
  t.load = load_time(model, g, o.host_memory.value_or(HostMemory::Pageable));
  const bool training = o.mode == RunMode::Training;
  t.training = training;
  t.step = iteration_time(model, g, p, so.plan, o.optimizer, training ? so.iterations : 0);
  t.samples_per_step = o.batch;
  t.tokens_per_step = checked_mul(tokens_per_sample(g), o.batch, "tokens per step");
  t.throughput = throughput(t.samples_per_step, t.tokens_per_step, t.step.total_ms);
  if (o.run_length) {
    t.run = run_totals(*o.run_length, t.samples_per_step, t.tokens_per_step, t.step.total_ms, t.step.flops,
                       g.parameter_count(), training, g.trainable_parameter_count() == g.parameter_count());
    t.run->price = price_for(t.gpu, o.price_overrides);
    if (t.run->price) t.run->cost_usd = cost_usd(t.run->price->usd_per_hour, t.run->ms);
  }
  return t;
}

// generate()'s time from the simulated forwards: prefill, decode 1 and decode M-1; the decodes
// between are interpolated linearly (cost/run_time.h GenerationTime).
RunTime generation_run_time(const CostModel& model, const LoadTime& load, const std::map<int64_t, double>& forward_ms,
                            int64_t batch, int64_t new_tokens) {
  GenerationTime gt;
  gt.prefill_ms = forward_ms.at(0);
  const int64_t decodes = new_tokens - 1;
  double decode_total = 0;
  if (decodes >= 1) {
    gt.first_decode_ms = forward_ms.at(1);
    gt.last_decode_ms = forward_ms.at(decodes);
    decode_total = decodes == 1 ? gt.first_decode_ms : static_cast<double>(decodes) * (gt.first_decode_ms + gt.last_decode_ms) / 2;
    gt.per_token_ms = decode_total / static_cast<double>(decodes);
  }
  gt.total_ms = gt.prefill_ms + decode_total;
  RunTime t;
  t.gpu = model.gpu().name;
  t.load = load;
  t.step.compute_ms = t.step.total_ms = gt.total_ms;
  t.samples_per_step = batch;
  t.tokens_per_step = checked_mul(batch, new_tokens, "generated tokens");
  t.throughput = throughput(t.samples_per_step, t.tokens_per_step, gt.total_ms);
  t.generation = gt;
  return t;
}

// Generation: generate()'s forwards in two windows, each simulated as one inference program.
// Decode forwards 2..M-2 need no simulation of their own: forward i + 1 runs the same ops in the
// same order as forward i, with every buffer the same size or larger (the cache, the scores and
// the ids grow by one token) and the same state carried in, so its peak is at least forward i's.
// The peak of the whole run is the larger of window [prefill, decode 1] and window [decode M-1].
Estimate estimate_generation(const EstimateOptions& o) {
  const GenerationOptions& gen = *o.generation;
  if (o.mode != RunMode::Inference) throw InputError("generation is an inference run");
  if (o.seq) throw InputError("--seq does not apply to --mode generate (the prompt length is --prompt)");
  if (o.micro_batch) throw InputError("--micro-batch applies to training only");
  if (!o.checkpoint_ranges.empty()) throw InputError("--checkpoint applies to training only");
  if (!o.offload_ops.empty()) throw InputError("--offload applies to training only");
  if (gen.prompt <= 0) throw InputError("--prompt must be a positive number of tokens");
  if (gen.new_tokens <= 0) throw InputError("--new-tokens must be a positive number of tokens");
  if (gen.beams <= 0) throw InputError("--beams must be a positive number of beams");
  ScheduleOptions so = schedule_options(o);
  std::vector<std::pair<int64_t, int64_t>> windows = {{0, std::min<int64_t>(1, gen.new_tokens - 1)}};
  if (gen.new_tokens - 1 >= 2) windows.push_back({gen.new_tokens - 1, gen.new_tokens - 1});
  std::optional<Estimate> best;
  const bool timed = times_run(o);
  std::optional<CostModel> model;
  if (timed) model.emplace(*gpu_spec(*o.gpu));
  std::map<int64_t, double> forward_ms;  // prefill (0) and the decode forwards simulated
  std::optional<LoadTime> load;
  for (auto [first, last] : windows) {
    EstimateOptions wo = o;
    GenerationWindow w{gen.prompt, gen.new_tokens, first, last, gen.beams, gen.static_cache};
    wo.graph_loader = [&o, w](const BuildConfig& cfg) {
      BuildConfig c = cfg;
      c.generation = w;
      return o.graph_loader(c);
    };
    Graph g = build_graph(wo, o.batch);
    Program p = build_program(g, so);
    SimResult sim = simulate(p);
    if (timed) {
      if (!load) load = load_time(*model, g, o.host_memory.value_or(HostMemory::Pageable));
      StepTimes st = step_times(*model, g, p, MemoryPlan{}, o.optimizer, 0);
      for (size_t i = 0; i < p.steps.size(); ++i) {
        if (p.steps[i].phase != Phase::Inference) continue;
        forward_ms[forward_of_label(p.steps[i].label)] += st.end_ms[i] - st.start_ms[i];
      }
    }
    if (best && sim.peak.bytes <= best->peak_bytes) continue;
    Estimate e = summarize(o, g, p, sim);
    e.kv_cache_bytes = sim.at_peak[static_cast<size_t>(Category::KvCache)];
    e.peak_forward = forward_of_label(e.peak_op);
    if (o.gpu) e.device = device_memory(p, *o.gpu);
    if (o.keep_program) e.program = std::move(p);
    best = std::move(e);
  }
  const std::string search = gen.beams > 1 ? "beam search over " + std::to_string(gen.beams) + " beams (batch x beams rows in every forward, the cache reordered after each), " : "";
  best->notes.push_back("generation: prefill of " + std::to_string(gen.prompt) + " tokens, then " +
                        std::to_string(gen.new_tokens - 1) + " decode forwards with a " +
                        (gen.static_cache ? "StaticCache of " + std::to_string(gen.prompt + gen.new_tokens) + " positions; " : "DynamicCache; ") + search +
                        "simulated: prefill, decode 1 and the last decode (the decode forwards between them run the same program on a shorter cache)");
  if (timed) best->time = generation_run_time(*model, *load, forward_ms, o.batch, gen.new_tokens);
  best->foreach = so.foreach;
  best->micro_batch = o.batch;
  // The prompt (the caller's input_ids); the carried-in cache of the last window is not an input.
  best->input_bytes = checked_mul(checked_mul(o.batch, gen.prompt, "prompt"), 8, "prompt bytes");
  return *best;
}

// What estimate() builds for a run that is not a generation, before it simulates: the graph, the
// schedule options and the program (with the stages' own simulation when pipelined), after every
// check of the options that comes first.
struct BuiltRun {
  Graph g;
  ScheduleOptions so;
  std::optional<PipelineStages> stages;
  Program p;
  int64_t micro = 0;
  int micro_batches = 1;
};

void check_foreach(const EstimateOptions& o) {
  if (o.foreach && !optimizer_has_foreach(o.optimizer)) {
    throw InputError("--foreach / --no-foreach apply to sgd, momentum, adam and adamw, not " + std::string(optimizer_name(o.optimizer)));
  }
}

BuiltRun build_run(const EstimateOptions& o) {
  if (o.batch <= 0) throw InputError("batch must be a positive integer, got " + std::to_string(o.batch));
  if (o.seq && *o.seq <= 0) throw InputError("sequence length must be positive, got " + std::to_string(*o.seq));
  if (o.device != "cuda" && o.device != "cpu") throw InputError("unknown device '" + o.device + "' (cuda or cpu)");
  BuiltRun r;
  r.micro = o.batch;
  if (o.micro_batch) {
    if (o.mode != RunMode::Training) throw InputError("--micro-batch applies to training only");
    if (*o.micro_batch <= 0 || *o.micro_batch > o.batch || o.batch % *o.micro_batch != 0) {
      throw InputError("micro-batch " + std::to_string(*o.micro_batch) + " must divide the batch " +
                       std::to_string(o.batch));
    }
    r.micro = *o.micro_batch;
    r.micro_batches = static_cast<int>(o.batch / r.micro);
  }
  r.g = build_graph(o, r.micro);
  r.so = schedule_options(o);
  r.so.micro_batches = r.micro_batches;
  resolve_fsdp_wrap(o.parallel, r.g, r.so.sharding);
  if (!o.checkpoint_ranges.empty()) {
    if (o.mode != RunMode::Training) throw InputError("--checkpoint applies to training only");
    add_checkpoint_ranges(r.g, o.checkpoint_ranges, r.so.plan);
  }
  if (!o.offload_ops.empty()) {
    if (o.mode != RunMode::Training) throw InputError("--offload applies to training only");
    if (o.device != "cuda") throw InputError("--offload moves activations to host memory: it applies to --device cuda");
    add_offload_ops(r.g, o.offload_ops, r.so.plan);
  }
  // Pipeline parallelism: the rank of the stage with the highest peak (estimate/pipeline_estimate.h).
  if (o.parallel.pipeline_parallel > 1) {
    r.stages = simulate_pipeline_stages(r.g, r.so, o.parallel, r.micro_batches, o.micro_batch.has_value());
    r.g = *r.stages->graph;
    r.so.plan = r.stages->plan;  // the reported stage's checkpoints, on its graph
  }
  r.p = r.stages ? std::move(r.stages->program) : build_program(r.g, r.so);
  if (o.gpu && o.device != "cuda") throw InputError("--gpu needs --device cuda");
  return r;
}

}  // namespace

Result<Program> estimate_program(const EstimateOptions& o) {
  return capture_input_errors([&]() -> Program {
    HEADROOM_CHECK(!o.generation && o.parallel.pipeline_parallel <= 1, "estimate_program: not a generation or pipelined run");
    check_foreach(o);
    BuiltRun r = build_run(o);
    check_program_size(r.p);  // simulate()'s first check
    return std::move(r.p);
  });
}

Result<Estimate> estimate(const EstimateOptions& o) {
  return capture_input_errors([&]() -> Estimate {
    check_foreach(o);
    if (o.generation) {
      if (o.batch <= 0) throw InputError("batch must be a positive integer, got " + std::to_string(o.batch));
      if (o.device != "cuda" && o.device != "cpu") throw InputError("unknown device '" + o.device + "' (cuda or cpu)");
      if (!o.graph_loader) throw InputError("--mode generate needs a Hugging Face config.json");
      if (o.gpu && o.device != "cuda") throw InputError("--gpu needs --device cuda");
      return estimate_generation(o);
    }
    BuiltRun r = build_run(o);
    const Graph& g = r.g;
    const ScheduleOptions& so = r.so;
    Program& p = r.p;
    std::optional<PipelineStages>& stages = r.stages;
    SimResult sim = stages ? std::move(stages->sim) : simulate(p);
    Estimate e = summarize(o, g, p, sim);
    if (o.gpu) e.device = device_memory(p, *o.gpu);
    if (times_run(o)) e.time = step_run_time(o, g, p, so);
    if (o.parallel.given()) e.per_gpu = per_gpu_summary(o.parallel, so.sharding, p, sim);
    if (stages) add_pipeline_summary(*stages, *e.per_gpu);
    e.foreach = so.foreach;
    e.micro_batch = r.micro;
    e.micro_batches = r.micro_batches;
    if (o.keep_program) e.program = std::move(p);
    return e;
  });
}

}  // namespace headroom
