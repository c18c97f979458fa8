// run_args: the options of `estimate`, `fit`, `plan` and `report` as the user writes them (CLI
// flags or Python keyword arguments, as text), validated and turned into EstimateOptions in one
// place, so that the CLI and the Python package accept and reject the same things with the same
// one-line messages.
//
// Invariants: every field is text (or a flag) exactly as given; nothing is interpreted until
// to_estimate_options(), which throws nothing and returns the first problem as an InputError
// message naming the option. The model argument goes through select_frontend
// (frontends/model_source.h), never decided here.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "estimate/estimate.h"
#include "estimate/gpu_ranking.h"
#include "util/error.h"

namespace headroom {

struct RunArgs {
  std::string model;
  std::string batch = "1";
  std::optional<std::string> seq;
  std::string mode = "train";
  std::string optimizer = "adam";
  bool foreach = false;
  bool no_foreach = false;
  std::string precision = "fp32";
  std::optional<std::string> micro_batch;
  std::string device = "cuda";
  std::optional<std::string> threads;  // CPU profile only
  std::string dropout = "on";
  std::string loss = "default";
  // Hugging Face configs: generation, attention kernels, LoRA (docs/llm.md)
  std::optional<std::string> prompt, new_tokens;  // --mode generate
  std::optional<std::string> beams;               // --mode generate: num_beams
  std::optional<std::string> cache;               // --mode generate: dynamic | static
  std::optional<std::string> attention;           // eager | sdpa | flash
  std::optional<std::string> lora;                // r=16,alpha=32,targets=q_proj,v_proj[,dropout=0.05]
  std::optional<std::string> qlora;               // the same spec: --lora on an nf4 base (expand_qlora)
  std::optional<std::string> weights;             // int8 | int4 | nf4
  std::optional<std::string> group_size;          // --weights int4
  // Parallel layout (docs/distributed.md): the estimate becomes one rank's
  std::optional<std::string> gpus, zero, fsdp, fsdp_wrap, reduce_bucket_size, tensor_parallel;
  bool sequence_parallel = false;  // Megatron sequence parallelism, with tensor_parallel
  bool megatron = false;           // --megatron: Megatron-LM's DDP (and distributed optimizer with --zero 1)
  std::optional<std::string> offload_optimizer, offload_params;  // engine offloading (estimate/offload.h)
  std::optional<std::string> pipeline_parallel, pipeline_schedule, virtual_stages;  // a pipeline stage (schedule/pipeline_split.h)
  std::optional<std::string> grad_accum;  // with micro_batch: the batch per GPU is their product
  // Time (estimate with --gpu NAME; docs/performance.md)
  std::optional<std::string> samples, tokens, epochs;  // a whole run to time
  std::optional<std::string> host_memory;              // pageable | pinned
  // fit --objective cost|time|memory ranks the GPUs; --price NAME=USD/h overrides the catalog
  std::optional<std::string> objective;
  std::vector<std::string> prices;
  bool batch_given = false;               // --batch written (it must then equal micro x accum)
  std::string vary = "batch";             // fit: the axis searched (--vary batch or seq)
  std::vector<std::string> freeze;                // regular expressions over parameter names
  bool precision_given = false;  // else a Hugging Face config's torch_dtype is the precision
  std::string zero_grad;   // none | zeros; "" leaves the default (none)
  std::string framework;   // hf-trainer: that loop's defaults, under the options given explicitly
  bool optimizer_given = false;  // --optimizer was written (a framework's default does not override it)
  int top = 10;
  bool keep_program = false;  // --trace and report keep the simulated program
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
  // Kept free with a GPU: 5% for estimate's verdict and fit (fragmentation drift, other processes,
  // library growth); plan's CLI default is 0%. Given without a GPU: an InputError.
  std::string margin = "5%";
  bool margin_given = false;
  // ONNX files
  std::vector<std::string> dims;  // NAME=VALUE
  bool allow_unknown = false;
  // Upper bound on every data-dependent count (NonZero, NonMaxSuppression), as written.
  std::string max_detections;
  std::vector<std::string> checkpoints;
  std::string checkpoint_impl;        // reentrant | non-reentrant; "" leaves reentrant
  std::vector<std::string> offloads;  // op names whose saved activations go to host memory
  // A program captured from PyTorch (the Python package's capture): builds the graph for a run's
  // BuildConfig. Set, it is the model source and `model` is only its display name.
  std::function<Graph(const BuildConfig&)> captured;
};

// A positive integer option, parsed strictly: "abc", "-3", "1e3" and values past 64 bits are
// InputErrors that name the option.
int64_t parse_positive(const std::string& option, const std::string& text);
// "5%" or "0.05" -> 0.05; InputError outside 0-90%.
double parse_margin(const std::string& text);
// "30%" or "0.3": a fraction in (0, 1]; InputError naming `flag` otherwise.
double parse_fraction(const std::string& flag, const std::string& text);

// The GPU options (--gpu, --gpu-memory, allocator and context flags) into o.gpu. `required`: a GPU
// must be given (fit). --gpu all is left for fit to expand.
// `gpu_all`: the command is fit, which expands --gpu all itself; elsewhere --gpu all is an error.
void apply_gpu_args(const RunArgs& a, EstimateOptions& o, bool required, bool gpu_all = false);

// "r=16,alpha=32,targets=q_proj,v_proj,dropout=0.05": targets take every following item
// without '=' (module names contain no '='). InputError naming what is wrong.
LoraConfig parse_lora(const std::string& text);

// --qlora SPEC as the QLoRA recipe (Dettmers et al. 2023, "QLoRA: Efficient Finetuning of
// Quantized LLMs"; peft's prepare_model_for_kbit_training + bitsandbytes): the base in nf4
// (--weights nf4, double quantization), bf16 compute and adapters (--precision bf16), LoRA from
// SPEC (--lora SPEC) and paged 8-bit AdamW (--optimizer paged-adamw8bit), for --mode train. The
// same options given explicitly with the same values are fine; a conflicting one, or --lora beside
// --qlora, is an InputError naming both. Without --qlora, `a` comes back unchanged.
RunArgs expand_qlora(const RunArgs& a);

// The command the options are for: each takes its own options, and one that does not apply is an
// InputError naming it (fit alone takes --gpu all and --mode serve; estimate alone the time of a
// whole run).
enum class RunCommand : uint8_t { Estimate, Fit, Plan, Report };

// Everything, model source included. The first problem comes back as one line.
Result<EstimateOptions> to_estimate_options(const RunArgs& a, RunCommand command = RunCommand::Estimate);

// fit's ranking (--objective, --price), nullopt without --objective. `batch_given`: the batch
// was written (rank at it), else each GPU is ranked at its largest fitting batch. InputError on
// an unknown objective, a bad --price, or --price without --objective cost.
std::optional<RankRequest> to_rank_request(const RunArgs& a);

// Sets one option by its keyword name as the Python package spells it (the CLI flag without the
// dashes, '-' as '_': "micro_batch", "gpu_memory", "eager_module_loading"...). Flags take "true" or
// "false"; foreach "false" means --no-foreach; "dim" and "checkpoint" append. An unknown name or a
// flag value other than true/false is an InputError naming it.
void set_run_arg(RunArgs& a, const std::string& name, const std::string& value);

}  // namespace headroom
