#include "report/deepspeed_config.h"

#include <nlohmann/json.hpp>

namespace headroom {

Result<std::string> deepspeed_config(const Estimate& e) {
  return capture_input_errors([&]() -> std::string {
    const EstimateOptions& o = e.options;
    if (!e.per_gpu || !o.parallel.zero_stage) throw InputError("--emit deepspeed needs a DeepSpeed layout: --gpus N --zero STAGE");
    if (o.parallel.megatron) throw InputError("--emit deepspeed: the layout is Megatron-LM's own (--megatron); use --emit megatron");
    nlohmann::ordered_json j;
    j["train_batch_size"] = e.micro_batch * e.micro_batches * e.per_gpu->data_parallel;
    j["train_micro_batch_size_per_gpu"] = e.micro_batch;
    j["gradient_accumulation_steps"] = e.micro_batches;
    if (o.optimizer == OptimizerKind::Adam || o.optimizer == OptimizerKind::AdamW) {
      // The type only: hyper-parameters do not change memory.
      j["optimizer"] = {{"type", o.optimizer == OptimizerKind::Adam ? "Adam" : "AdamW"}};
    }
    if (o.precision == Precision::Bf16) j["bf16"] = {{"enabled", true}};
    nlohmann::ordered_json zero = {{"stage", *o.parallel.zero_stage}};
    if (*o.parallel.zero_stage >= 2 || o.parallel.offload_optimizer) {
      // What was simulated: one ipg bucket (overlap_comm off), contiguous gradients.
      zero["contiguous_gradients"] = true;
      zero["overlap_comm"] = false;
      zero["reduce_bucket_size"] = o.parallel.reduce_bucket_elements.value_or(Sharding{}.reduce_bucket_elements);
    }
    // offload_optimizer / offload_param (runtime/zero/offload_config.py); pin_memory as the
    // simulated host states are pinned. NVMe needs the drive's mount point: nvme_path is
    // DeepSpeed's documented example, to be replaced by the cluster's.
    if (o.parallel.offload_optimizer) {
      const bool nvme = *o.parallel.offload_optimizer == OffloadDevice::Nvme;
      nlohmann::ordered_json off = {{"device", nvme ? "nvme" : "cpu"}, {"pin_memory", true}};
      if (nvme) {
        off["nvme_path"] = "/local_nvme";
        off["buffer_count"] = Sharding{}.swap_buffer_count;
      }
      zero["offload_optimizer"] = off;
    }
    if (o.parallel.offload_params) zero["offload_param"] = {{"device", "cpu"}, {"pin_memory", true}};
    j["zero_optimization"] = zero;
    return j.dump(2) + "\n";
  });
}

}  // namespace headroom
