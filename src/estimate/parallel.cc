#include "estimate/parallel.h"

#include <algorithm>
#include <string>
#include <vector>

#include "schedule/transformer_blocks.h"
#include "util/error.h"

namespace headroom {

std::optional<FsdpStrategy> parse_fsdp_strategy(std::string_view s) {
  if (s == "full") return FsdpStrategy::Full;
  if (s == "grad-op") return FsdpStrategy::GradOp;
  if (s == "no-shard") return FsdpStrategy::NoShard;
  return std::nullopt;
}

std::optional<FsdpWrap> parse_fsdp_wrap(std::string_view s) {
  if (s == "block") return FsdpWrap::Block;
  if (s == "param") return FsdpWrap::Param;
  return std::nullopt;
}

// The pipeline options among themselves and with the engines (the micro-batch rules need the
// batch: estimate/pipeline_estimate.cc).
static void check_pipeline_layout(const ParallelOptions& p, bool training) {
  if (!p.pipeline_given()) return;
  if (p.pipeline_parallel > 1000000) throw InputError("--pipeline-parallel " + std::to_string(p.pipeline_parallel) + " is more than a million stages");
  if (p.pipeline_parallel == 1) {
    throw InputError(std::string(p.pipeline_schedule ? "--pipeline-schedule" : "--virtual-stages") + " applies to --pipeline-parallel P with P > 1");
  }
  if (!training) throw InputError("--pipeline-parallel applies to --mode train (the schedules interleave forwards and backwards)");
  const bool interleaved = p.schedule() == PipelineScheduleKind::Interleaved;
  if (p.virtual_stages && !interleaved) throw InputError("--virtual-stages applies to --pipeline-schedule interleaved");
  if (interleaved && (!p.virtual_stages || *p.virtual_stages < 2)) {
    throw InputError("--pipeline-schedule interleaved needs --virtual-stages v >= 2 (model chunks per rank)");
  }
  if (p.zero_stage && *p.zero_stage >= 2) {
    throw InputError("--zero " + std::to_string(*p.zero_stage) +
                     " with --pipeline-parallel: DeepSpeed's PipelineEngine refuses ZeRO-2 and ZeRO-3 with pipeline parallelism (runtime/pipe/engine.py); use --zero 0 or 1");
  }
  if (p.fsdp) throw InputError("--fsdp with --pipeline-parallel: PyTorch 1.13's FSDP has no pipeline composition (use --zero 0 or 1, or DDP)");
  if (p.offload_optimizer || p.offload_params) throw InputError("the offload options with --pipeline-parallel are not modelled");
}

// --megatron: Megatron-LM's DistributedDataParallel, with --zero 1 its distributed optimizer
// (schedule/interpreter_megatron.cc). What it cannot combine with, before the generic checks
// name DeepSpeed or FSDP.
static void check_megatron(const ParallelOptions& p) {
  if (!p.megatron) return;
  if (p.fsdp || p.fsdp_wrap) throw InputError("--megatron and --fsdp are two engines: give one");
  if (p.zero_stage && *p.zero_stage >= 2) {
    throw InputError("--megatron with --zero " + std::to_string(*p.zero_stage) +
                     ": Megatron-LM has no ZeRO-2 or 3 (its distributed optimizer, --zero 1, shards the optimizer states only)");
  }
  if (p.offload_optimizer || p.offload_params) throw InputError("--megatron: the offload options are DeepSpeed's and FSDP's, not Megatron-LM's");
  if (p.reduce_bucket_elements) throw InputError("--reduce-bucket-size is DeepSpeed's; --megatron runs one gradient bucket (Megatron's default without --overlap-grad-reduce)");
}

Sharding resolve_sharding(const ParallelOptions& p, bool training, bool cuda, bool amp, bool keeps_gradients) {
  Sharding s;
  if (!p.given()) return s;
  check_megatron(p);
  if (p.fsdp_wrap && !p.fsdp) throw InputError("--fsdp-wrap applies to --fsdp (the units PyTorch FSDP flattens its parameters into)");
  if (p.gpus <= 0) throw InputError("--zero, --fsdp, --megatron, --tensor-parallel, --pipeline-parallel, --reduce-bucket-size and the offload options need --gpus N");
  if (p.zero_stage && p.fsdp) throw InputError("--zero (DeepSpeed) and --fsdp (PyTorch FSDP) are two engines: give one");
  if (p.zero_stage && (*p.zero_stage < 0 || *p.zero_stage > 3)) {
    throw InputError("--zero must be 0, 1, 2 or 3, got " + std::to_string(*p.zero_stage));
  }
  if (p.reduce_bucket_elements && !(p.zero_stage && (*p.zero_stage >= 2 || p.offload_optimizer))) {
    throw InputError("--reduce-bucket-size applies to --zero 2 and 3, or 1 with --offload-optimizer (DeepSpeed's ipg bucket)");
  }
  if (p.gpus > 1000000) throw InputError("--gpus " + std::to_string(p.gpus) + " is more than a million GPUs");
  if (p.tensor_parallel < 1) throw InputError("--tensor-parallel must be a positive integer");
  check_pipeline_layout(p, training);
  if (p.pipeline_parallel > 1) {
    if (p.gpus % (p.tensor_parallel * p.pipeline_parallel) != 0) {
      throw InputError("--gpus " + std::to_string(p.gpus) + " is not a multiple of --tensor-parallel " + std::to_string(p.tensor_parallel) +
                       " x --pipeline-parallel " + std::to_string(p.pipeline_parallel) + " (the data-parallel size is gpus / (T x P))");
    }
  } else if (p.gpus % p.tensor_parallel != 0) {
    throw InputError("--gpus " + std::to_string(p.gpus) + " is not a multiple of --tensor-parallel " + std::to_string(p.tensor_parallel) +
                     " (the data-parallel size is gpus / tensor-parallel)");
  }
  if (p.sequence_parallel && p.tensor_parallel <= 1) {
    throw InputError("--sequence-parallel needs --tensor-parallel T > 1 (Megatron shards the sequence over the tensor-parallel ranks)");
  }
  if (p.sequence_parallel && !training) {
    throw InputError("--sequence-parallel applies to --mode train (Megatron's training layout)");
  }
  if (p.sequence_parallel && amp) {
    throw InputError("--sequence-parallel: Megatron runs its model in 16 bits itself (Float16Module), not through autocast: use --precision bf16 (or fp32)");
  }
  if (p.fsdp && p.tensor_parallel > 1) {
    throw InputError("--fsdp with --tensor-parallel: PyTorch 1.13's FSDP does not compose with tensor parallelism (use --zero, as Megatron-DeepSpeed does)");
  }
  s.data_parallel = static_cast<int>(p.gpus / (p.tensor_parallel * p.pipeline_parallel));
  if (p.megatron) {
    if (!training) throw InputError("--megatron applies to --mode train (Megatron's DDP holds the training gradients)");
    if (!cuda) throw InputError("--megatron needs --device cuda");
    if (amp) throw InputError("--megatron: Megatron runs its model in 16 bits itself (Float16Module), not through autocast: use --precision bf16 (or fp32)");
    if (keeps_gradients) throw InputError("--megatron: Megatron zeroes its main_grad buffer in place after each step (--zero-grad does not apply)");
    s.engine = ShardingEngine::Megatron;
    s.zero_stage = p.zero_stage.value_or(0);
    return s;
  }
  if (!p.zero_stage && !p.fsdp) {
    // DDP: every rank holds the full program plus the Reducer's buckets. Megatron's tensor and
    // pipeline parallelism run their own DDP (contiguous main_grad buffers), which is not modelled.
    s.ddp_buckets = s.data_parallel > 1 && p.tensor_parallel == 1 && p.pipeline_parallel == 1;
    return s;
  }
  const std::string flag = p.zero_stage ? "--zero" : "--fsdp";
  if (!training) throw InputError(flag + " applies to --mode train (the engines shard training states)");
  if (!cuda) throw InputError(flag + " needs --device cuda");
  if (amp) {
    throw InputError(flag + ": the engine holds 16-bit parameters itself, not through autocast: use --precision bf16 (or fp32)");
  }
  if (keeps_gradients) throw InputError(flag + ": the engine frees gradients after the step (--zero-grad zeros does not apply)");
  if (p.zero_stage) {
    s.engine = ShardingEngine::DeepSpeed;
    s.zero_stage = *p.zero_stage;
    if (p.reduce_bucket_elements) s.reduce_bucket_elements = *p.reduce_bucket_elements;
  } else {
    s.engine = ShardingEngine::Fsdp;
    s.zero_stage = *p.fsdp == FsdpStrategy::Full ? 3 : *p.fsdp == FsdpStrategy::GradOp ? 2 : 0;
    // FSDP 1.13 defaults: forward_prefetch=False, backward_prefetch=BACKWARD_PRE.
    s.prefetch_forward = false;
    s.prefetch_backward = true;
  }
  return s;
}

void resolve_fsdp_wrap(const ParallelOptions& p, const Graph& g, Sharding& s) {
  if (s.engine != ShardingEngine::Fsdp) return;
  const bool has_blocks = !transformer_blocks(g).segments.empty();
  if (p.fsdp_wrap == FsdpWrap::Block && !has_blocks) {
    throw InputError("--fsdp-wrap block: model '" + g.model +
                     "' has no repeated blocks for transformer_auto_wrap_policy to wrap; use --fsdp-wrap param");
  }
  s.fsdp_wrap = p.fsdp_wrap.value_or(has_blocks ? FsdpWrap::Block : FsdpWrap::Param);
}

std::string describe_layout(const ParallelOptions& p) {
  if (!p.given()) return "";
  std::string s = "one rank of " + std::to_string(p.gpus) + " GPUs (";
  if (p.tensor_parallel > 1) s += "tensor-parallel " + std::to_string(p.tensor_parallel) + (p.sequence_parallel ? " with sequence parallelism, " : ", ");
  if (p.pipeline_parallel > 1) {
    s += "pipeline-parallel " + std::to_string(p.pipeline_parallel) + " " + std::string(pipeline_schedule_name(p.schedule())) + ", ";
  }
  if (p.megatron) s += p.zero_stage == 1 ? "Megatron distributed optimizer" : "Megatron DDP";
  else if (p.zero_stage) s += "DeepSpeed ZeRO-" + std::to_string(*p.zero_stage);
  else if (p.fsdp) s += std::string("FSDP ") + (*p.fsdp == FsdpStrategy::Full ? "full" : *p.fsdp == FsdpStrategy::GradOp ? "grad-op" : "no-shard");
  else s += "DDP";
  if (p.offload_optimizer) s += *p.offload_optimizer == OffloadDevice::Nvme ? ", optimizer on NVMe" : ", optimizer on CPU";
  if (p.offload_params) s += ", parameters on CPU";
  return s + ")";
}

PerGpu per_gpu_summary(const ParallelOptions& p, const Sharding& s, const Program& program, const SimResult& sim) {
  PerGpu r;
  r.gpus = p.gpus;
  r.data_parallel = s.data_parallel;
  r.tensor_parallel = p.tensor_parallel;
  r.sequence_parallel = p.sequence_parallel;
  r.pipeline_parallel = p.pipeline_parallel;
  if (p.pipeline_parallel > 1) r.pipeline_schedule = pipeline_schedule_name(p.schedule());
  r.zero_stage = s.zero_stage;
  switch (s.engine) {
    case ShardingEngine::None: r.engine = "ddp"; break;
    case ShardingEngine::DeepSpeed: r.engine = "deepspeed"; break;
    case ShardingEngine::Megatron: r.engine = "megatron"; break;
    case ShardingEngine::Fsdp:
      r.engine = "fsdp";
      r.fsdp_wrap = s.fsdp_wrap == FsdpWrap::Block ? "block" : "param";
      break;
  }
  std::string what = s.engine == ShardingEngine::DeepSpeed ? "DeepSpeed ZeRO-" + std::to_string(s.zero_stage)
                     : s.engine == ShardingEngine::Megatron
                         ? std::string(s.zero_stage == 1 ? "Megatron distributed optimizer (fp32 main_grad buffer)" : "Megatron DDP (fp32 main_grad buffer)")
                     : s.engine == ShardingEngine::Fsdp
                         ? std::string("FSDP ") + (s.zero_stage == 3 ? "FULL_SHARD" : s.zero_stage == 2 ? "SHARD_GRAD_OP" : "NO_SHARD") +
                               (s.fsdp_wrap == FsdpWrap::Block ? ", one unit per block" : ", one unit per parameter")
                         : p.pipeline_parallel > 1 ? std::string("DDP (a replica of the stage)") : std::string("DDP (full replica)");
  r.layout = std::to_string(p.gpus) + (p.gpus == 1 ? " GPU" : " GPUs") + ": " +
             (p.tensor_parallel > 1 ? "tensor-parallel " + std::to_string(p.tensor_parallel) + (p.sequence_parallel ? " (sequence-parallel)" : "") + " x "
                                    : std::string()) +
             (p.pipeline_parallel > 1 ? "pipeline-parallel " + std::to_string(p.pipeline_parallel) + " (" + r.pipeline_schedule + ") x " : std::string()) +
             "data-parallel " + std::to_string(s.data_parallel) + ", " + what;
  if (s.optimizer_offloaded()) r.layout += s.offload_optimizer == OffloadDevice::Nvme ? ", optimizer offloaded to NVMe" : ", optimizer offloaded to CPU";
  if (s.offload_params) r.layout += ", parameters offloaded to CPU";
  // Model states when the last optimizer step begins; in inference, what is live at the end.
  int32_t at = static_cast<int32_t>(program.events.size());
  int last_iteration = 0;
  for (const Step& st : program.steps) last_iteration = std::max(last_iteration, st.iteration);
  for (const Step& st : program.steps) {
    if (st.phase == Phase::Optimizer && st.iteration == last_iteration) {
      at = st.first_event;
      break;
    }
  }
  CategoryBytes before = category_bytes_before(program, at);
  r.model_states_bytes = before[static_cast<size_t>(Category::Weights)] + before[static_cast<size_t>(Category::Gradients)] +
                         before[static_cast<size_t>(Category::OptimizerState)];
  r.activations_bytes = sim.at_peak[static_cast<size_t>(Category::SavedActivations)] +
                        sim.at_peak[static_cast<size_t>(Category::Activations)] +
                        sim.at_peak[static_cast<size_t>(Category::ActivationGradients)];
  r.peak_bytes = sim.peak.bytes;
  for (const HostState& h : program.host) (h.nvme ? r.nvme_bytes : r.host_bytes) += h.bytes;
  return r;
}

}  // namespace headroom
