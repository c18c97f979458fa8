// estimate/plan --emit megatron FILE: the Megatron-LM arguments of the layout (pretrain_gpt.py;
// megatron/training/arguments.py), one per line for a launch script. Megatron derives the
// data-parallel size as world size / (T x P) and the micro-batches per step as
// global batch / (micro-batch x data-parallel size) (get_num_microbatches), so the global batch
// is written as micro-batch x accumulation x data-parallel size. ZeRO-1 is Megatron's
// distributed optimizer (--use-distributed-optimizer: the optimizer states sharded over the
// data-parallel ranks); ZeRO-2/3 and FSDP are not Megatron's, nor is offloading. Sequence
// parallelism is --sequence-parallel; --checkpoint blocks is --recompute-granularity full
// --recompute-method uniform --recompute-num-layers 1, --checkpoint attention
// --recompute-granularity selective.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "report/engine_config.h"
#include "util/checked.h"

namespace headroom {

Result<std::string> megatron_config(const Estimate& e) {
  return capture_input_errors([&]() -> std::string {
    const EstimateOptions& o = e.options;
    if (!e.per_gpu) throw InputError("--emit megatron needs a layout: --gpus N (with --tensor-parallel, --pipeline-parallel, --zero 0|1)");
    const PerGpu& g = *e.per_gpu;
    if (o.parallel.fsdp) throw InputError("--emit megatron: FSDP is not Megatron's engine (use --zero 0 or 1)");
    if (o.parallel.zero_stage && *o.parallel.zero_stage >= 2) {
      throw InputError("--emit megatron: Megatron has no ZeRO-" + std::to_string(*o.parallel.zero_stage) + " (its distributed optimizer is ZeRO-1)");
    }
    if (o.parallel.offload_optimizer || o.parallel.offload_params) throw InputError("--emit megatron: offloading is not Megatron's");
    // Megatron recomputes whole layers or their core attention (megatron/training/arguments.py
    // --recompute-granularity full|selective): --checkpoint blocks and attention, nothing else.
    const bool full = o.checkpoint_ranges == std::vector<std::string>{"blocks"};
    const bool selective = o.checkpoint_ranges == std::vector<std::string>{"attention"};
    if (!o.plan.checkpoints.empty() || (!o.checkpoint_ranges.empty() && !full && !selective)) {
      throw InputError("--emit megatron: Megatron recomputes whole layers (--checkpoint blocks) or their core attention (--checkpoint attention), not other regions");
    }
    const int64_t global = checked_mul(checked_mul(e.micro_batch, e.micro_batches, "global batch"), g.data_parallel, "global batch");
    std::string s = fmt::format("# Megatron-LM arguments of the layout headroom simulated ({}); launch on {} GPUs.\n", g.layout, g.gpus);
    s += fmt::format("# data-parallel size = {} GPUs / (tensor {} x pipeline {}) = {}; global batch = micro-batch {} x {} micro-batches x {} = {}\n",
                     g.gpus, g.tensor_parallel, g.pipeline_parallel, g.data_parallel, e.micro_batch, e.micro_batches, g.data_parallel, global);
    s += fmt::format("--tensor-model-parallel-size {}\n", g.tensor_parallel);
    s += fmt::format("--pipeline-model-parallel-size {}\n", g.pipeline_parallel);
    if (o.parallel.schedule() == PipelineScheduleKind::Interleaved && g.pipeline_parallel > 1) {
      // Layers per model chunk: L / (P v).
      s += fmt::format("--num-layers-per-virtual-pipeline-stage {}\n", g.layers_per_stage / *o.parallel.virtual_stages);
    }
    if (o.parallel.sequence_parallel) s += "--sequence-parallel\n";
    // Every layer of the stage in its own checkpoint (transformer_block.py _checkpointed_forward,
    // method uniform with one layer per chunk), or each layer's core attention.
    if (full) s += "--recompute-granularity full\n--recompute-method uniform\n--recompute-num-layers 1\n";
    if (selective) s += "--recompute-granularity selective\n";
    s += fmt::format("--micro-batch-size {}\n", e.micro_batch);
    s += fmt::format("--global-batch-size {}\n", global);
    if (o.parallel.zero_stage == 1) s += "--use-distributed-optimizer\n";
    if (o.precision == Precision::Bf16) s += "--bf16\n";
    if (o.precision == Precision::Fp16) s += "--fp16\n";
    return s;
  });
}

}  // namespace headroom
