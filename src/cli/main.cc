// The `headroom` command: parses arguments, calls the library, prints. Every user error is one
// line on stderr and exit code 2, with nothing on stdout.
#include <unistd.h>

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

#include "estimate/estimate.h"
#include "estimate/fit.h"
#include "estimate/serve.h"
#include "frontends/model_source.h"
#include "plan/chain_dp.h"
#include "plan/chain_model.h"
#include "plan/planner.h"
#include "report/plan_report.h"
#include "plan/remat_plan.h"
#include "sim/device_catalog.h"
#include "frontends/zoo/registry.h"
#include "report/estimate_report.h"
#include "report/fit_report.h"
#include "util/format.h"
#include "pack/pack.h"
#include "pack/pack_report.h"
#include "report/html_report.h"
#include "report/pack_html.h"
#include "report/plan_html.h"
#include "util/file.h"

namespace headroom {
namespace {

constexpr int kUsageError = 2;

int fail(const std::string& message) {
  std::cerr << "headroom: " << message << "\n";
  return kUsageError;
}

bool color_enabled() {
  return isatty(STDOUT_FILENO) && std::getenv("NO_COLOR") == nullptr;
}

// A positive integer option, parsed strictly: "abc", "-3", "1e3" and values past 64 bits are
// errors that name the option.
int64_t parse_positive(const std::string& option, const std::string& text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) throw InputError(option + " " + text + " does not fit in 64 bits");
  if (ec != std::errc() || end != text.data() + text.size() || v <= 0) {
    throw InputError(option + " must be a positive integer, got '" + text + "'");
  }
  return v;
}

struct EstimateArgs {
  std::string model;
  std::string batch = "1";
  std::string seq;
  std::string mode = "train";
  std::string optimizer = "adam";
  bool foreach = false;
  bool no_foreach = false;
  std::string precision = "fp32";
  std::string micro_batch;
  std::string device = "cuda";
  std::string dropout = "on";
  std::string loss = "default";
  bool json = false;
  bool trace = false;
  int top = 10;
  // GPU
  std::string gpu;
  std::string gpu_memory;
  std::string cuda_context;
  bool eager_loading = false;
  bool nccl = false;
  std::string nccl_memory;
  std::string max_split_size_mb;
  bool expandable_segments = false;
  std::string cublas_workspace;
  std::string conv_workspace;
  std::string margin = "0%";
  // ONNX files
  std::vector<std::string> dims;
  bool allow_unknown = false;
  std::vector<std::string> checkpoints;
  // Hugging Face configs
  std::string prompt;
  std::string new_tokens;
  std::string attention;
  std::string lora;
  std::vector<std::string> freeze;
  std::string weights;
  std::string group_size;
};

void add_estimate_options(CLI::App* cmd, EstimateArgs& a, bool model_required = true) {
  CLI::Option* model = cmd->add_option("MODEL", a.model, "built-in model, e.g. resnet50 or mlp:layers=16,dim=1024");
  if (model_required) model->required();
  cmd->add_option("--batch", a.batch, "batch size (default 1)");
  cmd->add_option("--seq", a.seq, "sequence length for sequence models");
  cmd->add_option("--mode", a.mode, "infer, train or generate (default train; generate: Hugging Face configs; fit also serve)");
  cmd->add_option("--prompt", a.prompt, "generate: prompt tokens");
  cmd->add_option("--new-tokens", a.new_tokens, "generate: tokens to generate");
  cmd->add_option("--attention", a.attention, "Hugging Face configs: eager, sdpa (default) or flash");
  cmd->add_option("--lora", a.lora, "Hugging Face decoders: LoRA adapters, r=16,alpha=32,targets=q_proj,v_proj[,dropout=0.05] (frozen base)");
  cmd->add_option("--weights", a.weights, "Hugging Face decoders: int8 or nf4 (bitsandbytes), int4 (GPTQ) storage of the decoder layers' linears");
  cmd->add_option("--group-size", a.group_size, "--weights int4: values per scale and zero (default 128)");
  cmd->add_option("--freeze", a.freeze, "training: freeze the parameters whose name matches this regular expression (repeatable)");
  cmd->add_option("--optimizer", a.optimizer, "sgd, momentum, adam, adamw, adamw8bit, paged-adamw8bit, lion or adafactor (default adam)");
  cmd->add_flag("--foreach", a.foreach, "use the optimizer's foreach (multi-tensor) implementation");
  cmd->add_flag("--no-foreach", a.no_foreach, "use the single-tensor implementation");
  cmd->add_option("--precision", a.precision, "fp32, fp16, bf16, amp-fp16 or amp-bf16 (default fp32; Hugging Face configs: their torch_dtype)");
  cmd->add_option("--micro-batch", a.micro_batch, "gradient accumulation: forward/backward at this size");
  cmd->add_option("--device", a.device, "cuda or cpu kernels' memory behaviour (default cuda)");
  cmd->add_option("--dropout", a.dropout, "on or off (off: every dropout is identity)");
  cmd->add_option("--loss", a.loss, "cross-entropy, next-token or mse (default: the model's)");
  cmd->add_option("--top", a.top, "how many of the largest buffers at the peak to list (default 10)");
  cmd->add_flag("--json", a.json, "print one JSON object");
  cmd->add_flag("--trace", a.trace, "print every simulated allocation and free (for comparing with a measured trace)");
  cmd->add_option("--gpu", a.gpu, "GPU from the catalog (headroom gpus lists them)");
  cmd->add_option("--gpu-memory", a.gpu_memory, "device memory of any other GPU, e.g. 24GiB");
  cmd->add_option("--cuda-context", a.cuda_context, "CUDA context size (default 254MiB, 616MiB with --eager-module-loading)");
  cmd->add_flag("--eager-module-loading", a.eager_loading, "CUDA_MODULE_LOADING=EAGER: a larger context");
  cmd->add_flag("--nccl", a.nccl, "add NCCL communicator memory (default 512MiB, --nccl-memory)");
  cmd->add_option("--nccl-memory", a.nccl_memory, "NCCL memory with --nccl");
  cmd->add_option("--max-split-size-mb", a.max_split_size_mb, "PYTORCH_CUDA_ALLOC_CONF max_split_size_mb");
  cmd->add_flag("--expandable-segments", a.expandable_segments, "PYTORCH_CUDA_ALLOC_CONF expandable_segments:True");
  cmd->add_option("--cublas-workspace", a.cublas_workspace, "cuBLAS workspace per handle (0 = CUBLAS_WORKSPACE_CONFIG=:0:0)");
  cmd->add_option("--conv-workspace", a.conv_workspace, "cuDNN workspace policy: none, activation (default) or a size cap");
  cmd->add_option("--dim", a.dims, "ONNX: bind a symbolic dimension, NAME=VALUE (repeatable)");
  cmd->add_option("--checkpoint", a.checkpoints, "training: checkpoint ops FIRST..LAST (op names; repeatable)");
  cmd->add_flag("--allow-unknown", a.allow_unknown, "ONNX: treat unknown ops as elementwise (with a warning)");
}

// The frontend's own options (--dim, --allow-unknown); the library picks the frontend.
void apply_model_source(const EstimateArgs& a, const CLI::App* cmd, EstimateOptions& o) {
  ModelSourceOptions src;
  src.precision_given = cmd->count("--precision") > 0;
  for (const std::string& d : a.dims) {
    size_t eq = d.find('=');
    if (eq == std::string::npos || eq == 0) throw InputError("--dim '" + d + "' is not NAME=VALUE");
    src.dims[d.substr(0, eq)] = parse_positive("--dim " + d.substr(0, eq), d.substr(eq + 1));
  }
  src.allow_unknown = a.allow_unknown;
  select_frontend(o, src);
}

// "r=16,alpha=32,targets=q_proj,v_proj,dropout=0.05": targets take every following item
// without '=' (module names contain no '=').
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
      if (value.empty() || end != value.c_str() + value.size() || !(v >= 0.0) || (key == "dropout" && v >= 1.0)) {
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

// "5%" or "0.05" -> 0.05; InputError outside 0-90%.
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

// "30%" or "0.3": a fraction in (0, 1].
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

void apply_gpu_options(const EstimateArgs& a, EstimateOptions& o, bool required) {
  bool any = !a.gpu.empty() || !a.gpu_memory.empty();
  if (a.gpu == "all" && !required) return;  // fit runs every catalog GPU itself
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
  if (!a.max_split_size_mb.empty()) g.allocator.max_split_size_bytes = parse_positive("--max-split-size-mb", a.max_split_size_mb) << 20;
  g.allocator.expandable_segments = a.expandable_segments;
  g.margin = parse_margin(a.margin);
  o.gpu = g;
}

Result<EstimateOptions> to_options(const EstimateArgs& a, const CLI::App* cmd) {
  return capture_input_errors([&]() -> EstimateOptions {
    EstimateOptions o;
    o.model = a.model;
    o.batch = parse_positive("--batch", a.batch);
    if (cmd->count("--seq")) o.seq = parse_positive("--seq", a.seq);
    if (a.mode == "train") o.mode = RunMode::Training;
    else if (a.mode == "infer" || a.mode == "generate" || a.mode == "serve") o.mode = RunMode::Inference;
    else throw InputError("--mode must be infer, train or generate, got '" + a.mode + "'");
    if (a.mode == "serve" && cmd->get_name() != "fit") throw InputError("--mode serve applies to fit (headroom fit CONFIG --gpu NAME --mode serve --context N)");
    if (a.mode == "generate") {
      if (!cmd->count("--prompt") || !cmd->count("--new-tokens")) throw InputError("--mode generate needs --prompt N and --new-tokens M");
      o.generation = GenerationOptions{parse_positive("--prompt", a.prompt), parse_positive("--new-tokens", a.new_tokens)};
    } else if (cmd->count("--prompt") || cmd->count("--new-tokens")) {
      throw InputError(std::string(cmd->count("--prompt") ? "--prompt" : "--new-tokens") + " applies to --mode generate");
    }
    if (cmd->count("--lora")) o.lora = parse_lora(a.lora);
    if (cmd->count("--weights")) {
      if (a.weights == "int8") o.weights = WeightFormat::Int8;
      else if (a.weights == "int4") o.weights = WeightFormat::Int4;
      else if (a.weights == "nf4") o.weights = WeightFormat::Nf4;
      else throw InputError("--weights must be int8, int4 or nf4 (fp16 / bf16 storage: --precision), got '" + a.weights + "'");
    }
    if (cmd->count("--group-size")) o.group_size = parse_positive("--group-size", a.group_size);
    o.freeze = a.freeze;
    if (cmd->count("--attention")) {
      if (a.attention == "eager") o.attention = AttentionKind::Eager;
      else if (a.attention == "sdpa") o.attention = AttentionKind::Sdpa;
      else if (a.attention == "flash") o.attention = AttentionKind::Flash;
      else throw InputError("--attention must be eager, sdpa or flash, got '" + a.attention + "'");
    }
    auto opt = parse_optimizer(a.optimizer);
    if (!opt) throw InputError("--optimizer must be sgd, momentum, adam, adamw, adamw8bit, paged-adamw8bit, lion or adafactor, got '" + a.optimizer + "'");
    o.optimizer = *opt;
    if (a.foreach && a.no_foreach) throw InputError("--foreach and --no-foreach contradict each other");
    if (a.foreach) o.foreach = true;
    if (a.no_foreach) o.foreach = false;
    auto prec = parse_precision(a.precision);
    if (!prec) throw InputError("--precision must be fp32, fp16, bf16, amp-fp16 or amp-bf16, got '" + a.precision + "'");
    o.precision = *prec;
    if (cmd->count("--micro-batch")) o.micro_batch = parse_positive("--micro-batch", a.micro_batch);
    if (a.device != "cuda" && a.device != "cpu") throw InputError("--device must be cuda or cpu, got '" + a.device + "'");
    o.device = a.device;
    if (a.dropout == "on") o.dropout = true;
    else if (a.dropout == "off") o.dropout = false;
    else throw InputError("--dropout must be on or off, got '" + a.dropout + "'");
    if (a.loss == "default") o.loss = LossKind::Default;
    else if (a.loss == "cross-entropy") o.loss = LossKind::CrossEntropy;
    else if (a.loss == "next-token") o.loss = LossKind::NextToken;
    else if (a.loss == "mse") o.loss = LossKind::Mse;
    else throw InputError("--loss must be cross-entropy, next-token or mse, got '" + a.loss + "'");
    if (a.top < 0) throw InputError("--top must not be negative");
    o.top_tensors = a.top;
    o.keep_program = a.trace;
    if (!a.cublas_workspace.empty()) o.cublas_workspace_bytes = parse_memory_size(a.cublas_workspace);
    if (!a.conv_workspace.empty()) {
      if (a.conv_workspace == "none") o.conv_workspace = ConvWorkspace::None;
      else if (a.conv_workspace == "activation") o.conv_workspace = ConvWorkspace::Activation;
      else {
        o.conv_workspace = ConvWorkspace::Fixed;
        o.conv_workspace_bytes = parse_memory_size(a.conv_workspace);
      }
    }
    apply_gpu_options(a, o, false);
    apply_model_source(a, cmd, o);
    o.checkpoint_ranges = a.checkpoints;
    return o;
  });
}

int run_estimate(const EstimateArgs& a, const CLI::App* cmd) {
  Result<EstimateOptions> o = to_options(a, cmd);
  if (!o.ok()) return fail(o.error());
  Result<Estimate> e = estimate(o.value());
  if (!e.ok()) return fail(e.error());
  if (a.trace) {
    std::cout << program_trace(e.value().program);
    return 0;
  }
  std::cout << (a.json ? estimate_json(e.value()) : estimate_text(e.value(), color_enabled()));
  return 0;
}

struct ServeArgs {
  std::string context, block_size, utilization;
};

// fit --mode serve: vLLM-style KV block capacity on one GPU (estimate/serve.h).
int run_serve(const EstimateArgs& a, const CLI::App* cmd, const ServeArgs& s, const EstimateOptions& base) {
  Result<ServeOptions> so = capture_input_errors([&]() -> ServeOptions {
    if (a.gpu == "all") throw InputError("--mode serve takes one GPU (--gpu NAME)");
    if (cmd->count("--vary")) throw InputError("--vary does not apply to --mode serve");
    if (cmd->count("--batch")) throw InputError("--batch does not apply to --mode serve (vLLM batches up to 256 sequences)");
    if (cmd->count("--seq")) throw InputError("--seq does not apply to --mode serve: the context is --context N");
    ServeOptions o;
    o.estimate = base;
    apply_gpu_options(a, o.estimate, true);
    if (s.context.empty()) throw InputError("--mode serve needs --context N (vLLM's max_model_len)");
    o.context = parse_positive("--context", s.context);
    if (!s.block_size.empty()) o.block_size = parse_positive("--block-size", s.block_size);
    if (!s.utilization.empty()) o.gpu_memory_utilization = parse_fraction("--gpu-memory-utilization", s.utilization);
    const DType dtype = base.precision == Precision::Bf16 ? DType::BF16 : base.precision == Precision::Fp16 ? DType::F16 : DType::F32;
    o.kv_bytes_per_token = kv_cache_bytes_per_token(base.model, dtype);
    return o;
  });
  if (!so.ok()) return fail(so.error());
  Result<ServeResult> r = serve_capacity(so.value());
  if (!r.ok()) return fail(r.error());
  std::cout << (a.json ? serve_json(so.value(), r.value()) : serve_text(so.value(), r.value()));
  return 0;
}

int run_fit(const EstimateArgs& a, const CLI::App* cmd, const std::string& vary, const ServeArgs& serve) {
  Result<EstimateOptions> o = to_options(a, cmd);
  if (!o.ok()) return fail(o.error());
  const bool serve_mode = a.mode == "serve";
  if (!serve_mode && (!serve.context.empty() || !serve.block_size.empty() || !serve.utilization.empty())) {
    return fail("--context, --block-size and --gpu-memory-utilization apply to --mode serve");
  }
  if (serve_mode) return run_serve(a, cmd, serve, o.value());
  if (vary != "batch" && vary != "seq") return fail("--vary must be batch or seq, got '" + vary + "'");
  std::vector<std::string> gpus;
  if (a.gpu == "all") {
    for (const GpuSpec& g : DeviceCatalog::builtin().gpus()) gpus.push_back(g.name);
  } else {
    gpus.push_back(a.gpu);
  }
  std::vector<FitResult> results;
  // Progress on stderr, only for --gpu all on a terminal; "\r\033[K" rewrites the line.
  bool progress = gpus.size() > 1 && isatty(STDERR_FILENO);
  auto clear_progress = [&] {
    if (progress) std::cerr << "\r\033[K" << std::flush;
  };
  for (const std::string& name : gpus) {
    if (progress) std::cerr << fmt::format("\r\033[Kfitting {} ({}/{})...", name, results.size() + 1, gpus.size()) << std::flush;
    EstimateArgs one = a;
    one.gpu = name;
    Result<EstimateOptions> oo = capture_input_errors([&]() {
      EstimateOptions e = o.value();
      apply_gpu_options(one, e, true);
      return e;
    });
    if (!oo.ok()) {
      clear_progress();
      return fail(oo.error());
    }
    FitOptions f;
    f.estimate = oo.value();
    f.axis = vary == "seq" ? FitAxis::Seq : FitAxis::Batch;
    Result<FitResult> r = fit(f);
    if (!r.ok()) {
      clear_progress();
      return fail(r.error());
    }
    results.push_back(r.value());
  }
  clear_progress();
  std::cout << (a.json ? fit_json(o.value(), results) : fit_text(o.value(), results));
  return 0;
}

// `report`: the estimate as one self-contained HTML page (docs/report.md), written atomically.
int run_report(const EstimateArgs& a, const CLI::App* cmd, const std::string& output) {
  if (a.json || a.trace) return fail("report writes HTML to --output; --json and --trace belong to estimate");
  Result<EstimateOptions> o = to_options(a, cmd);
  if (!o.ok()) return fail(o.error());
  Result<std::string> html = html_report(o.value());
  if (!html.ok()) return fail(html.error());
  Result<int64_t> written = write_file_atomically(output, html.value());
  if (!written.ok()) return fail(written.error());
  return 0;
}

// `pack`: several models on one GPU: shared layers (GEMEL), residency, swap simulation
// (docs/pack.md). ONNX files go to the ONNX frontend as inference graphs; names to the zoo.
struct PackArgs {
  std::vector<std::string> models;
  std::string batch = "1";
  std::string gpu, gpu_memory, workload;
  std::string html;  // --html FILE: also write the page (report/pack_html.h)
  bool json = false;
};

int run_pack(const PackArgs& a) {
  Result<PackOptions> o = capture_input_errors([&]() -> PackOptions {
    PackOptions p;
    p.models = a.models;
    p.batch = parse_positive("--batch", a.batch);
    p.gpu = a.gpu;
    if (!a.gpu_memory.empty()) p.gpu_memory = parse_memory_size(a.gpu_memory);
    if (!a.workload.empty()) {
      Result<Workload> w = read_workload_file(a.workload);
      if (!w.ok()) throw InputError(w.error());
      p.workload = w.value();
    }
    return p;
  });
  if (!o.ok()) return fail(o.error());
  Result<PackReport> r = pack(o.value(), load_model_for_pack);
  if (!r.ok()) return fail(r.error());
  // The page first: if it cannot be written, nothing is printed and no half file is left.
  if (!a.html.empty()) {
    Result<int64_t> written = write_file_atomically(a.html, pack_html(r.value()));
    if (!written.ok()) return fail(written.error());
  }
  std::cout << (a.json ? pack_json(r.value()) : pack_text(r.value()));
  return 0;
}

int run_plan_model(const EstimateArgs& a, const CLI::App* cmd, const std::string& budget, const std::string& strategy,
                   const std::string& cost_gpu, const std::string& activation_budget, const std::string& export_chain,
                   const std::string& html) {
  Result<EstimateOptions> o = to_options(a, cmd);
  if (!o.ok()) return fail(o.error());
  Result<Plan> r = capture_input_errors([&]() -> Plan {
    PlanRequest req;
    req.run = o.value();
    if (!budget.empty()) req.budget_bytes = parse_memory_size(budget);
    if (!activation_budget.empty()) req.activation_fraction = parse_fraction("--activation-budget", activation_budget);
    req.strategy = strategy;
    req.cost_gpu = cost_gpu;
    // Large models take seconds: a progress line on a terminal, cleared before the report.
    const bool progress = isatty(STDERR_FILENO);
    if (progress) {
      req.progress = [](const std::string& name, int i, int n) {
        std::cerr << fmt::format("\r\033[Kplanning: {} ({}/{})...", name, i, n) << std::flush;
      };
    }
    Result<Plan> p = make_plan(req);
    if (progress) std::cerr << "\r\033[K" << std::flush;
    if (!p.ok()) throw InputError(p.error());
    return p.value();
  });
  if (!r.ok()) return fail(r.error());
  // Files first: if one cannot be written, nothing is printed and no half file is left.
  if (!export_chain.empty()) {
    if (r.value().chain.fwd_ms.empty()) return fail("--export-chain: the model has no stages");
    Result<int64_t> written = write_file_atomically(export_chain, chain_json(r.value().chain));
    if (!written.ok()) return fail(written.error());
  }
  if (!html.empty()) {
    Result<int64_t> written = write_file_atomically(html, plan_html(r.value()));
    if (!written.ok()) return fail(written.error());
  }
  std::cout << (a.json ? plan_json(r.value()) : plan_text(r.value()));
  return 0;
}

int run_plan_chain(const std::string& file, const std::string& budget, const std::string& slots, bool json) {
  Result<ChainPlan> r = capture_input_errors([&]() -> ChainPlan {
    if (file.empty()) throw InputError("plan needs a MODEL or --chain FILE");
    if (budget.empty()) throw InputError("plan --chain needs --budget SIZE");
    int64_t b = parse_memory_size(budget);
    int64_t n = slots.empty() ? kDefaultChainSlots : parse_positive("--slots", slots);
    if (n > 100000) throw InputError("--slots " + slots + " is more than 100000");
    Result<Chain> c = load_chain_file(file);
    if (!c.ok()) throw InputError(c.error());
    Result<ChainPlan> p = solve_chain(c.value(), b, static_cast<int>(n));
    if (!p.ok()) throw InputError(p.error());
    return p.value();
  });
  if (!r.ok()) return fail(r.error());
  std::cout << (json ? chain_plan_json(r.value()) : chain_plan_text(r.value()));
  return 0;
}

// plan --graph FILE: the rematerialization integer program on a general graph (docs/ilp.md).
int run_plan_graph(const std::string& file, const std::string& budget, const std::string& slots,
                   const std::string& time_limit, bool persistent, bool json) {
  Result<RematPlan> r = capture_input_errors([&]() -> RematPlan {
    if (budget.empty()) throw InputError("plan --graph needs --budget SIZE");
    int64_t b = parse_memory_size(budget);
    int64_t n = slots.empty() ? kDefaultRematSlots : parse_positive("--slots", slots);
    if (n > 100000) throw InputError("--slots " + slots + " is more than 100000");
    RematIlpOptions o;
    o.persistent = persistent;
    if (!time_limit.empty()) {
      char* end = nullptr;
      o.time_limit_s = std::strtod(time_limit.c_str(), &end);
      if (end == time_limit.c_str() || *end != '\0' || !(o.time_limit_s > 0) || o.time_limit_s > 1e6)
        throw InputError("--time-limit " + time_limit + " is not a positive number of seconds");
    }
    Result<RematGraph> g = load_remat_graph_file(file);
    if (!g.ok()) throw InputError(g.error());
    // The solve can take up to the time limit: say so on a terminal, then clear the line.
    const bool progress = isatty(STDERR_FILENO);
    if (progress) std::cerr << fmt::format("solving the integer program (time limit {} s)...", o.time_limit_s) << std::flush;
    Result<RematPlan> p = solve_remat(g.value(), b, static_cast<int>(n), o);
    if (progress) std::cerr << "\r\033[K" << std::flush;
    if (!p.ok()) throw InputError(p.error());
    return p.value();
  });
  if (!r.ok()) return fail(r.error());
  std::cout << (json ? remat_plan_json(r.value()) : remat_plan_text(r.value()));
  return 0;
}

int run_gpus() {
  std::cout << fmt::format("{:<18} {:>10}  {:<10} {:>10}  {}\n", "gpu", "memory", "arch", "fp32 TF/s", "aliases");
  for (const GpuSpec& g : DeviceCatalog::builtin().gpus()) {
    std::string aliases;
    for (const std::string& al : g.aliases) aliases += (aliases.empty() ? "" : ", ") + al;
    std::cout << fmt::format("{:<18} {:>10}  {:<10} {:>10.1f}  {}\n", g.name, human_bytes(g.memory_bytes), g.architecture,
                             g.fp32_flops / 1e12, aliases);
  }
  return 0;
}

int run_models() {
  std::cout << fmt::format("{:<16} {:>16}  {}\n", "model", "parameters", "description");
  for (const ZooEntry& z : zoo()) {
    BuildConfig cfg;
    Graph g = z.build(ModelSpec{z.name, {}}, cfg);
    std::cout << fmt::format("{:<16} {:>16}  {}\n", z.name, with_commas(g.parameter_count()), z.description);
  }
  return 0;
}

int main_impl(int argc, char** argv) {
  CLI::App app{"headroom: how much GPU memory a model needs, before you run it"};
  app.require_subcommand(1);
  EstimateArgs ea;
  CLI::App* est = app.add_subcommand("estimate", "peak memory of inference or a training step");
  add_estimate_options(est, ea);
  CLI::App* models = app.add_subcommand("models", "list the built-in models");
  EstimateArgs fa;
  std::string vary = "batch";
  CLI::App* fitc = app.add_subcommand("fit", "the largest batch (or sequence) that fits a GPU");
  add_estimate_options(fitc, fa);
  fitc->add_option("--margin", fa.margin, "memory kept free, e.g. 5% (default 0%)");
  fitc->add_option("--vary", vary, "batch (default) or seq");
  ServeArgs serve_args;
  fitc->add_option("--context", serve_args.context, "--mode serve: the longest sequence served (vLLM's max_model_len)");
  fitc->add_option("--block-size", serve_args.block_size, "--mode serve: tokens per KV block (default 16)");
  fitc->add_option("--gpu-memory-utilization", serve_args.utilization, "--mode serve: share of device memory vLLM may use (default 0.9)");
  CLI::App* gpus = app.add_subcommand("gpus", "list the GPU catalog");
  std::string chain_file, chain_budget, chain_slots, plan_strategy = "auto", cost_gpu, activation_budget, export_chain;
  EstimateArgs pla;
  CLI::App* planc = app.add_subcommand("plan", "the fastest way to train within a memory budget (or --chain: the chain solver)");
  add_estimate_options(planc, pla, /*model_required=*/false);
  planc->add_option("--margin", pla.margin, "memory kept free with --gpu, e.g. 5% (default 0%)");
  planc->add_option("--chain", chain_file, "chain model JSON (docs/chain-solver.md)");
  planc->add_option("--budget", chain_budget, "memory budget, e.g. 20GiB (default with --gpu: its memory)");
  planc->add_option("--strategy", plan_strategy,
                    "auto (default), accumulate, sqrt, checkpoint, offload, offload+checkpoint, vdnn-all, vdnn-conv or conv");
  planc->add_option("--activation-budget", activation_budget,
                    "budget as a share of the activations at the keep-everything peak, e.g. 30% (needs --gpu)");
  planc->add_option("--export-chain", export_chain, "also write the model's chain model (for plan --chain) to FILE");
  planc->add_option("--cost-gpu", cost_gpu, "GPU whose roofline times the plan (default: --gpu, else A100-SXM4-40GB)");
  planc->add_option("--slots", chain_slots, "memory slots of the discretization (default 500)");
  std::string graph_file, graph_time_limit;
  bool graph_persistent = false;
  planc->add_option("--graph", graph_file, "graph JSON: a chain file plus preds (docs/ilp.md)");
  planc->add_option("--time-limit", graph_time_limit, "--graph: solver time limit in seconds (default 10)");
  planc->add_flag("--persistent", graph_persistent, "--graph: persistent schedules only");
  std::string plan_html_file;
  planc->add_option("--html", plan_html_file, "MODEL: also write an HTML page: memory over a step per strategy, the budget, decisions");
  PackArgs pa;
  CLI::App* packc = app.add_subcommand("pack", "several models on one GPU: shared layers, residency, swapping");
  packc->add_option("MODEL", pa.models, "built-in models or .onnx files")->required();
  packc->add_option("--batch", pa.batch, "batch size of every model (default 1)");
  packc->add_option("--gpu", pa.gpu, "GPU from the catalog (headroom gpus lists them)");
  packc->add_option("--gpu-memory", pa.gpu_memory, "device memory of any other GPU, e.g. 24GiB");
  packc->add_option("--workload", pa.workload, "JSON workload to simulate with weight swapping");
  packc->add_flag("--json", pa.json, "print one JSON object");
  packc->add_option("--html", pa.html, "also write an HTML page: savings curve, free sharing, weight distribution");
  EstimateArgs ra;
  std::string report_output;
  CLI::App* report = app.add_subcommand("report", "an HTML report: memory over the run, the peak, weights per layer");
  add_estimate_options(report, ra);
  report->add_option("-o,--output", report_output, "the HTML file to write")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string msg = e.what();
    if (msg.empty()) msg = "invalid arguments (see headroom --help)";
    return fail(msg);
  }
  if (*est) return run_estimate(ea, est);
  if (*models) return run_models();
  if (*fitc) return run_fit(fa, fitc, vary, serve_args);
  if (*gpus) return run_gpus();
  if (*planc) {
    if (!plan_html_file.empty() && (!graph_file.empty() || !chain_file.empty())) return fail("--html applies to plan MODEL");
    if (!graph_file.empty()) {
      if (!pla.model.empty() || !chain_file.empty()) return fail("give one of MODEL, --chain FILE or --graph FILE");
      return run_plan_graph(graph_file, chain_budget, chain_slots, graph_time_limit, graph_persistent, pla.json);
    }
    if (!chain_file.empty() || pla.model.empty()) {
      if (!pla.model.empty()) return fail("give a MODEL or --chain FILE, not both");
      return run_plan_chain(chain_file, chain_budget, chain_slots, pla.json);
    }
    if (!chain_slots.empty()) return fail("--slots applies to --chain and --graph");
    return run_plan_model(pla, planc, chain_budget, plan_strategy, cost_gpu, activation_budget, export_chain, plan_html_file);
  }
  if (*packc) return run_pack(pa);
  if (*report) return run_report(ra, report, report_output);
  return fail("no command (see headroom --help)");
}

}  // namespace
}  // namespace headroom

int main(int argc, char** argv) {
  try {
    return headroom::main_impl(argc, argv);
  } catch (const headroom::InputError& e) {
    return headroom::fail(e.what());
  } catch (const std::exception& e) {
    std::cerr << "headroom: internal error: " << e.what() << "\n";
    return 3;
  }
}
