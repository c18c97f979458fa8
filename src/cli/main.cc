// The `headroom` command: parses arguments, calls the library, prints. Every user error is one
// line on stderr and exit code 2, with nothing on stdout.
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <iostream>
#include <map>
#include <limits>
#include <string>

#include "cli/completion.h"
#include "cli/emit.h"
#include "cli/help.h"
#include "cli/progress.h"
#include "estimate/estimate.h"
#include "estimate/fit.h"
#include "estimate/fit_all.h"
#include "estimate/serve.h"
#include "frontends/model_source.h"
#include "measure/watch.h"
#include "plan/chain_dp.h"
#include "plan/chain_model.h"
#include "plan/planner.h"
#include "report/plan_report.h"
#include "plan/layout_search.h"
#include "report/layout_report.h"
#include "plan/checkmate_plan.h"
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
#include "util/checked.h"
#include "util/file.h"
#include "options/next_steps.h"
#include "options/run_args.h"

namespace headroom {
namespace {

constexpr int kUsageError = 2;

// Messages may quote names from files or the command line: control bytes are escaped so that
// every error stays one line.
int fail(const std::string& message) {
  std::cerr << "headroom: " << escape_control(message) << "\n";
  return kUsageError;
}

// Every file a command writes is named on stderr (stdout carries the result, e.g. --json).
void say_written(const std::string& path, int64_t bytes) {
  if (Progress::quiet()) return;
  std::cerr << "headroom: wrote " << path << " (" << human_bytes(bytes) << ")\n";
}

// An option given with an empty value (`--gpu ''`) is an error, never "not given".
std::optional<std::string> empty_option_value(const CLI::App* cmd) {
  for (const CLI::Option* opt : cmd->get_options()) {
    if (opt->count() == 0 || opt->get_type_size_max() == 0) continue;  // not given, or a flag
    for (const std::string& v : opt->results()) {
      if (v.empty()) {
        std::string name = opt->get_name(false, true);
        return (name.empty() ? opt->get_name() : name) + " needs a value, got ''";
      }
    }
  }
  for (const CLI::App* sub : cmd->get_subcommands()) {
    if (auto e = empty_option_value(sub)) return e;
  }
  return std::nullopt;
}

bool color_enabled() {
  return isatty(STDOUT_FILENO) && std::getenv("NO_COLOR") == nullptr;
}

// The CLI's view of the shared options (options/run_args.h): CLI11 binds the text fields of
// `run`; --seq and --micro-batch are set only when given; --json and --trace are the CLI's own.
struct EstimateArgs {
  RunArgs run;
  std::string seq, micro_batch, threads, prompt, new_tokens, beams, cache, attention, lora, qlora, weights, group_size;
  std::string gpus, zero, fsdp, fsdp_wrap, reduce_bucket_size, grad_accum, tensor_parallel;  // parallel layout
  std::string offload_optimizer, offload_params;
  std::string pipeline_parallel, pipeline_schedule, virtual_stages;
  std::string samples, tokens, epochs, host_memory;  // estimate's time options
  std::string objective;                             // fit's ranking
  bool json = false;
  bool trace = false;
};

void add_estimate_options(CLI::App* cmd, EstimateArgs& e, bool model_required = true) {
  RunArgs& a = e.run;
  CLI::Option* model = cmd->add_option("MODEL", a.model, "built-in model, e.g. resnet50 or mlp:layers=16,dim=1024");
  if (model_required) model->required();
  cmd->add_option("--batch", a.batch, "batch size (default 1)");
  cmd->add_option("--seq", e.seq, "sequence length for sequence models");
  cmd->add_option("--mode", a.mode, "infer, train or generate (default train; generate: Hugging Face configs; fit also serve)");
  cmd->add_option("--prompt", e.prompt, "generate: prompt tokens");
  cmd->add_option("--new-tokens", e.new_tokens, "generate: tokens to generate");
  cmd->add_option("--beams", e.beams, "generate: beam search over K beams (num_beams; default 1, greedy)");
  cmd->add_option("--cache", e.cache, "generate: dynamic (default, DynamicCache) or static (StaticCache of prompt + new tokens)");
  cmd->add_option("--attention", e.attention, "Hugging Face configs: eager, sdpa (default) or flash");
  cmd->add_option("--lora", e.lora, "Hugging Face decoders: LoRA adapters, r=16,alpha=32,targets=q_proj,v_proj[,dropout=0.05] (frozen base)");
  cmd->add_option("--qlora", e.qlora, "training, Hugging Face decoders: QLoRA, i.e. --lora SPEC --weights nf4 --precision bf16 --optimizer paged-adamw8bit");
  cmd->add_option("--weights", e.weights, "Hugging Face decoders: int8 or nf4 (bitsandbytes), int4 (GPTQ) or fp8 (FbgemmFp8Linear) storage of the decoder layers' linears");
  cmd->add_option("--group-size", e.group_size, "--weights int4: values per scale and zero (default 128)");
  cmd->add_option("--freeze", a.freeze, "training: freeze the parameters whose name matches this regular expression (repeatable)");
  cmd->add_option("--optimizer", a.optimizer, "sgd, momentum, adam, adamw, adamw8bit, paged-adamw8bit, lion or adafactor (default adam)");
  cmd->add_flag("--foreach", a.foreach, "use the optimizer's foreach (multi-tensor) implementation");
  cmd->add_flag("--no-foreach", a.no_foreach, "use the single-tensor implementation");
  cmd->add_option("--precision", a.precision, "fp32, fp16, bf16, amp-fp16 or amp-bf16 (default fp32; Hugging Face configs: their torch_dtype)");
  cmd->add_option("--micro-batch", e.micro_batch, "gradient accumulation: forward/backward at this size");
  cmd->add_option("--device", a.device, "cuda or cpu kernels' memory behaviour (default cuda)");
  cmd->add_option("--threads", e.threads, "--device cpu: intra-op threads, torch.set_num_threads (default 1)");
  cmd->add_option("--dropout", a.dropout, "on or off (off: every dropout is identity)");
  cmd->add_option("--loss", a.loss, "cross-entropy, next-token or mse (default: the model's); ONNX files: an expression such as \"ce:out+0.5*ce:aux\", bce, l1, smooth-l1, pixel-ce, token-ce, or none (docs/onnx.md)");
  cmd->add_option("--zero-grad", a.zero_grad, "training: none (set_to_none=True, default) or zeros (keeps gradients, PyTorch < 2.0)");
  cmd->add_option("--framework", a.framework, "hf-trainer: a Hugging Face Trainer loop of PyTorch < 2.0 (adamw, no foreach, --zero-grad zeros)");
  cmd->add_option("--top", a.top, "how many of the largest buffers at the peak to list (default 10)");
  cmd->add_flag("--json", e.json, "print one JSON object");
  cmd->add_flag("--trace", e.trace, "print every simulated allocation and free (for comparing with a measured trace)");
  cmd->add_option("--gpu", a.gpu, "GPU from the catalog (headroom gpus lists them)");
  cmd->add_option("--gpu-memory", a.gpu_memory, "device memory of any other GPU, e.g. 24GiB");
  cmd->add_option("--margin", a.margin, "with a GPU: memory kept free, e.g. 10% (default " + a.margin + "; 0% turns it off)");
  cmd->add_option("--cuda-context", a.cuda_context, "CUDA context size (default: the measured H100 / CUDA 13.0 / PyTorch 2.11 context for what the run uses, 676-758MiB; 616MiB with --eager-module-loading)");
  cmd->add_flag("--eager-module-loading", a.eager_loading, "CUDA_MODULE_LOADING=EAGER: a larger context");
  cmd->add_flag("--nccl", a.nccl, "add NCCL communicator memory (default 512MiB, --nccl-memory)");
  cmd->add_option("--nccl-memory", a.nccl_memory, "NCCL memory with --nccl");
  cmd->add_option("--max-split-size-mb", a.max_split_size_mb, "PYTORCH_CUDA_ALLOC_CONF max_split_size_mb");
  cmd->add_flag("--expandable-segments", a.expandable_segments, "PYTORCH_CUDA_ALLOC_CONF expandable_segments:True");
  cmd->add_option("--cublas-workspace", a.cublas_workspace, "cuBLAS workspace per handle (0 = CUBLAS_WORKSPACE_CONFIG=:0:0)");
  cmd->add_option("--conv-workspace", a.conv_workspace, "cuDNN workspace policy: cudnn9 (default on CUDA: cuDNN 9.19's operand copies), activation, none or a size cap");
  cmd->add_option("--gpus", e.gpus, "data-parallel GPUs: the estimate is one rank's (docs/distributed.md)");
  cmd->add_option("--zero", e.zero, "with --gpus: DeepSpeed ZeRO stage 0, 1, 2 or 3");
  cmd->add_option("--fsdp", e.fsdp, "with --gpus: PyTorch FSDP sharding, full, grad-op or no-shard");
  cmd->add_option("--fsdp-wrap", e.fsdp_wrap, "with --fsdp: its units, block (one per repeated block, transformer_auto_wrap_policy; the default where the model has blocks) or param (one per op's parameters)");
  cmd->add_option("--reduce-bucket-size", e.reduce_bucket_size, "--zero 2/3: DeepSpeed reduce_bucket_size in elements (default 5e8 = 500000000)");
  cmd->add_option("--offload-optimizer", e.offload_optimizer, "with --zero 1-3: DeepSpeed offload_optimizer device, cpu (ZeRO-Offload) or nvme (ZeRO-Infinity, --zero 3)");
  cmd->add_option("--offload-params", e.offload_params, "with --zero 3 or --fsdp: cpu keeps the parameter shards on the host (offload_param, CPUOffload)");
  cmd->add_option("--tensor-parallel", e.tensor_parallel, "with --gpus: Megatron tensor-parallel size T (gpt2, llama and Hugging Face decoder configs); data-parallel size gpus / T");
  cmd->add_option("--pipeline-parallel", e.pipeline_parallel, "with --gpus and --micro-batch/--grad-accum: Megatron pipeline-parallel size P; the estimate is the peak stage's rank (data-parallel size gpus / (T x P))");
  cmd->add_option("--pipeline-schedule", e.pipeline_schedule, "with --pipeline-parallel: 1f1b (default), gpipe or interleaved");
  cmd->add_option("--virtual-stages", e.virtual_stages, "--pipeline-schedule interleaved: model chunks per rank (Megatron's virtual pipeline size)");
  cmd->add_flag("--megatron", a.megatron, "with --gpus: Megatron-LM's own DDP (one contiguous fp32 main_grad buffer per rank); with --zero 1 its distributed optimizer");
  cmd->add_flag("--sequence-parallel", a.sequence_parallel, "with --tensor-parallel T > 1: Megatron sequence parallelism (norms, dropouts and residuals on seq / T positions)");
  cmd->add_option("--grad-accum", e.grad_accum, "with --micro-batch: accumulation steps; the batch per GPU is their product");
  cmd->add_option("--dim", a.dims, "ONNX: bind a symbolic dimension, NAME=VALUE (repeatable)");
  cmd->add_option("--checkpoint", a.checkpoints, "training: checkpoint ops FIRST..LAST (op names; repeatable), or blocks: every repeated block (HF gradient checkpointing), or attention: every block's attention core (Megatron's selective recomputation)");
  cmd->add_option("--checkpoint-impl", a.checkpoint_impl, "with --checkpoint: reentrant (torch.utils.checkpoint's default in 1.13) or non-reentrant (use_reentrant=False)");
  cmd->add_option("--offload", a.offloads, "training on cuda: offload the activations op NAME saves to host memory (repeatable)");
  cmd->add_flag("--allow-unknown", a.allow_unknown, "ONNX: treat unknown ops as elementwise (with a warning)");
  cmd->add_option("--max-detections", a.max_detections, "ONNX: upper bound on every data-dependent count (NonZero, NonMaxSuppression: detections); default their bounds in the file");
}

// The shared options as parsed, with the options given only sometimes filled in.
RunArgs run_args(const EstimateArgs& e, const CLI::App* cmd) {
  RunArgs a = e.run;
  if (cmd->count("--seq")) a.seq = e.seq;
  if (cmd->count("--micro-batch")) a.micro_batch = e.micro_batch;
  if (cmd->count("--threads")) a.threads = e.threads;
  if (cmd->count("--prompt")) a.prompt = e.prompt;
  if (cmd->count("--new-tokens")) a.new_tokens = e.new_tokens;
  if (cmd->count("--beams")) a.beams = e.beams;
  if (cmd->count("--cache")) a.cache = e.cache;
  if (cmd->count("--attention")) a.attention = e.attention;
  if (cmd->count("--lora")) a.lora = e.lora;
  if (cmd->count("--qlora")) a.qlora = e.qlora;
  if (cmd->count("--weights")) a.weights = e.weights;
  if (cmd->count("--gpus")) a.gpus = e.gpus;
  if (cmd->count("--zero")) a.zero = e.zero;
  if (cmd->count("--fsdp")) a.fsdp = e.fsdp;
  if (cmd->count("--fsdp-wrap")) a.fsdp_wrap = e.fsdp_wrap;
  if (cmd->count("--reduce-bucket-size")) a.reduce_bucket_size = e.reduce_bucket_size;
  if (cmd->count("--tensor-parallel")) a.tensor_parallel = e.tensor_parallel;
  if (cmd->count("--pipeline-parallel")) a.pipeline_parallel = e.pipeline_parallel;
  if (cmd->count("--pipeline-schedule")) a.pipeline_schedule = e.pipeline_schedule;
  if (cmd->count("--virtual-stages")) a.virtual_stages = e.virtual_stages;
  if (cmd->count("--offload-optimizer")) a.offload_optimizer = e.offload_optimizer;
  if (cmd->count("--offload-params")) a.offload_params = e.offload_params;
  if (cmd->count("--grad-accum")) a.grad_accum = e.grad_accum;
  if (cmd->get_option_no_throw("--samples") && cmd->count("--samples")) a.samples = e.samples;
  if (cmd->get_option_no_throw("--tokens") && cmd->count("--tokens")) a.tokens = e.tokens;
  if (cmd->get_option_no_throw("--epochs") && cmd->count("--epochs")) a.epochs = e.epochs;
  if (cmd->get_option_no_throw("--host-memory") && cmd->count("--host-memory")) a.host_memory = e.host_memory;
  if (cmd->get_option_no_throw("--objective") && cmd->count("--objective")) a.objective = e.objective;
  a.batch_given = cmd->count("--batch") > 0;
  if (cmd->count("--group-size")) a.group_size = e.group_size;
  a.optimizer_given = cmd->count("--optimizer") > 0;
  a.precision_given = cmd->count("--precision") > 0;
  a.margin_given = cmd->count("--margin") > 0;
  a.keep_program = e.trace;
  return a;
}

Result<EstimateOptions> to_options(const EstimateArgs& e, const CLI::App* cmd, RunCommand command) {
  return to_estimate_options(run_args(e, cmd), command);
}

int run_estimate(const EstimateArgs& a, const CLI::App* cmd, const std::vector<std::string>& emit, const std::string& emit_deepspeed) {
  Result<std::vector<EmitRequest>> emits = capture_input_errors([&] { return parse_emit_requests(emit, emit_deepspeed); });
  if (!emits.ok()) return fail(emits.error());
  Result<EstimateOptions> o = to_options(a, cmd, RunCommand::Estimate);
  if (!o.ok()) return fail(o.error());
  Progress progress("estimating " + a.run.model);
  Result<Estimate> e = estimate(o.value());
  progress.finish();
  if (!e.ok()) return fail(e.error());
  Result<int> written = write_emits(emits.value(), [&](EmitKind) { return e; }, say_written);
  if (!written.ok()) return fail(written.error());
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
    if (a.run.gpu == "all") throw InputError("--mode serve takes one GPU (--gpu NAME)");
    if (cmd->count("--vary")) throw InputError("--vary does not apply to --mode serve");
    if (cmd->count("--batch")) throw InputError("--batch does not apply to --mode serve (vLLM batches up to 256 sequences)");
    if (cmd->count("--seq")) throw InputError("--seq does not apply to --mode serve: the context is --context N");
    if (base.parallel.tensor_parallel != 1 || base.parallel.sequence_parallel) {
      throw InputError("--tensor-parallel and --sequence-parallel do not apply to --mode serve (the KV capacity of one whole-model GPU)");
    }
    ServeOptions o;
    o.estimate = base;
    RunArgs gpu_args = a.run;
    if (!cmd->count("--margin")) gpu_args.margin = "0%";  // --gpu-memory-utilization is vLLM's own margin
    apply_gpu_args(gpu_args, o.estimate, /*required=*/true);
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
  EstimateArgs searched = a;
  searched.run.vary = vary;  // a fixed-batch ONNX export refuses the batch search (model_source.h)
  Result<EstimateOptions> o = to_options(searched, cmd, RunCommand::Fit);
  if (!o.ok()) return fail(o.error());
  const bool serve_mode = a.run.mode == "serve";
  if (!serve_mode && (!serve.context.empty() || !serve.block_size.empty() || !serve.utilization.empty())) {
    return fail("--context, --block-size and --gpu-memory-utilization apply to --mode serve");
  }
  if (serve_mode) return run_serve(a, cmd, serve, o.value());
  if (vary != "batch" && vary != "seq") return fail("--vary must be batch or seq, got '" + vary + "'");
  std::vector<std::string> gpus;
  if (a.run.gpu == "all") {
    for (const GpuSpec& g : DeviceCatalog::builtin().gpus()) gpus.push_back(g.name);
  } else {
    gpus.push_back(a.run.gpu);
  }
  Result<std::optional<RankRequest>> rank = capture_input_errors([&] { return to_rank_request(run_args(a, cmd)); });
  if (!rank.ok()) return fail(rank.error());
  if (rank.value() && vary != "batch") return fail("--objective ranks GPUs by batch; it does not apply with --vary seq");
  std::vector<EstimateOptions> runs;
  Progress progress("fitting " + a.run.model);
  std::vector<GpuOptions> gpu_options;
  for (const std::string& name : gpus) {
    RunArgs one = a.run;
    one.gpu = name;
    Result<EstimateOptions> oo = capture_input_errors([&]() {
      EstimateOptions e = o.value();
      apply_gpu_args(one, e, /*required=*/true, /*gpu_all=*/true);
      return e;
    });
    if (!oo.ok()) {
      progress.finish();
      return fail(oo.error());
    }
    gpu_options.push_back(*oo.value().gpu);
    runs.push_back(oo.value());
  }
  FitOptions f;
  f.estimate = o.value();
  f.axis = vary == "seq" ? FitAxis::Seq : FitAxis::Batch;
  Result<std::vector<FitResult>> fitted = fit_all(f, gpu_options, [&](size_t i, size_t n, const std::string& name) {
    if (n > 1) progress.set(fmt::format("fitting {} ({}/{})", name, i + 1, n));
  });
  if (!fitted.ok()) {
    progress.finish();
    return fail(fitted.error());
  }
  const std::vector<FitResult>& results = fitted.value();
  std::optional<Ranking> ranking;
  if (rank.value()) {
    if (gpus.size() > 1) progress.set("ranking " + std::to_string(gpus.size()) + " GPUs");
    Result<std::vector<RankedGpu>> rows = rank_gpus(*rank.value(), runs, results);
    if (!rows.ok()) {
      progress.finish();
      return fail(rows.error());
    }
    ranking = Ranking{rank.value()->objective, rows.value()};
  }
  // Nothing fits anywhere: what headroom can evaluate next, on the largest GPU tried.
  if (std::none_of(results.begin(), results.end(), [](const FitResult& r) { return r.max_value > 0; })) {
    progress.set("evaluating next steps");
  }
  std::vector<NextStep> steps = next_steps_if_nothing_fits(run_args(a, cmd), results);
  progress.finish();
  std::cout << (a.json ? fit_json(o.value(), results, steps, ranking) : fit_text(o.value(), results, steps, ranking));
  return 0;
}

// `report`: the estimate as one self-contained HTML page (docs/report.md), written atomically.
int run_report(const EstimateArgs& a, const CLI::App* cmd, const std::string& output, const std::string& measured) {
  if (a.json || a.trace) return fail("report writes HTML to --output; --json and --trace belong to estimate");
  Result<EstimateOptions> o = to_options(a, cmd, RunCommand::Report);
  if (!o.ok()) return fail(o.error());
  HtmlReportOptions ho;
  if (!measured.empty()) {
    Result<MeasuredSeries> m = read_watch_samples(measured);
    if (!m.ok()) return fail(m.error());
    ho.measured = std::move(m.value());
  }
  Progress progress("building the report of " + a.run.model);
  Result<std::string> html = html_report(o.value(), ho);
  progress.finish();
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
  std::string merged_groups;  // --merged-groups N: the greedy prefix kept by joint retraining
  std::string html;  // --html FILE: also write the page (report/pack_html.h)
  std::string margin = "5%";  // estimate's default, so both commands give one verdict
  bool margin_given = false;
  bool json = false;
};

int run_pack(const PackArgs& a) {
  Result<PackOptions> o = capture_input_errors([&]() -> PackOptions {
    PackOptions p;
    p.models = a.models;
    p.batch = parse_positive("--batch", a.batch);
    p.gpu = a.gpu;
    if (!a.gpu_memory.empty()) p.gpu_memory = parse_memory_size(a.gpu_memory);
    if (a.margin_given && a.gpu.empty() && a.gpu_memory.empty()) {
      throw InputError("--margin applies with a GPU (--gpu NAME or --gpu-memory SIZE)");
    }
    p.margin = parse_margin(a.margin);
    if (!a.merged_groups.empty()) {
      // 0 is meaningful (no merge kept: "merged" = free sharing only).
      int64_t n = 0;
      if (a.merged_groups != "0") {
        try {
          n = parse_positive("--merged-groups", a.merged_groups);
        } catch (const InputError&) {
          throw InputError("--merged-groups must be a number of groups (0 or more), got '" + a.merged_groups + "'");
        }
      }
      if (n > std::numeric_limits<int32_t>::max()) throw InputError("--merged-groups " + a.merged_groups + " is too large");
      p.merged_groups = static_cast<int32_t>(n);
    }
    if (!a.workload.empty()) {
      Result<Workload> w = read_workload_file(a.workload);
      if (!w.ok()) throw InputError(w.error());
      p.workload = w.value();
    }
    return p;
  });
  if (!o.ok()) return fail(o.error());
  Progress progress(fmt::format("packing {} models", a.models.size()));
  Result<PackReport> r = pack(o.value(), load_model_for_pack);
  progress.finish();
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

// plan --gpus N: the data-parallel layout search (plan/layout_search.h, docs/distributed.md).
struct LayoutArgs {
  std::string global_batch, interconnect, emit_deepspeed;
  std::vector<std::string> emit;  // --emit KIND FILE pairs
};

int run_plan_layouts(const EstimateArgs& a, const CLI::App* cmd, const EstimateOptions& o, const LayoutArgs& l,
                     const std::string& html, const std::string& export_chain, const std::string& budget,
                     const std::string& strategy) {
  if (!html.empty() || !export_chain.empty() || !budget.empty() || strategy != "auto" || cmd->count("--cost-gpu") ||
      cmd->count("--activation-budget")) {
    return fail("plan --gpus N takes --gpu NAME, --global-batch, --interconnect and --emit (not --html, --export-chain, --budget, --strategy, --cost-gpu or --activation-budget)");
  }
  Result<LayoutPlan> r = capture_input_errors([&]() -> LayoutPlan {
    LayoutRequest req;
    req.run = o;
    req.gpus = o.parallel.gpus;
    req.run.parallel = {};
    if (o.parallel.zero_stage || o.parallel.fsdp || o.parallel.fsdp_wrap || o.parallel.tensor_parallel != 1 || o.parallel.sequence_parallel || o.parallel.megatron ||
        o.parallel.reduce_bucket_elements || o.parallel.offload_optimizer || o.parallel.offload_params || o.parallel.pipeline_given()) {
      throw InputError("plan --gpus searches the layout itself: give --gpus N without --zero, --fsdp, --fsdp-wrap, --megatron, --tensor-parallel, --sequence-parallel, --pipeline-parallel, --reduce-bucket-size or the offload options");
    }
    if (!l.global_batch.empty()) req.global_batch = parse_positive("--global-batch", l.global_batch);
    if (!l.interconnect.empty()) req.interconnect_bytes_per_s = parse_bandwidth("--interconnect", l.interconnect);
    Progress progress("searching layouts of " + a.run.model);
    Result<LayoutPlan> p = search_layouts(req);
    progress.finish();
    if (!p.ok()) throw InputError(p.error());
    return p.value();
  });
  if (!r.ok()) return fail(r.error());
  {
    // Each kind emits the fastest ranked layout its engine runs (accelerate: the fastest of all).
    Result<std::vector<EmitRequest>> emits = capture_input_errors([&] { return parse_emit_requests(l.emit, l.emit_deepspeed); });
    if (!emits.ok()) return fail(emits.error());
    Result<int> written = write_emits(emits.value(), [&](EmitKind kind) -> Result<Estimate> {
      for (const LayoutOption& opt : r.value().ranked) {
        // Megatron runs DDP or its distributed optimizer (ZeRO-1) under any T and P.
        const bool megatron = !opt.parallel.fsdp && opt.parallel.zero_stage.value_or(0) <= 1 && !opt.parallel.offload_optimizer &&
                              !opt.parallel.offload_params;
        const bool accelerate = opt.parallel.tensor_parallel == 1 && opt.parallel.pipeline_parallel == 1 && !opt.parallel.megatron;
        const bool runs = kind == EmitKind::Accelerate ? accelerate : (kind == EmitKind::Megatron ? megatron
                                                           : kind == EmitKind::DeepSpeed ? opt.parallel.zero_stage.has_value() && !opt.parallel.megatron
                                                                                         : opt.parallel.fsdp.has_value());
        if (runs) return estimate(layout_options(r.value(), opt));
      }
      return Result<Estimate>::failure(kind == EmitKind::DeepSpeed ? "--emit deepspeed: no DeepSpeed ZeRO layout fits"
                                       : kind == EmitKind::Fsdp    ? "--emit fsdp: no FSDP layout fits"
                                       : kind == EmitKind::Megatron ? "--emit megatron: no layout Megatron runs (DDP or ZeRO-1, tensor and pipeline parallel) fits"
                                                                   : "--emit accelerate: no layout fits");
    }, say_written);
    if (!written.ok()) return fail(written.error());
  }
  std::cout << (a.json ? layout_json(r.value()) : layout_text(r.value()));
  return 0;
}

int run_plan_model(const EstimateArgs& a, const CLI::App* cmd, const std::string& budget, const std::string& strategy,
                   const std::string& cost_gpu, const std::string& activation_budget, const std::string& export_chain,
                   const std::string& html, const LayoutArgs& layout) {
  Result<EstimateOptions> o = to_options(a, cmd, RunCommand::Plan);
  if (!o.ok()) return fail(o.error());
  if (o.value().parallel.given()) return run_plan_layouts(a, cmd, o.value(), layout, html, export_chain, budget, strategy);
  if (!layout.global_batch.empty() || !layout.interconnect.empty() || !layout.emit_deepspeed.empty() || !layout.emit.empty()) {
    return fail("--global-batch, --interconnect, --emit and --emit-deepspeed apply to plan --gpus N");
  }
  Result<Plan> r = capture_input_errors([&]() -> Plan {
    PlanRequest req;
    req.run = o.value();
    if (!budget.empty()) req.budget_bytes = parse_memory_size(budget);
    if (!activation_budget.empty()) req.activation_fraction = parse_fraction("--activation-budget", activation_budget);
    req.strategy = strategy;
    req.cost_gpu = cost_gpu;
    Progress progress("planning " + a.run.model);
    req.progress = [&progress](const std::string& name, int i, int n) {
      progress.set(fmt::format("planning: {} ({}/{})", name, i, n));
    };
    Result<Plan> p = make_plan(req);
    progress.finish();
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
    Progress progress("solving the chain");
    Result<ChainPlan> p = solve_chain(c.value(), b, static_cast<int>(n));
    progress.finish();
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
    Progress progress(fmt::format("solving the integer program (time limit {} s)", o.time_limit_s));
    Result<RematPlan> p = solve_remat(g.value(), b, static_cast<int>(n), o);
    progress.finish();
    if (!p.ok()) throw InputError(p.error());
    return p.value();
  });
  if (!r.ok()) return fail(r.error());
  std::cout << (json ? remat_plan_json(r.value()) : remat_plan_text(r.value()));
  return 0;
}

// plan --graph FILE --memory-model checkmate: Checkmate's graph form and MILP (docs/ilp.md §9).
int run_plan_checkmate(const std::string& file, const std::string& budget, const std::string& time_limit,
                       const std::string& formulation, bool json) {
  Result<CheckmatePlan> r = capture_input_errors([&]() -> CheckmatePlan {
    if (budget.empty()) throw InputError("plan --graph needs --budget SIZE");
    const int64_t b = parse_memory_size(budget);
    CheckmateIlpOptions o;
    if (formulation == "literal") o.formulation = CheckmateFormulation::Literal;
    else if (!formulation.empty() && formulation != "headroom")
      throw InputError("--formulation " + formulation + " is not literal or headroom");
    if (!time_limit.empty()) {
      char* end = nullptr;
      o.time_limit_s = std::strtod(time_limit.c_str(), &end);
      if (end == time_limit.c_str() || *end != '\0' || !(o.time_limit_s > 0) || o.time_limit_s > 1e6)
        throw InputError("--time-limit " + time_limit + " is not a positive number of seconds");
    }
    Result<CheckmateGraph> g = load_checkmate_graph_file(file);
    if (!g.ok()) throw InputError(g.error());
    Progress progress(fmt::format("solving Checkmate's integer program (time limit {} s)", o.time_limit_s));
    Result<CheckmatePlan> p = solve_checkmate(g.value(), b, o);
    progress.finish();
    if (!p.ok()) throw InputError(p.error());
    return p.value();
  });
  if (!r.ok()) return fail(r.error());
  std::cout << (json ? checkmate_plan_json(r.value()) : checkmate_plan_text(r.value()));
  return 0;
}

int run_gpus() {
  std::cout << fmt::format("{:<18} {:>10}  {:<10} {:>10} {:>5}  {}\n", "gpu", "memory", "arch", "fp32 TF/s", "SMs", "aliases");
  for (const GpuSpec& g : DeviceCatalog::builtin().gpus()) {
    std::string aliases;
    for (const std::string& al : g.aliases) aliases += (aliases.empty() ? "" : ", ") + al;
    std::cout << fmt::format("{:<18} {:>10}  {:<10} {:>10.1f} {:>5}  {}\n", g.name, human_bytes(g.memory_bytes), g.architecture,
                             g.fp32_flops / 1e12, g.multiprocessors, aliases);
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
  // --quiet is accepted before or after the command (fallthrough).
  bool quiet = false;
  app.add_flag("-q,--quiet", quiet, "no progress line and no \"wrote FILE\" notes on stderr");
  app.fallthrough();
  EstimateArgs ea;
  CLI::App* est = app.add_subcommand("estimate", "peak memory of inference or a training step");
  add_estimate_options(est, ea);
  std::string emit_deepspeed;
  std::vector<std::string> emit;
  est->add_option("--emit", emit, "with --gpus: KIND FILE writes the layout's engine config: deepspeed (JSON), fsdp (Python) or accelerate (YAML); repeatable")
      ->expected(2)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  est->add_option("--emit-deepspeed", emit_deepspeed, "with --gpus and --zero: --emit deepspeed FILE");
  est->add_option("--host-memory", ea.host_memory, "with --gpu NAME: weights loaded from pageable (default) or pinned host memory");
  est->add_option("--samples", ea.samples, "with --gpu NAME: time a whole run of N samples per epoch");
  est->add_option("--tokens", ea.tokens, "with --gpu NAME: time a whole run of N tokens per epoch (token models)");
  est->add_option("--epochs", ea.epochs, "with --samples or --tokens: epochs (default 1)");
  est->add_option("--price", ea.run.prices, "with --samples or --tokens: NAME=USD/h instead of the catalog's cheapest price (repeatable)");
  CLI::App* models = app.add_subcommand("models", "list the built-in models");
  EstimateArgs fa;
  std::string vary = "batch";
  CLI::App* fitc = app.add_subcommand("fit", "the largest batch (or sequence) that fits a GPU");
  add_estimate_options(fitc, fa);
  fitc->add_option("--vary", vary, "batch (default) or seq");
  fitc->add_option("--objective", fa.objective, "rank the GPUs by cost (per 1k samples or 1M tokens), time or memory left; needs a GPU with time (--gpu NAME or all)");
  fitc->add_option("--price", fa.run.prices, "with --objective cost: NAME=USD/h instead of the catalog's price (repeatable)");
  ServeArgs serve_args;
  fitc->add_option("--context", serve_args.context, "--mode serve: the longest sequence served (vLLM's max_model_len)");
  fitc->add_option("--block-size", serve_args.block_size, "--mode serve: tokens per KV block (default 16)");
  fitc->add_option("--gpu-memory-utilization", serve_args.utilization, "--mode serve: share of device memory vLLM may use (default 0.9)");
  CLI::App* gpus = app.add_subcommand("gpus", "list the GPU catalog");
  std::string chain_file, chain_budget, chain_slots, plan_strategy = "auto", cost_gpu, activation_budget, export_chain;
  EstimateArgs pla;
  pla.run.margin = "0%";  // a plan's budget is the whole GPU unless asked otherwise
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
  std::string memory_model, formulation;
  planc->add_option("--memory-model", memory_model,
                    "--graph: headroom (default: a chain file plus preds) or checkmate (Checkmate's graph form and MILP)");
  planc->add_option("--formulation", formulation,
                    "--memory-model checkmate: headroom (default, the faster program) or literal (Checkmate's own)");
  LayoutArgs layout_args;
  planc->add_option("--global-batch", layout_args.global_batch, "--gpus N: samples per optimizer step over all GPUs (default --batch x N)");
  planc->add_option("--interconnect", layout_args.interconnect, "--gpus N: GPU-to-GPU bandwidth per direction, e.g. 100GB/s (default: the GPU's NVLink or PCIe, InfiniBand between machines)");
  planc->add_option("--emit", layout_args.emit, "--gpus N: KIND FILE writes the fastest layout's engine config: deepspeed (fastest ZeRO), fsdp (fastest FSDP), accelerate (fastest); repeatable")
      ->expected(2)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  planc->add_option("--emit-deepspeed", layout_args.emit_deepspeed, "--gpus N: --emit deepspeed FILE");
  std::string plan_html_file;
  planc->add_option("--html", plan_html_file, "MODEL: also write an HTML page: memory over a step per strategy, the budget, decisions");
  PackArgs pa;
  CLI::App* packc = app.add_subcommand("pack", "several models on one GPU: shared layers, residency, swapping");
  packc->add_option("MODEL", pa.models, "built-in models or .onnx files")->required();
  packc->add_option("--batch", pa.batch, "batch size of every model (default 1)");
  packc->add_option("--gpu", pa.gpu, "GPU from the catalog (headroom gpus lists them)");
  packc->add_option("--gpu-memory", pa.gpu_memory, "device memory of any other GPU, e.g. 24GiB");
  packc->add_option("--workload", pa.workload, "JSON workload to simulate with weight swapping");
  packc->add_option("--merged-groups", pa.merged_groups, "count only the first N merge groups as merged (the prefix kept by retraining)");
  packc->add_option("--margin", pa.margin, "with a GPU: memory kept free, e.g. 10% (default 5%, as estimate; 0% turns it off)");
  packc->add_flag("--json", pa.json, "print one JSON object");
  packc->add_option("--html", pa.html, "also write an HTML page: savings curve, free sharing, weight distribution");
  EstimateArgs ra;
  std::string report_output;
  CLI::App* report = app.add_subcommand("report", "an HTML report: memory over the run, the peak, weights per layer");
  add_estimate_options(report, ra);
  report->add_option("-o,--output", report_output, "the HTML file to write")->required();
  std::string report_measured;
  report->add_option("--measured", report_measured, "a headroom watch CSV/JSONL: draw it over the predicted timeline");
  WatchArgs wa;
  CLI::App* watchc = app.add_subcommand("watch", "sample GPU memory (NVML) while a command runs: -- COMMAND ARGS");
  watchc->add_option("--interval", wa.interval, "time between samples, e.g. 100ms (default) or 1s");
  watchc->add_option("--pid", wa.pid, "watch a running process (and its children) instead of starting one");
  watchc->add_option("--samples", wa.samples, "stop sampling after N samples");
  watchc->add_option("-o,--output", wa.output, "write every sample to FILE.csv or FILE.jsonl");
  watchc->add_option("--compare", wa.compare, "estimate --gpu --json output: print its device total beside the peak");
  watchc->add_option("COMMAND", wa.command, "the command to run and watch, after --");
  std::string shell;
  CLI::App* completionc = app.add_subcommand("completion", "a shell completion script: bash or zsh");
  completionc->add_option("SHELL", shell, "bash or zsh")->required();
  std::string help_topic;
  bool help_man = false;
  CLI::App* helpc = app.add_subcommand("help", "this overview, or a command's options");
  helpc->add_option("COMMAND", help_topic, "a command");
  helpc->add_flag("--man", help_man, "the manual page (roff): headroom help --man | man -l -");
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
  if (auto empty = empty_option_value(&app)) return fail(*empty);
  Progress::configure(quiet);
  if (app.get_subcommands().empty()) {
    std::cout << overview(app);
    return 0;
  }
  if (*helpc) {
    if (help_man) {
      if (!help_topic.empty()) return fail("help --man prints the whole manual; it takes no COMMAND");
      std::cout << man_page(app);
      return 0;
    }
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
  if (*completionc) {
    if (shell == "bash") std::cout << bash_completion(app);
    else if (shell == "zsh") std::cout << zsh_completion(app);
    else return fail("completion: unknown shell '" + shell + "' (bash or zsh)");
    return 0;
  }
  if (*est) return run_estimate(ea, est, emit, emit_deepspeed);
  if (*models) return run_models();
  if (*fitc) return run_fit(fa, fitc, vary, serve_args);
  if (*gpus) return run_gpus();
  if (*planc) {
    if (!plan_html_file.empty() && (!graph_file.empty() || !chain_file.empty())) return fail("--html applies to plan MODEL");
    if (graph_file.empty() && (!memory_model.empty() || !formulation.empty()))
      return fail("--memory-model and --formulation apply to plan --graph");
    if (!graph_file.empty()) {
      if (!pla.run.model.empty() || !chain_file.empty()) return fail("give one of MODEL, --chain FILE or --graph FILE");
      if (memory_model == "checkmate") {
        if (!chain_slots.empty()) return fail("--slots does not apply to --memory-model checkmate (sizes are exact bytes)");
        if (graph_persistent) return fail("--persistent does not apply to --memory-model checkmate");
        return run_plan_checkmate(graph_file, chain_budget, graph_time_limit, formulation, pla.json);
      }
      if (!memory_model.empty() && memory_model != "headroom")
        return fail("--memory-model " + memory_model + " is not headroom or checkmate");
      if (!formulation.empty()) return fail("--formulation applies to --memory-model checkmate");
      return run_plan_graph(graph_file, chain_budget, chain_slots, graph_time_limit, graph_persistent, pla.json);
    }
    if (!chain_file.empty() || pla.run.model.empty()) {
      if (!pla.run.model.empty()) return fail("give a MODEL or --chain FILE, not both");
      return run_plan_chain(chain_file, chain_budget, chain_slots, pla.json);
    }
    if (!chain_slots.empty()) return fail("--slots applies to --chain and --graph");
    return run_plan_model(pla, planc, chain_budget, plan_strategy, cost_gpu, activation_budget, export_chain, plan_html_file,
                          layout_args);
  }
  if (*packc) {
    pa.margin_given = packc->count("--margin") > 0;
    return run_pack(pa);
  }
  if (*report) return run_report(ra, report, report_output, report_measured);
  if (*watchc) return run_watch(wa);
  return fail("no command (see headroom --help)");
}

// Output lost to a full disk or a closed pipe is an error: exit 2 with one line, never 0.
int finish_stdout(int code) {
  errno = 0;
  std::cout.flush();
  if (std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout) {
    std::string why = errno != 0 ? std::strerror(errno) : "write error";
    std::cerr << "headroom: cannot write to standard output: " << why << "\n";
    return code == 0 ? kUsageError : code;
  }
  return code;
}

}  // namespace
}  // namespace headroom

int main(int argc, char** argv) {
  try {
    return headroom::finish_stdout(headroom::main_impl(argc, argv));
  } catch (const headroom::InputError& e) {
    return headroom::fail(e.what());
  } catch (const std::exception& e) {
    std::cerr << "headroom: internal error: " << e.what() << "\n";
    return 3;
  }
}
