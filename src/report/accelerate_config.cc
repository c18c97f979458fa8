// estimate/plan --emit accelerate FILE: an `accelerate launch --config_file` YAML for the
// layout's engine (accelerate's ClusterConfig keys, commands/config/config_args.py):
// DEEPSPEED with its deepspeed_config section (zero_stage, offload devices,
// gradient_accumulation_steps), FSDP with fsdp_config (sharding strategy 1/2/3 = FULL_SHARD /
// SHARD_GRAD_OP / NO_SHARD, offload, the block class to wrap), MULTI_GPU for DDP. Machines of
// 8 GPUs, as the layout search assumes.
#include "report/engine_config.h"

#include <fmt/format.h>

namespace headroom {

Result<std::string> accelerate_config(const Estimate& e) {
  return capture_input_errors([&]() -> std::string {
    const EstimateOptions& o = e.options;
    if (!e.per_gpu) throw InputError("--emit accelerate needs a layout: --gpus N (with --zero or --fsdp, or plain DDP)");
    if (e.per_gpu->tensor_parallel > 1) {
      throw InputError("--emit accelerate: tensor parallelism is Megatron's setting, which an accelerate config does not carry");
    }
    if (e.per_gpu->pipeline_parallel > 1) {
      throw InputError("--emit accelerate: pipeline parallelism is Megatron's or DeepSpeed's PipelineModule setting, which an accelerate config does not carry");
    }
    const int64_t gpus = e.per_gpu->gpus;
    if (gpus > 8 && gpus % 8 != 0) {
      throw InputError(fmt::format("--emit accelerate: {} GPUs do not fill machines of 8 (num_processes must divide over num_machines)", gpus));
    }
    if (o.parallel.megatron) throw InputError("--emit accelerate: the layout is Megatron-LM's own (--megatron); use --emit megatron");
    const int64_t machines = gpus > 8 ? gpus / 8 : 1;
    const bool checkpointed = !o.plan.checkpoints.empty() || !o.checkpoint_ranges.empty();
    const std::string precision = o.precision == Precision::Bf16 ? "bf16" : o.precision == Precision::Fp16 ? "fp16" : "'no'";
    std::string s;
    s += fmt::format("# accelerate config for {}, written by headroom: {}.\n", o.model, e.per_gpu->layout);
    s += fmt::format("# Batch: micro-batch {} per GPU x {} accumulation steps x {} data-parallel ranks = {} samples per step.\n",
                     e.micro_batch, e.micro_batches, e.per_gpu->data_parallel, e.micro_batch * e.micro_batches * e.per_gpu->data_parallel);
    if (checkpointed) s += "# Every block checkpointed: call model.gradient_checkpointing_enable() before accelerator.prepare().\n";
    s += "compute_environment: LOCAL_MACHINE\n";
    if (o.parallel.zero_stage) {
      s += "distributed_type: DEEPSPEED\n";
      s += "deepspeed_config:\n";
      s += fmt::format("  gradient_accumulation_steps: {}\n", e.micro_batches);
      s += fmt::format("  offload_optimizer_device: {}\n",
                       !o.parallel.offload_optimizer ? "none" : *o.parallel.offload_optimizer == OffloadDevice::Nvme ? "nvme" : "cpu");
      s += fmt::format("  offload_param_device: {}\n", o.parallel.offload_params ? "cpu" : "none");
      s += "  zero3_init_flag: false\n";
      s += fmt::format("  zero_stage: {}\n", *o.parallel.zero_stage);
    } else if (o.parallel.fsdp) {
      const bool per_block = e.per_gpu && e.per_gpu->fsdp_wrap == "block";
      if (per_block && e.block_class.empty()) {
        throw InputError("--emit accelerate: the model's block class is not known (the GPT-2, Llama and Hugging Face decoder models have one) for fsdp_transformer_layer_cls_to_wrap");
      }
      const FsdpStrategy f = *o.parallel.fsdp;
      s += fmt::format("# Accumulation: Accelerator(gradient_accumulation_steps={}) in the training script.\n", e.micro_batches);
      s += "distributed_type: FSDP\n";
      s += "fsdp_config:\n";
      s += per_block ? "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n" : "  fsdp_auto_wrap_policy: SIZE_BASED_WRAP\n";
      s += "  fsdp_backward_prefetch_policy: BACKWARD_PRE\n";
      s += "  fsdp_forward_prefetch: false\n";
      s += fmt::format("  fsdp_offload_params: {}\n", o.parallel.offload_params ? "true" : "false");
      s += fmt::format("  fsdp_sharding_strategy: {}\n", f == FsdpStrategy::Full ? 1 : f == FsdpStrategy::GradOp ? 2 : 3);
      s += "  fsdp_state_dict_type: FULL_STATE_DICT\n";
      if (per_block) s += fmt::format("  fsdp_transformer_layer_cls_to_wrap: {}\n", e.block_class);
      else s += "  fsdp_min_num_params: 1\n";
    } else {
      s += fmt::format("# Accumulation: Accelerator(gradient_accumulation_steps={}) in the training script.\n", e.micro_batches);
      s += "distributed_type: MULTI_GPU\n";
    }
    s += "machine_rank: 0\n";
    s += "main_training_function: main\n";
    s += fmt::format("mixed_precision: {}\n", precision);
    s += fmt::format("num_machines: {}\n", machines);
    s += fmt::format("num_processes: {}\n", gpus);
    s += "rdzv_backend: static\n";
    s += "same_network: true\n";
    s += "use_cpu: false\n";
    return s;
  });
}

}  // namespace headroom
