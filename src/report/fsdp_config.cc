// estimate/plan --emit fsdp FILE: the FullyShardedDataParallel constructor of a layout, as a
// Python snippet for torch 1.13 (torch/distributed/fsdp/fully_sharded_data_parallel.py): the
// arguments that decide memory, and the batch arithmetic as constants.
#include "report/engine_config.h"

#include <fmt/format.h>

namespace headroom {

Result<std::string> fsdp_config(const Estimate& e) {
  return capture_input_errors([&]() -> std::string {
    const EstimateOptions& o = e.options;
    if (!e.per_gpu || !o.parallel.fsdp) throw InputError("--emit fsdp needs an FSDP layout: --gpus N --fsdp full|grad-op|no-shard");
    const bool per_block = e.per_gpu->fsdp_wrap == "block";
    const bool checkpointed = !o.plan.checkpoints.empty() || !o.checkpoint_ranges.empty();
    const bool needs_class = per_block || checkpointed;  // the wrap policy, the checkpoint check_fn
    if (needs_class && e.block_class.empty()) {
      throw InputError("--emit fsdp: the model's block class is not known (the GPT-2, Llama and Hugging Face decoder models have one) for the auto-wrap policy; --fsdp-wrap param emits a size-based one");
    }
    const FsdpStrategy f = *o.parallel.fsdp;
    const char* strategy = f == FsdpStrategy::Full ? "FULL_SHARD" : f == FsdpStrategy::GradOp ? "SHARD_GRAD_OP" : "NO_SHARD";
    const int64_t dp = e.per_gpu->data_parallel;
    std::string s;
    s += fmt::format("# FullyShardedDataParallel for {}, written by headroom: {}.\n", o.model, e.per_gpu->layout);
    s += "# PyTorch 1.13 API. The batch: each rank runs MICRO_BATCH_SIZE samples per forward/backward,\n";
    s += "# GRADIENT_ACCUMULATION_STEPS of them per optimizer step, on WORLD_SIZE data-parallel ranks:\n";
    s += fmt::format("# {} x {} x {} = {} samples per optimizer step.\n", e.micro_batch, e.micro_batches, dp,
                     e.micro_batch * e.micro_batches * dp);
    s += per_block ? "# One FSDP unit per block (transformer_auto_wrap_policy) plus the root unit, as simulated.\n"
                   : "# One FSDP unit per module holding parameters (size_based_auto_wrap_policy, min_num_params=1), as\n"
                     "# simulated with --fsdp-wrap param (one unit per op's parameters).\n";
    s += "import functools\n\nimport torch\n";
    s += "from torch.distributed.fsdp import (\n    BackwardPrefetch,\n    CPUOffload,\n    FullyShardedDataParallel,\n"
         "    MixedPrecision,\n    ShardingStrategy,\n)\n";
    s += per_block ? "from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy\n"
                   : "from torch.distributed.fsdp.wrap import size_based_auto_wrap_policy\n";
    if (checkpointed) {
      s += "from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (\n    CheckpointImpl,\n"
           "    apply_activation_checkpointing,\n    checkpoint_wrapper,\n)\n";
    }
    s += "\n";
    s += fmt::format("MICRO_BATCH_SIZE = {}\n", e.micro_batch);
    s += fmt::format("GRADIENT_ACCUMULATION_STEPS = {}\n", e.micro_batches);
    s += fmt::format("WORLD_SIZE = {}\n", dp);
    s += "GLOBAL_BATCH_SIZE = MICRO_BATCH_SIZE * GRADIENT_ACCUMULATION_STEPS * WORLD_SIZE\n";
    s += needs_class ? fmt::format("BLOCK_CLASS_NAME = \"{}\"\n\n\n", e.block_class) : std::string("\n\n");
    s += "def wrap(model):\n";
    s += "    \"\"\"Returns the model wrapped as headroom simulated it (call after init_process_group).\"\"\"\n";
    if (needs_class) s += "    block_classes = {type(m) for m in model.modules() if type(m).__name__ == BLOCK_CLASS_NAME}\n";
    s += "    fsdp_model = FullyShardedDataParallel(\n";
    s += "        model,\n";
    s += fmt::format("        sharding_strategy=ShardingStrategy.{},\n", strategy);
    s += fmt::format("        cpu_offload=CPUOffload(offload_params={}),\n", o.parallel.offload_params ? "True" : "False");
    // bf16/fp16 under an engine: 16-bit compute over fp32 flat parameters (estimate/parallel.h).
    if (o.precision == Precision::Bf16) s += "        mixed_precision=MixedPrecision(param_dtype=torch.bfloat16),\n";
    else if (o.precision == Precision::Fp16) s += "        mixed_precision=MixedPrecision(param_dtype=torch.float16),\n";
    else s += "        mixed_precision=None,\n";
    s += per_block ? "        auto_wrap_policy=functools.partial(transformer_auto_wrap_policy, transformer_layer_cls=block_classes),\n"
                   : "        auto_wrap_policy=functools.partial(size_based_auto_wrap_policy, min_num_params=1),\n";
    s += "        backward_prefetch=BackwardPrefetch.BACKWARD_PRE,\n";
    s += "        forward_prefetch=False,\n";
    s += "        device_id=torch.cuda.current_device(),\n";
    s += "    )\n";
    if (checkpointed) {
      s += "    # Every block checkpointed (reentrant torch.utils.checkpoint), as simulated.\n";
      s += "    apply_activation_checkpointing(\n";
      s += "        fsdp_model,\n";
      s += "        checkpoint_wrapper_fn=functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.REENTRANT),\n";
      s += "        check_fn=lambda m: type(m) in block_classes,\n";
      s += "    )\n";
    }
    s += "    return fsdp_model\n";
    if (o.parallel.offload_params) {
      s += "\n# With CPU offload, 1.13 does not accumulate gradients outside no_sync(): one micro-batch per step.\n";
    }
    return s;
  });
}

}  // namespace headroom
