#include "options/run_args.h"

#include <charconv>
#include <cstdlib>
#include <cmath>
#include <map>
#include <sstream>

#include "estimate/offload.h"
#include "frontends/model_source.h"
#include "sim/device_catalog.h"
#include "training/optimizer_rules.h"
#include "util/checked.h"
#include "util/format.h"

namespace headroom {

int64_t parse_positive(const std::string& option, const std::string& text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) throw InputError(option + " " + text + " does not fit in 64 bits");
  if (ec != std::errc() || end != text.data() + text.size() || v <= 0) {
    throw InputError(option + " must be a positive integer, got '" + text + "'");
  }
  return v;
}

double parse_margin(const std::string& text) {
  std::string t = text;
  bool pct = !t.empty() && t.back() == '%';
  if (pct) t.pop_back();
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (t.empty() || end != t.c_str() + t.size()) throw InputError("--margin '" + text + "' is not a percentage");
  if (pct || v > 1.0) v /= 100.0;
  if (!(v >= 0.0 && v <= 0.9)) throw InputError("--margin must be between 0% and 90%, got '" + text + "'");
  return v;
}

double parse_fraction(const std::string& flag, const std::string& text) {
  std::string t = text;
  bool pct = !t.empty() && t.back() == '%';
  if (pct) t.pop_back();
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (t.empty() || end != t.c_str() + t.size()) throw InputError(flag + " '" + text + "' is not a percentage");
  if (pct) v /= 100.0;
  if (!(v > 0.0 && v <= 1.0)) throw InputError(flag + " must be above 0% and at most 100%, got '" + text + "'");
  return v;
}

void apply_gpu_args(const RunArgs& a, EstimateOptions& o, bool required, bool gpu_all) {
  bool any = !a.gpu.empty() || !a.gpu_memory.empty();
  if (a.gpu == "all") {
    if (!gpu_all) throw InputError("--gpu all applies to fit; give one GPU (see headroom gpus)");
    if (!required) return;  // fit runs every catalog GPU itself
  }
  if (!any) {
    if (required) throw InputError("give a GPU: --gpu NAME (see headroom gpus) or --gpu-memory SIZE");
    return;
  }
  GpuOptions g;
  g.gpu = a.gpu;
  if (!a.gpu.empty()) (void)DeviceCatalog::builtin().find(a.gpu);
  if (!a.gpu_memory.empty()) g.gpu_memory = parse_memory_size(a.gpu_memory);
  if (!a.cuda_context.empty()) g.context_bytes = parse_memory_size(a.cuda_context);
  g.lazy_module_loading = !a.eager_loading;
  g.nccl = a.nccl;
  if (!a.nccl_memory.empty()) g.nccl_bytes = parse_memory_size(a.nccl_memory);
  if (!a.max_split_size_mb.empty()) {
    g.allocator.max_split_size_bytes = checked_mul(parse_positive("--max-split-size-mb", a.max_split_size_mb),
                                                   int64_t{1} << 20, "--max-split-size-mb in bytes");
  }
  g.allocator.expandable_segments = a.expandable_segments;
  g.margin = parse_margin(a.margin);
  o.gpu = g;
}

namespace {

// The frontend's own options (--dim, --allow-unknown, a captured program); the library picks the
// frontend.
void apply_model_source(const RunArgs& a, EstimateOptions& o, RunCommand command) {
  ModelSourceOptions src;
  for (const std::string& d : a.dims) {
    size_t eq = d.find('=');
    if (eq == std::string::npos || eq == 0) throw InputError("--dim '" + d + "' is not NAME=VALUE");
    src.dims[d.substr(0, eq)] = parse_positive("--dim " + d.substr(0, eq), d.substr(eq + 1));
  }
  src.allow_unknown = a.allow_unknown;
  if (!a.max_detections.empty()) src.max_detections = parse_positive("--max-detections", a.max_detections);
  if (a.loss != "default") src.loss = a.loss;
  src.captured = a.captured;
  src.precision_given = a.precision_given;
  src.batch_given = a.batch_given || a.grad_accum.has_value();
  src.batch_searched = command == RunCommand::Fit && a.vary == "batch" && a.mode != "serve";
  select_frontend(o, src);
}

}  // namespace

LoraConfig parse_lora(const std::string& text) {
  LoraConfig l;
  bool have_r = false, have_targets = false, in_targets = false;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t eq = item.find('=');
    if (eq == std::string::npos) {
      if (!in_targets || item.empty()) throw InputError("--lora '" + text + "': '" + item + "' is not KEY=VALUE");
      l.targets.push_back(item);
      continue;
    }
    in_targets = false;
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "r") {
      l.r = parse_positive("--lora r", value);
      have_r = true;
    } else if (key == "alpha" || key == "dropout") {
      char* end = nullptr;
      double v = std::strtod(value.c_str(), &end);
      if (value.empty() || end != value.c_str() + value.size() || !(v >= 0.0) || !std::isfinite(v) || (key == "dropout" && v >= 1.0)) {
        throw InputError("--lora " + key + " must be a number" + (key == "dropout" ? " in [0, 1)" : " >= 0") + ", got '" + value + "'");
      }
      (key == "alpha" ? l.alpha : l.dropout) = v;
    } else if (key == "targets") {
      if (value.empty()) throw InputError("--lora targets= is empty");
      l.targets = {value};
      have_targets = in_targets = true;
    } else {
      throw InputError("--lora: unknown key '" + key + "' (r, alpha, targets, dropout)");
    }
  }
  if (!have_r || !have_targets) throw InputError("--lora needs r=N and targets=NAME[,NAME...]");
  return l;
}

RunArgs expand_qlora(const RunArgs& given) {
  RunArgs a = given;
  if (!a.qlora) return a;
  if (a.lora) throw InputError("--qlora is --lora on an nf4 base: give --qlora SPEC or --lora SPEC, not both");
  if (a.mode != "train") throw InputError("--qlora is a fine-tuning recipe: it applies to --mode train");
  if (a.weights && *a.weights != "nf4") throw InputError("--qlora stores the base in nf4; it conflicts with --weights " + *a.weights);
  if (a.optimizer_given && a.optimizer != "paged-adamw8bit") {
    throw InputError("--qlora trains with paged-adamw8bit; it conflicts with --optimizer " + a.optimizer);
  }
  if (a.precision_given && a.precision != "bf16") throw InputError("--qlora computes in bf16; it conflicts with --precision " + a.precision);
  try {
    (void)parse_lora(*a.qlora);
  } catch (const InputError& e) {
    throw InputError(std::string("--qlora: ") + e.what());
  }
  a.lora = a.qlora;
  a.weights = "nf4";
  a.optimizer = "paged-adamw8bit";
  a.optimizer_given = true;
  a.precision = "bf16";
  a.precision_given = true;
  return a;
}

namespace {

const char* command_name(RunCommand c) {
  switch (c) {
    case RunCommand::Estimate: return "estimate";
    case RunCommand::Fit: return "fit";
    case RunCommand::Plan: return "plan";
    case RunCommand::Report: return "report";
  }
  return "?";
}

// --samples/--tokens/--epochs/--host-memory: estimate's, with a catalog GPU (estimate() checks the
// GPU, which a library caller can set without these options).
void apply_time_args(const RunArgs& a, EstimateOptions& o, RunCommand command) {
  const char* given = a.samples ? "--samples" : a.tokens ? "--tokens" : a.epochs ? "--epochs" : a.host_memory ? "--host-memory" : nullptr;
  if (!given) return;
  if (command != RunCommand::Estimate) {
    throw InputError(std::string(given) + " applies to estimate, not " + command_name(command));
  }
  if (a.samples && a.tokens) throw InputError("give --samples or --tokens, not both");
  if (a.epochs && !a.samples && !a.tokens) throw InputError("--epochs needs --samples N or --tokens N (the length of one epoch)");
  if (a.samples || a.tokens) {
    RunLength r;
    if (a.samples) r.samples = parse_positive("--samples", *a.samples);
    if (a.tokens) r.tokens = parse_positive("--tokens", *a.tokens);
    if (a.epochs) r.epochs = parse_positive("--epochs", *a.epochs);
    o.run_length = r;
  }
  if (a.host_memory) {
    if (*a.host_memory == "pageable") o.host_memory = HostMemory::Pageable;
    else if (*a.host_memory == "pinned") o.host_memory = HostMemory::Pinned;
    else throw InputError("--host-memory must be pageable or pinned, got '" + *a.host_memory + "'");
  }
}

}  // namespace

std::optional<RankRequest> to_rank_request(const RunArgs& a) {
  if (!a.objective) {
    if (!a.prices.empty()) throw InputError("--price applies with --objective cost");
    return std::nullopt;
  }
  RankRequest r;
  auto o = parse_objective(*a.objective);
  if (!o) throw InputError("--objective must be cost, time or memory, got '" + *a.objective + "'");
  r.objective = *o;
  if (!a.prices.empty() && r.objective != Objective::Cost) throw InputError("--price applies with --objective cost");
  r.price_overrides = parse_price_overrides(a.prices);
  r.batch_given = a.batch_given;
  return r;
}

Result<EstimateOptions> to_estimate_options(const RunArgs& given, RunCommand command) {
  const bool fit_command = command == RunCommand::Fit;
  return capture_input_errors([&]() -> EstimateOptions {
    const RunArgs a = expand_qlora(given);
    EstimateOptions o;
    o.model = a.model;
    o.batch = parse_positive("--batch", a.batch);
    if (a.seq) o.seq = parse_positive("--seq", *a.seq);
    if (a.mode == "train") o.mode = RunMode::Training;
    else if (a.mode == "infer" || a.mode == "generate" || a.mode == "serve") o.mode = RunMode::Inference;
    else throw InputError("--mode must be infer, train or generate, got '" + a.mode + "'");
    if (a.mode == "serve" && !fit_command) {
      throw InputError("--mode serve applies to fit (headroom fit CONFIG --gpu NAME --mode serve --context N)");
    }
    if (a.mode == "generate") {
      if (!a.prompt || !a.new_tokens) throw InputError("--mode generate needs --prompt N and --new-tokens M");
      o.generation = GenerationOptions{parse_positive("--prompt", *a.prompt), parse_positive("--new-tokens", *a.new_tokens)};
      if (a.beams) o.generation->beams = parse_positive("--beams", *a.beams);
      if (a.cache && *a.cache != "dynamic" && *a.cache != "static") throw InputError("--cache must be dynamic or static, got '" + *a.cache + "'");
      o.generation->static_cache = a.cache && *a.cache == "static";
    } else if (a.prompt || a.new_tokens || a.beams || a.cache) {
      throw InputError(std::string(a.prompt ? "--prompt" : a.new_tokens ? "--new-tokens" : a.beams ? "--beams" : "--cache") + " applies to --mode generate");
    }
    if (a.lora) o.lora = parse_lora(*a.lora);
    if (a.weights) {
      if (*a.weights == "int8") o.weights = WeightFormat::Int8;
      else if (*a.weights == "int4") o.weights = WeightFormat::Int4;
      else if (*a.weights == "nf4") o.weights = WeightFormat::Nf4;
      else if (*a.weights == "fp8") o.weights = WeightFormat::Fp8;
      else throw InputError("--weights must be int8, int4, nf4 or fp8 (fp16 / bf16 storage: --precision), got '" + *a.weights + "'");
    }
    if (a.group_size) o.group_size = parse_positive("--group-size", *a.group_size);
    o.freeze = a.freeze;
    if (a.attention) {
      if (*a.attention == "eager") o.attention = AttentionKind::Eager;
      else if (*a.attention == "sdpa") o.attention = AttentionKind::Sdpa;
      else if (*a.attention == "flash") o.attention = AttentionKind::Flash;
      else throw InputError("--attention must be eager, sdpa or flash, got '" + *a.attention + "'");
    }
    auto opt = parse_optimizer(a.optimizer);
    if (!opt) throw InputError("--optimizer must be " + optimizer_names_phrase() + ", got '" + a.optimizer + "'");
    o.optimizer = *opt;
    if (a.foreach && a.no_foreach) throw InputError("--foreach and --no-foreach contradict each other");
    if (a.foreach) o.foreach = true;
    if (a.no_foreach) o.foreach = false;
    auto prec = parse_precision(a.precision);
    if (!prec) throw InputError("--precision must be fp32, fp16, bf16, amp-fp16 or amp-bf16, got '" + a.precision + "'");
    o.precision = *prec;
    if (a.micro_batch) o.micro_batch = parse_positive("--micro-batch", *a.micro_batch);
    if (a.grad_accum) {
      if (!o.micro_batch) throw InputError("--grad-accum needs --micro-batch (the batch per GPU is micro-batch x accumulation)");
      int64_t k = parse_positive("--grad-accum", *a.grad_accum);
      int64_t per_gpu = checked_mul(*o.micro_batch, k, "--micro-batch x --grad-accum");
      if (a.batch_given && o.batch != per_gpu) {
        throw InputError("--batch " + std::to_string(o.batch) + " is not --micro-batch x --grad-accum = " + std::to_string(per_gpu));
      }
      o.batch = per_gpu;
    }
    if (a.gpus) o.parallel.gpus = parse_positive("--gpus", *a.gpus);
    if (a.zero) {
      const std::string& z = *a.zero;
      if (z != "0" && z != "1" && z != "2" && z != "3") throw InputError("--zero must be 0, 1, 2 or 3, got '" + z + "'");
      o.parallel.zero_stage = z[0] - '0';
    }
    if (a.fsdp) {
      auto f = parse_fsdp_strategy(*a.fsdp);
      if (!f) throw InputError("--fsdp must be full, grad-op or no-shard, got '" + *a.fsdp + "'");
      o.parallel.fsdp = *f;
    }
    if (a.fsdp_wrap) {
      auto w = parse_fsdp_wrap(*a.fsdp_wrap);
      if (!w) throw InputError("--fsdp-wrap must be block or param, got '" + *a.fsdp_wrap + "'");
      o.parallel.fsdp_wrap = *w;
    }
    if (a.tensor_parallel) o.parallel.tensor_parallel = parse_positive("--tensor-parallel", *a.tensor_parallel);
    if (a.pipeline_parallel) o.parallel.pipeline_parallel = parse_positive("--pipeline-parallel", *a.pipeline_parallel);
    if (a.pipeline_schedule) {
      auto k = parse_pipeline_schedule(*a.pipeline_schedule);
      if (!k) throw InputError("--pipeline-schedule must be 1f1b, gpipe or interleaved, got '" + *a.pipeline_schedule + "'");
      o.parallel.pipeline_schedule = *k;
    }
    if (a.virtual_stages) o.parallel.virtual_stages = parse_positive("--virtual-stages", *a.virtual_stages);
    o.parallel.sequence_parallel = a.sequence_parallel;
    o.parallel.megatron = a.megatron;
    if (a.reduce_bucket_size) o.parallel.reduce_bucket_elements = parse_positive("--reduce-bucket-size", *a.reduce_bucket_size);
    if (a.offload_optimizer) {
      auto d = parse_offload_device(*a.offload_optimizer);
      if (!d) throw InputError("--offload-optimizer must be cpu or nvme, got '" + *a.offload_optimizer + "'");
      o.parallel.offload_optimizer = *d;
    }
    if (a.offload_params) {
      if (*a.offload_params != "cpu") throw InputError("--offload-params must be cpu (parameter offload to NVMe is not modelled), got '" + *a.offload_params + "'");
      o.parallel.offload_params = true;
    }
    if (a.device != "cuda" && a.device != "cpu") throw InputError("--device must be cuda or cpu, got '" + a.device + "'");
    o.device = a.device;
    if (a.threads) {
      if (a.device != "cpu") throw InputError("--threads applies to --device cpu (PyTorch's CPU kernels)");
      int64_t n = parse_positive("--threads", *a.threads);
      if (n > 1024) throw InputError("--threads " + *a.threads + " is more than 1024");
      o.threads = static_cast<int>(n);
    }
    if (a.dropout == "on") o.dropout = true;
    else if (a.dropout == "off") o.dropout = false;
    else throw InputError("--dropout must be on or off, got '" + a.dropout + "'");
    if (a.loss == "default") o.loss = LossKind::Default;
    else if (a.loss == "cross-entropy") o.loss = LossKind::CrossEntropy;
    else if (a.loss == "next-token") o.loss = LossKind::NextToken;
    else if (a.loss == "mse") o.loss = LossKind::Mse;
    // Anything else is a loss expression for ONNX files (onnx_losses.h), which the frontend
    // parses; other models refuse it there.
    if (!a.framework.empty()) {
      // Defaults of the loop; options given explicitly still win.
      if (a.framework != "hf-trainer") throw InputError("--framework must be hf-trainer, got '" + a.framework + "'");
      if (o.mode != RunMode::Training) throw InputError("--framework hf-trainer applies to --mode train");
      if (!a.optimizer_given) o.optimizer = OptimizerKind::AdamW;
      if (!a.foreach && !a.no_foreach) o.foreach = false;
      o.zero_grad = ZeroGrad::Zeros;
    }
    if (!a.zero_grad.empty()) {
      auto z = parse_zero_grad(a.zero_grad);
      if (!z) throw InputError("--zero-grad must be none or zeros, got '" + a.zero_grad + "'");
      if (o.mode != RunMode::Training) throw InputError("--zero-grad applies to --mode train");
      o.zero_grad = *z;
    }
    if (a.top < 0) throw InputError("--top must not be negative");
    o.top_tensors = a.top;
    o.keep_program = a.keep_program;
    if (!a.cublas_workspace.empty()) o.cublas_workspace_bytes = parse_memory_size(a.cublas_workspace);
    if (!a.conv_workspace.empty()) {
      if (a.conv_workspace == "none") o.conv_workspace = ConvWorkspace::None;
      else if (a.conv_workspace == "activation") o.conv_workspace = ConvWorkspace::Activation;
      else if (a.conv_workspace == "cudnn9") o.conv_workspace = ConvWorkspace::Cudnn9;
      else {
        o.conv_workspace = ConvWorkspace::Fixed;
        o.conv_workspace_bytes = parse_memory_size(a.conv_workspace);
      }
    }
    if (a.margin_given && a.gpu.empty() && a.gpu_memory.empty()) {
      throw InputError("--margin applies with a GPU (--gpu NAME or --gpu-memory SIZE)");
    }
    apply_gpu_args(a, o, false, fit_command);
    apply_time_args(a, o, command);
    if (command == RunCommand::Estimate && !a.objective && !a.prices.empty()) {
      // estimate prices a whole run: --price needs the run.
      if (!o.run_length) throw InputError("--price applies to a whole run (--samples N or --tokens N) or to fit --objective cost");
      o.price_overrides = parse_price_overrides(a.prices);
    } else if (a.objective || !a.prices.empty()) {
      const char* given = a.objective ? "--objective" : "--price";
      if (command != RunCommand::Fit) throw InputError(std::string(given) + " applies to fit, not " + command_name(command));
      if (a.mode == "serve") throw InputError(std::string(given) + " does not apply to --mode serve");
      (void)to_rank_request(a);
    }
    apply_model_source(a, o, command);
    o.checkpoint_ranges = a.checkpoints;
    if (!a.checkpoint_impl.empty()) {
      std::optional<CheckpointImpl> impl = parse_checkpoint_impl(a.checkpoint_impl);
      if (!impl) throw InputError("--checkpoint-impl must be reentrant or non-reentrant, got '" + a.checkpoint_impl + "'");
      // plan places the checkpoints itself and runs them with this implementation.
      if (a.checkpoints.empty() && command != RunCommand::Plan) throw InputError("--checkpoint-impl applies with --checkpoint");
      o.plan.checkpoint_impl = *impl;
    }
    o.offload_ops = a.offloads;
    return o;
  });
}

namespace {

bool parse_flag(const std::string& name, const std::string& value) {
  if (value == "true") return true;
  if (value == "false") return false;
  throw InputError(name + " must be True or False, got '" + value + "'");
}

}  // namespace

void set_run_arg(RunArgs& a, const std::string& name, const std::string& value) {
  using Setter = std::function<void(RunArgs&, const std::string&)>;
  static const std::map<std::string, Setter> setters = {
      {"batch",
       [](RunArgs& r, const std::string& v) {
         r.batch = v;
         r.batch_given = true;
       }},
      {"seq", [](RunArgs& r, const std::string& v) { r.seq = v; }},
      {"mode", [](RunArgs& r, const std::string& v) { r.mode = v; }},
      {"optimizer",
       [](RunArgs& r, const std::string& v) {
         r.optimizer = v;
         r.optimizer_given = true;
       }},
      {"zero_grad", [](RunArgs& r, const std::string& v) { r.zero_grad = v; }},
      {"framework", [](RunArgs& r, const std::string& v) { r.framework = v; }},
      {"foreach",
       [](RunArgs& r, const std::string& v) {
         bool on = parse_flag("foreach", v);
         r.foreach = on;
         r.no_foreach = !on;
       }},
      {"precision",
       [](RunArgs& r, const std::string& v) {
         r.precision = v;
         r.precision_given = true;
       }},
      {"prompt", [](RunArgs& r, const std::string& v) { r.prompt = v; }},
      {"new_tokens", [](RunArgs& r, const std::string& v) { r.new_tokens = v; }},
      {"beams", [](RunArgs& r, const std::string& v) { r.beams = v; }},
      {"cache", [](RunArgs& r, const std::string& v) { r.cache = v; }},
      {"attention", [](RunArgs& r, const std::string& v) { r.attention = v; }},
      {"lora", [](RunArgs& r, const std::string& v) { r.lora = v; }},
      {"qlora", [](RunArgs& r, const std::string& v) { r.qlora = v; }},
      {"weights", [](RunArgs& r, const std::string& v) { r.weights = v; }},
      {"group_size", [](RunArgs& r, const std::string& v) { r.group_size = v; }},
      {"gpus", [](RunArgs& r, const std::string& v) { r.gpus = v; }},
      {"zero", [](RunArgs& r, const std::string& v) { r.zero = v; }},
      {"fsdp", [](RunArgs& r, const std::string& v) { r.fsdp = v; }},
      {"fsdp_wrap", [](RunArgs& r, const std::string& v) { r.fsdp_wrap = v; }},
      {"reduce_bucket_size", [](RunArgs& r, const std::string& v) { r.reduce_bucket_size = v; }},
      {"offload_optimizer", [](RunArgs& r, const std::string& v) { r.offload_optimizer = v; }},
      {"offload_params", [](RunArgs& r, const std::string& v) { r.offload_params = v; }},
      {"tensor_parallel", [](RunArgs& r, const std::string& v) { r.tensor_parallel = v; }},
      {"pipeline_parallel", [](RunArgs& r, const std::string& v) { r.pipeline_parallel = v; }},
      {"pipeline_schedule", [](RunArgs& r, const std::string& v) { r.pipeline_schedule = v; }},
      {"virtual_stages", [](RunArgs& r, const std::string& v) { r.virtual_stages = v; }},
      {"grad_accum", [](RunArgs& r, const std::string& v) { r.grad_accum = v; }},
      {"samples", [](RunArgs& r, const std::string& v) { r.samples = v; }},
      {"tokens", [](RunArgs& r, const std::string& v) { r.tokens = v; }},
      {"epochs", [](RunArgs& r, const std::string& v) { r.epochs = v; }},
      {"host_memory", [](RunArgs& r, const std::string& v) { r.host_memory = v; }},
      {"objective", [](RunArgs& r, const std::string& v) { r.objective = v; }},
      {"price", [](RunArgs& r, const std::string& v) { r.prices.push_back(v); }},
      {"freeze", [](RunArgs& r, const std::string& v) { r.freeze.push_back(v); }},
      {"micro_batch", [](RunArgs& r, const std::string& v) { r.micro_batch = v; }},
      {"device", [](RunArgs& r, const std::string& v) { r.device = v; }},
      {"threads", [](RunArgs& r, const std::string& v) { r.threads = v; }},
      {"dropout", [](RunArgs& r, const std::string& v) { r.dropout = v; }},
      {"loss", [](RunArgs& r, const std::string& v) { r.loss = v; }},
      {"top",
       [](RunArgs& r, const std::string& v) {
         int64_t n = 0;
         auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
         if (ec != std::errc() || end != v.data() + v.size() || n < 0 || n > 1000000) {
           throw InputError("top must be a count, got '" + v + "'");
         }
         r.top = static_cast<int>(n);
       }},
      {"gpu", [](RunArgs& r, const std::string& v) { r.gpu = v; }},
      {"gpu_memory", [](RunArgs& r, const std::string& v) { r.gpu_memory = v; }},
      {"cuda_context", [](RunArgs& r, const std::string& v) { r.cuda_context = v; }},
      {"eager_module_loading", [](RunArgs& r, const std::string& v) { r.eager_loading = parse_flag("eager_module_loading", v); }},
      {"nccl", [](RunArgs& r, const std::string& v) { r.nccl = parse_flag("nccl", v); }},
      {"sequence_parallel", [](RunArgs& r, const std::string& v) { r.sequence_parallel = parse_flag("sequence_parallel", v); }},
      {"megatron", [](RunArgs& r, const std::string& v) { r.megatron = parse_flag("megatron", v); }},
      {"nccl_memory", [](RunArgs& r, const std::string& v) { r.nccl_memory = v; }},
      {"max_split_size_mb", [](RunArgs& r, const std::string& v) { r.max_split_size_mb = v; }},
      {"expandable_segments", [](RunArgs& r, const std::string& v) { r.expandable_segments = parse_flag("expandable_segments", v); }},
      {"cublas_workspace", [](RunArgs& r, const std::string& v) { r.cublas_workspace = v; }},
      {"conv_workspace", [](RunArgs& r, const std::string& v) { r.conv_workspace = v; }},
      {"margin",
       [](RunArgs& r, const std::string& v) {
         r.margin = v;
         r.margin_given = true;
       }},
      {"dim", [](RunArgs& r, const std::string& v) { r.dims.push_back(v); }},
      {"allow_unknown", [](RunArgs& r, const std::string& v) { r.allow_unknown = parse_flag("allow_unknown", v); }},
      {"max_detections", [](RunArgs& r, const std::string& v) { r.max_detections = v; }},
      {"checkpoint", [](RunArgs& r, const std::string& v) { r.checkpoints.push_back(v); }},
      {"checkpoint_impl", [](RunArgs& r, const std::string& v) { r.checkpoint_impl = v; }},
      {"offload", [](RunArgs& r, const std::string& v) { r.offloads.push_back(v); }},
  };
  auto it = setters.find(name);
  if (it == setters.end()) throw InputError("unknown option '" + name + "'");
  // As on the command line: an empty value is an error, never "not given".
  if (value.empty()) throw InputError(name + " needs a value, got ''");
  it->second(a, value);
}

}  // namespace headroom
