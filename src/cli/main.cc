// The `headroom` command: parses arguments, calls the library, prints. Every user error is one
// line on stderr and exit code 2, with nothing on stdout.
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <string>

#include "estimate/estimate.h"
#include "estimate/fit.h"
#include "frontends/model_source.h"
#include "measure/watch.h"
#include "plan/chain_dp.h"
#include "plan/chain_model.h"
#include "plan/planner.h"
#include "report/plan_report.h"
#include "plan/remat_plan.h"
#include "sim/device_catalog.h"
#include "frontends/zoo/registry.h"
#include "report/deepspeed_config.h"
#include "report/estimate_report.h"
#include "report/fit_report.h"
#include "util/checked.h"
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

// Every file a command writes is named on stderr (stdout carries the result, e.g. --json).
void say_written(const std::string& path, int64_t bytes) {
  std::cerr << "headroom: wrote " << path << " (" << human_bytes(bytes) << ")\n";
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
  std::string zero_grad;
  std::string framework;
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
  std::string margin = "5%";  // fit and the fits verdict; plan sets its own default (0%)
  // ONNX files
  std::vector<std::string> dims;
  bool allow_unknown = false;
  std::vector<std::string> checkpoints;
  // Parallel layout
  std::string gpus;
  std::string zero;
  std::string fsdp;
  std::string reduce_bucket_size;
  std::string grad_accum;
  std::string tensor_parallel;
};

void add_estimate_options(CLI::App* cmd, EstimateArgs& a, bool model_required = true) {
  CLI::Option* model = cmd->add_option("MODEL", a.model, "built-in model, e.g. resnet50 or mlp:layers=16,dim=1024");
  if (model_required) model->required();
  cmd->add_option("--batch", a.batch, "batch size (default 1)");
  cmd->add_option("--seq", a.seq, "sequence length for sequence models");
  cmd->add_option("--mode", a.mode, "infer or train (default train)");
  cmd->add_option("--optimizer", a.optimizer, "sgd, momentum, adam or adamw (default adam)");
  cmd->add_flag("--foreach", a.foreach, "use the optimizer's foreach (multi-tensor) implementation");
  cmd->add_flag("--no-foreach", a.no_foreach, "use the single-tensor implementation");
  cmd->add_option("--precision", a.precision, "fp32, amp-fp16, amp-bf16 or bf16 (default fp32)");
  cmd->add_option("--micro-batch", a.micro_batch, "gradient accumulation: forward/backward at this size");
  cmd->add_option("--device", a.device, "cuda or cpu kernels' memory behaviour (default cuda)");
  cmd->add_option("--dropout", a.dropout, "on or off (off: every dropout is identity)");
  cmd->add_option("--loss", a.loss, "cross-entropy, next-token or mse (default: the model's)");
  cmd->add_option("--zero-grad", a.zero_grad, "training: none (set_to_none=True, default) or zeros (keeps gradients, PyTorch < 2.0)");
  cmd->add_option("--framework", a.framework, "hf-trainer: a Hugging Face Trainer loop of PyTorch < 2.0 (adamw, no foreach, --zero-grad zeros)");
  cmd->add_option("--top", a.top, "how many of the largest buffers at the peak to list (default 10)");
  cmd->add_flag("--json", a.json, "print one JSON object");
  cmd->add_flag("--trace", a.trace, "print every simulated allocation and free (for comparing with a measured trace)");
  cmd->add_option("--gpu", a.gpu, "GPU from the catalog (headroom gpus lists them)");
  cmd->add_option("--gpu-memory", a.gpu_memory, "device memory of any other GPU, e.g. 24GiB");
  cmd->add_option("--margin", a.margin, "with a GPU: memory kept free, e.g. 10% (default " + a.margin + "; 0% turns it off)");
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
  cmd->add_option("--gpus", a.gpus, "data-parallel GPUs: the estimate is one rank's (docs/distributed.md)");
  cmd->add_option("--zero", a.zero, "with --gpus: DeepSpeed ZeRO stage 0, 1, 2 or 3");
  cmd->add_option("--fsdp", a.fsdp, "with --gpus: PyTorch FSDP sharding, full, grad-op or no-shard");
  cmd->add_option("--reduce-bucket-size", a.reduce_bucket_size, "--zero 2/3: DeepSpeed reduce_bucket_size in elements (default 5e8 = 500000000)");
  cmd->add_option("--tensor-parallel", a.tensor_parallel, "with --gpus: Megatron tensor-parallel size T (gpt2 and llama models); data-parallel size gpus / T");
  cmd->add_option("--grad-accum", a.grad_accum, "with --micro-batch: accumulation steps; the batch per GPU is their product");
}

// The frontend's own options (--dim, --allow-unknown); the library picks the frontend.
void apply_model_source(const EstimateArgs& a, EstimateOptions& o) {
  ModelSourceOptions src;
  for (const std::string& d : a.dims) {
    size_t eq = d.find('=');
    if (eq == std::string::npos || eq == 0) throw InputError("--dim '" + d + "' is not NAME=VALUE");
    src.dims[d.substr(0, eq)] = parse_positive("--dim " + d.substr(0, eq), d.substr(eq + 1));
  }
  src.allow_unknown = a.allow_unknown;
  select_frontend(o, src);
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
    else if (a.mode == "infer") o.mode = RunMode::Inference;
    else throw InputError("--mode must be infer or train, got '" + a.mode + "'");
    auto opt = parse_optimizer(a.optimizer);
    if (!opt) throw InputError("--optimizer must be sgd, momentum, adam or adamw, got '" + a.optimizer + "'");
    o.optimizer = *opt;
    if (a.foreach && a.no_foreach) throw InputError("--foreach and --no-foreach contradict each other");
    if (a.foreach) o.foreach = true;
    if (a.no_foreach) o.foreach = false;
    auto prec = parse_precision(a.precision);
    if (!prec) throw InputError("--precision must be fp32, amp-fp16, amp-bf16 or bf16, got '" + a.precision + "'");
    o.precision = *prec;
    if (cmd->count("--micro-batch")) o.micro_batch = parse_positive("--micro-batch", a.micro_batch);
    if (cmd->count("--grad-accum")) {
      if (!o.micro_batch) throw InputError("--grad-accum needs --micro-batch (the batch per GPU is micro-batch x accumulation)");
      int64_t k = parse_positive("--grad-accum", a.grad_accum);
      int64_t per_gpu = checked_mul(*o.micro_batch, k, "--micro-batch x --grad-accum");
      if (cmd->count("--batch") && o.batch != per_gpu) {
        throw InputError("--batch " + std::to_string(o.batch) + " is not --micro-batch x --grad-accum = " + std::to_string(per_gpu));
      }
      o.batch = per_gpu;
    }
    if (cmd->count("--gpus")) o.parallel.gpus = parse_positive("--gpus", a.gpus);
    if (cmd->count("--zero")) {
      if (a.zero != "0" && a.zero != "1" && a.zero != "2" && a.zero != "3") throw InputError("--zero must be 0, 1, 2 or 3, got '" + a.zero + "'");
      o.parallel.zero_stage = a.zero[0] - '0';
    }
    if (cmd->count("--fsdp")) {
      auto f = parse_fsdp_strategy(a.fsdp);
      if (!f) throw InputError("--fsdp must be full, grad-op or no-shard, got '" + a.fsdp + "'");
      o.parallel.fsdp = *f;
    }
    if (cmd->count("--tensor-parallel")) o.parallel.tensor_parallel = parse_positive("--tensor-parallel", a.tensor_parallel);
    if (cmd->count("--reduce-bucket-size")) o.parallel.reduce_bucket_elements = parse_positive("--reduce-bucket-size", a.reduce_bucket_size);
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
    if (!a.framework.empty()) {
      // Defaults of the loop; flags given explicitly still win.
      if (a.framework != "hf-trainer") throw InputError("--framework must be hf-trainer, got '" + a.framework + "'");
      if (o.mode != RunMode::Training) throw InputError("--framework hf-trainer applies to --mode train");
      if (!cmd->count("--optimizer")) o.optimizer = OptimizerKind::AdamW;
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
    if (cmd->count("--margin") && a.gpu.empty() && a.gpu_memory.empty()) {
      throw InputError("--margin applies with a GPU (--gpu NAME or --gpu-memory SIZE)");
    }
    apply_gpu_options(a, o, false);
    apply_model_source(a, o);
    o.checkpoint_ranges = a.checkpoints;
    return o;
  });
}

int run_estimate(const EstimateArgs& a, const CLI::App* cmd, const std::string& emit_deepspeed) {
  Result<EstimateOptions> o = to_options(a, cmd);
  if (!o.ok()) return fail(o.error());
  Result<Estimate> e = estimate(o.value());
  if (!e.ok()) return fail(e.error());
  if (!emit_deepspeed.empty()) {
    Result<std::string> config = deepspeed_config(e.value());
    if (!config.ok()) return fail(config.error());
    Result<int64_t> written = write_file_atomically(emit_deepspeed, config.value());
    if (!written.ok()) return fail(written.error());
    say_written(emit_deepspeed, written.value());
  }
  if (a.trace) {
    std::cout << program_trace(e.value().program);
    return 0;
  }
  std::cout << (a.json ? estimate_json(e.value()) : estimate_text(e.value(), color_enabled()));
  return 0;
}

int run_fit(const EstimateArgs& a, const CLI::App* cmd, const std::string& vary) {
  Result<EstimateOptions> o = to_options(a, cmd);
  if (!o.ok()) return fail(o.error());
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
  say_written(output, written.value());
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
    say_written(a.html, written.value());
  }
  std::cout << (a.json ? pack_json(r.value()) : pack_text(r.value()));
  return 0;
}

int run_plan_model(const EstimateArgs& a, const CLI::App* cmd, const std::string& budget, const std::string& strategy,
                   const std::string& cost_gpu, const std::string& activation_budget, const std::string& export_chain,
                   const std::string& html) {
  Result<EstimateOptions> o = to_options(a, cmd);
  if (!o.ok()) return fail(o.error());
  if (o.value().parallel.given()) {
    return fail("--gpus, --zero, --fsdp and --tensor-parallel apply to estimate, fit and report; plan's layout search is not built yet (docs/distributed.md)");
  }
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
    say_written(export_chain, written.value());
  }
  if (!html.empty()) {
    Result<int64_t> written = write_file_atomically(html, plan_html(r.value()));
    if (!written.ok()) return fail(written.error());
    say_written(html, written.value());
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

// One line and one example per command: what bare `headroom` and `headroom help` print. README's
// "Commands" block is this text (tests/cli_help_test.cc compares them).
struct CommandHelp {
  const char* usage;
  const char* example;
};
const std::map<std::string, CommandHelp>& command_help() {
  static const std::map<std::string, CommandHelp> help = {
      {"estimate", {"estimate MODEL", "headroom estimate resnet50 --batch 32"}},
      {"fit", {"fit MODEL --gpu NAME", "headroom fit gpt2 --gpu T4"}},
      {"plan", {"plan MODEL --gpu NAME", "headroom plan gpt2 --batch 8 --gpu T4"}},
      {"report", {"report MODEL -o FILE", "headroom report resnet50 -o report.html"}},
      {"pack", {"pack MODEL...", "headroom pack resnet50 vgg16 --gpu T4"}},
      {"models", {"models", "headroom models"}},
      {"gpus", {"gpus", "headroom gpus"}},
      {"watch", {"watch -- COMMAND", "headroom watch -o run.csv -- python train.py"}},
      {"help", {"help [COMMAND]", "headroom help plan"}},
  };
  return help;
}

std::string overview(const CLI::App& app) {
  std::string s = "headroom " HEADROOM_VERSION ": how much GPU memory a model needs, before you run it\n\n";
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    auto it = command_help().find(sub->get_name());
    HEADROOM_CHECK(it != command_help().end(), "no help line for command " + sub->get_name());
    s += fmt::format("  {:<22} {}\n  {:<22}   e.g. {}\n", it->second.usage, sub->get_description(), "",
                     it->second.example);
  }
  s += "\nMODEL is a built-in model (headroom models), NAME:key=value,... or an .onnx file.\n"
       "headroom help COMMAND (or headroom COMMAND --help) lists a command's options.\n";
  return s;
}

// `watch`: NVML samples while a command runs (docs/gpu.md, "Measuring"). Exits with the
// command's exit code once the summary is printed.
struct WatchArgs {
  std::string interval = "100ms";
  std::string pid;
  std::string samples;
  std::string output;
  std::string compare;
  std::vector<std::string> command;
};

volatile sig_atomic_t g_interrupted = 0;

int run_watch(const WatchArgs& a) {
  std::optional<int64_t> predicted;
  std::unique_ptr<Nvml> nvml;
  Result<WatchOptions> o = capture_input_errors([&]() -> WatchOptions {
    WatchOptions w;
    w.interval_ms = parse_interval_ms(a.interval);
    if (!a.pid.empty()) {
      int64_t pid = parse_positive("--pid", a.pid);
      if (pid > INT32_MAX) throw InputError("--pid " + a.pid + " is not a process id");
      w.pid = static_cast<pid_t>(pid);
    }
    if (!a.samples.empty()) w.max_samples = parse_positive("--samples", a.samples);
    w.command = a.command;
    if (!a.output.empty()) (void)sample_format_for(a.output);
    if (!a.compare.empty()) {
      Result<int64_t> p = predicted_device_total(a.compare);
      if (!p.ok()) throw InputError(p.error());
      predicted = p.value();
    }
    nvml = Nvml::load();
    return w;
  });
  if (!o.ok()) return fail(o.error());
  WatchOptions w = o.value();
  // Without a command, Ctrl-C ends the watch and still prints the summary; with one, the command
  // gets the terminal's signal itself and the watch ends when it exits. The handler (not
  // SIG_IGN) is reset to the default in the started command by exec.
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_interrupted = 1; };
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  w.interrupted = [] { return g_interrupted != 0; };
  std::ofstream file;
  if (!a.output.empty()) {
    file.open(a.output, std::ios::binary | std::ios::trunc);
    if (!file) return fail("-o " + a.output + ": cannot open the file for writing");
  }
  Result<WatchResult> r = watch(w, *nvml, a.output.empty() ? nullptr : &file,
                                a.output.empty() ? SampleFormat::Csv : sample_format_for(a.output));
  if (!r.ok()) {
    if (!a.output.empty()) std::remove(a.output.c_str());  // no half-written file
    return fail(r.error());
  }
  std::cout << watch_summary(r.value(), predicted) << std::flush;
  return r.value().exit_code.value_or(0);
}

int main_impl(int argc, char** argv) {
  CLI::App app{"headroom: how much GPU memory a model needs, before you run it"};
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", "headroom " HEADROOM_VERSION);
  EstimateArgs ea;
  CLI::App* est = app.add_subcommand("estimate", "peak memory of inference or a training step");
  add_estimate_options(est, ea);
  std::string emit_deepspeed;
  est->add_option("--emit-deepspeed", emit_deepspeed, "with --gpus and --zero: write the layout's DeepSpeed JSON config to FILE");
  CLI::App* models = app.add_subcommand("models", "list the built-in models");
  EstimateArgs fa;
  std::string vary = "batch";
  CLI::App* fitc = app.add_subcommand("fit", "the largest batch (or sequence) that fits a GPU");
  add_estimate_options(fitc, fa);
  fitc->add_option("--vary", vary, "batch (default) or seq");
  CLI::App* gpus = app.add_subcommand("gpus", "list the GPU catalog");
  std::string chain_file, chain_budget, chain_slots, plan_strategy = "auto", cost_gpu, activation_budget, export_chain;
  EstimateArgs pla;
  pla.margin = "0%";  // a plan's budget is the whole GPU unless asked otherwise
  CLI::App* planc = app.add_subcommand("plan", "the fastest way to train within a memory budget (or --chain: the chain solver)");
  add_estimate_options(planc, pla, /*model_required=*/false);
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
  WatchArgs wa;
  CLI::App* watchc = app.add_subcommand("watch", "sample GPU memory (NVML) while a command runs: -- COMMAND ARGS");
  watchc->add_option("--interval", wa.interval, "time between samples, e.g. 100ms (default) or 1s");
  watchc->add_option("--pid", wa.pid, "watch a running process (and its children) instead of starting one");
  watchc->add_option("--samples", wa.samples, "stop sampling after N samples");
  watchc->add_option("-o,--output", wa.output, "write every sample to FILE.csv or FILE.jsonl");
  watchc->add_option("--compare", wa.compare, "estimate --gpu --json output: print its device total beside the peak");
  watchc->add_option("COMMAND", wa.command, "the command to run and watch, after --");
  std::string help_topic;
  CLI::App* helpc = app.add_subcommand("help", "this overview, or a command's options");
  helpc->add_option("COMMAND", help_topic, "a command");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string msg = e.what();
    if (msg.empty()) msg = "invalid arguments (see headroom --help)";
    return fail(msg);
  }
  if (app.get_subcommands().empty()) {
    std::cout << overview(app);
    return 0;
  }
  if (*helpc) {
    if (help_topic.empty()) {
      std::cout << overview(app);
      return 0;
    }
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
      if (sub->get_name() == help_topic) {
        std::cout << sub->help();
        return 0;
      }
    }
    return fail("help: unknown command '" + help_topic + "' (headroom help lists them)");
  }
  if (*est) return run_estimate(ea, est, emit_deepspeed);
  if (*models) return run_models();
  if (*fitc) return run_fit(fa, fitc, vary);
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
  if (*watchc) return run_watch(wa);
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
