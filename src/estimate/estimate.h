// estimate: the peak memory of inference or of training iterations of a model, with where it
// goes. It builds the graph, the program (schedule), replays it on the exact heap, and
// summarizes: peak, when it happens (phase and op), the breakdown by category at the peak and the
// largest buffers alive then. All sizes are exact bytes without allocator rounding (what
// torch.cuda.max_memory_allocated reports).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cost/run_time.h"
#include "estimate/device_memory.h"
#include "estimate/parallel.h"
#include "frontends/zoo/model_spec.h"
#include "ir/graph.h"
#include "schedule/build_program.h"
#include "schedule/program.h"
#include "sim/simulate.h"
#include "training/optimizer.h"
#include "util/error.h"

namespace headroom {

// fp16 / bf16: the model's weights and activations in that dtype (model.to(dtype), or
// from_pretrained(torch_dtype=...)); amp-*: fp32 weights under torch.autocast.
enum class Precision : uint8_t { Fp32, AmpFp16, AmpBf16, Bf16, Fp16 };
std::string_view precision_name(Precision p);
std::optional<Precision> parse_precision(std::string_view s);

// --mode generate: transformers' generate() with a DynamicCache: a prefill of `prompt` tokens,
// then new_tokens - 1 decode forwards of one token each; greedy with one beam, beam search
// (num_beams) with more. `static_cache`: cache_implementation="static" (a StaticCache of
// prompt + new_tokens positions per sequence, preallocated and updated in place).
struct GenerationOptions {
  int64_t prompt = 0;
  int64_t new_tokens = 0;
  int64_t beams = 1;
  bool static_cache = false;
};

struct EstimateOptions {
  std::string model;                  // built-in spec ("resnet50", "mlp:layers=4,dim=256") or a name
  // Where the graph comes from when it is not a built-in model (an ONNX file): called with the
  // batch, sequence, loss and precision of each run; throws InputError. Unset: the zoo.
  std::function<Graph(const BuildConfig&)> graph_loader;
  int64_t batch = 1;
  std::optional<int64_t> seq;
  RunMode mode = RunMode::Training;
  OptimizerKind optimizer = OptimizerKind::Adam;
  std::optional<bool> foreach;        // unset: the device's default implementation
  ZeroGrad zero_grad = ZeroGrad::SetToNone;  // training: what zero_grad() after each step does
  Precision precision = Precision::Fp32;
  std::string device = "cuda";        // "cuda" or "cpu"
  // CPU profile: intra-op threads (torch.set_num_threads). More than one sends 1x1 stride-1
  // convolutions at small batches to oneDNN and widens layer norm's backward temporary
  // (training/device_profile.h). Unset: 1, as validation measures.
  std::optional<int> threads;
  std::optional<int64_t> micro_batch; // gradient accumulation: forward/backward at this size
  bool dropout = true;
  LossKind loss = LossKind::Default;
  int iterations = 2;
  int top_tensors = 10;
  bool keep_program = false;  // keep the simulated Program in the Estimate (for --trace)
  // CUDA library workspaces (device cuda only). Unset: the device's defaults (cuBLAS 8,519,680
  // bytes per handle, 32 MiB on Hopper GPUs; cuDNN by the Activation policy).
  // CUBLAS_WORKSPACE_CONFIG=:0:0 corresponds to cublas_workspace_bytes = 0.
  std::optional<int64_t> cublas_workspace_bytes;
  // The SM counts CUDA reductions split over (training/cuda_reduce.h). Unset: the named GPU's
  // (`gpu`), else the measured H100's. Set by callers that build a GPU's program without naming
  // the GPU (fit --gpu all, estimate/fit_all.cc).
  std::optional<ReduceDevice> reduce_device;
  std::optional<ConvWorkspace> conv_workspace;
  int64_t conv_workspace_bytes = 0;  // with ConvWorkspace::Fixed
  // A GPU to check against (device cuda only): adds the CUDA context and the caching allocator.
  std::optional<GpuOptions> gpu;
  // Checkpointing, offloading and workspace choices (training only; op ids of this model's graph,
  // which do not depend on the batch size). Empty: PyTorch as is.
  MemoryPlan plan;
  // Checkpoint segments by op name, "first..last" (inclusive), resolved against the graph and
  // added to `plan` (the CLI's --checkpoint); an unknown name is an InputError.
  std::vector<std::string> checkpoint_ranges;
  // Ops (by name) whose saved activations are offloaded to host memory after their forward and
  // brought back for their backward (the CLI's --offload; what plan.apply applied with
  // save_on_cpu). Training on CUDA only; an unknown name is an InputError.
  std::vector<std::string> offload_ops;
  // Generation (mode Inference; Hugging Face decoders only).
  std::optional<GenerationOptions> generation;
  AttentionKind attention = AttentionKind::Default;  // Hugging Face decoders only
  std::optional<LoraConfig> lora;                     // Hugging Face decoders only
  WeightFormat weights = WeightFormat::Default;        // Hugging Face decoders only
  std::optional<int64_t> group_size;                  // --weights int4 only (default 128)
  int64_t logits_to_keep = 0;                         // BuildConfig::logits_to_keep (serve's profile)
  // --freeze: parameters whose name matches one of these regular expressions (searched, not
  // anchored) get requires_grad=False. Each must match at least one parameter.
  std::vector<std::string> freeze;
  // Data parallelism (--gpus, --zero, --fsdp): the estimate becomes one rank's (docs/distributed.md).
  ParallelOptions parallel;
  // Time (docs/performance.md): with a catalog GPU (gpu->gpu named), one GPU and device cuda, the
  // estimate adds RunTime on that GPU's roofline. Where the weights wait before loading, and a
  // whole run to time (--samples / --tokens, --epochs); either given without such a GPU, or with
  // --gpus, is an InputError.
  std::optional<HostMemory> host_memory;  // unset: pageable (what model.to("cuda") copies from)
  std::optional<RunLength> run_length;
  // --price NAME=USD/h: the run's cost at this price instead of the catalog's cheapest listing.
  std::map<std::string, double> price_overrides;
};

struct BufferAtPeak {
  std::string name;
  Category category;
  int64_t bytes = 0;
  std::string op;  // the op that made it ("" for weights, inputs, optimizer state)
};

struct PhasePeak {
  Phase phase;
  int64_t bytes = 0;
  std::string op;
};

struct IterationSummary {
  int iteration = 0;
  int64_t peak_bytes = 0;
  Phase peak_phase = Phase::Forward;
  std::string peak_op;
  std::vector<PhasePeak> phases;
};

struct Estimate {
  EstimateOptions options;
  bool foreach = false;           // resolved
  int64_t micro_batch = 0;        // resolved (== batch without accumulation)
  int micro_batches = 1;
  int64_t parameter_count = 0;
  int64_t trainable_parameter_count = 0;  // without frozen parameters (--freeze, --lora)
  int64_t weights_bytes = 0;
  int64_t input_bytes = 0;
  int64_t peak_bytes = 0;
  Phase peak_phase = Phase::Inference;
  std::string peak_op;            // label of the step holding the peak
  int peak_iteration = 0;
  CategoryBytes breakdown_at_peak{};
  std::vector<BufferAtPeak> largest_at_peak;
  std::vector<IterationSummary> iterations;
  int64_t op_count = 0;
  std::vector<std::string> notes;
  std::string block_class;  // Graph::block_class (the engine configs' wrap policy)
  Program program;  // only with EstimateOptions::keep_program
  std::optional<DeviceMemory> device;  // with EstimateOptions::gpu
  // Generation: the KV cache live at the peak, and the forward holding the peak (0 = the
  // prefill, i = the decode of token i + 1).
  int64_t kv_cache_bytes = 0;
  int64_t peak_forward = 0;
  std::optional<PerGpu> per_gpu;       // with a parallel layout (--gpus)
  std::optional<RunTime> time;         // with a catalog GPU (EstimateOptions: time)
};

// "prefill" or "decode i".
std::string forward_name(int64_t forward);

// The whole pipeline. Bad input comes back as a failed Result with one line.
Result<Estimate> estimate(const EstimateOptions& options);

// The pieces, for tools that reuse them (fit, plan, tests).
Graph build_graph(const EstimateOptions& options, int64_t batch);
// --freeze: marks matching parameters frozen; InputError on a bad pattern or one matching nothing.
void apply_freeze(Graph& g, const std::vector<std::string>& patterns);
ScheduleOptions schedule_options(const EstimateOptions& options);
Estimate summarize(const EstimateOptions& options, const Graph& g, const Program& p, const SimResult& sim);
// Resolves "first..last" op-name ranges into plan.checkpoints (sorted, outer before inner);
// ranges may nest. InputError on unknown names, reversed ranges, ranges overlapping without one
// containing the other, or loss ops.
void add_checkpoint_ranges(const Graph& g, const std::vector<std::string>& ranges, MemoryPlan& plan);
void add_offload_ops(const Graph& g, const std::vector<std::string>& names, MemoryPlan& plan);

}  // namespace headroom
