#include "estimate/offload.h"

#include <string>

#include "util/error.h"

namespace headroom {

std::optional<OffloadDevice> parse_offload_device(std::string_view s) {
  if (s == "cpu") return OffloadDevice::Cpu;
  if (s == "nvme") return OffloadDevice::Nvme;
  return std::nullopt;
}

void resolve_offload(const ParallelOptions& p, OptimizerKind optimizer, int64_t micro_batches, Sharding& s) {
  if (!p.offload_optimizer && !p.offload_params) return;
  const bool adam = optimizer == OptimizerKind::Adam || optimizer == OptimizerKind::AdamW;
  if (p.offload_optimizer) {
    if (p.fsdp) {
      throw InputError("--offload-optimizer is DeepSpeed's; FSDP offloads with --offload-params cpu (CPUOffload), which moves the optimizer step to the host with the parameters");
    }
    if (!p.zero_stage || *p.zero_stage == 0) throw InputError("--offload-optimizer needs --zero 1, 2 or 3 (DeepSpeed's offload_optimizer)");
    if (*p.offload_optimizer == OffloadDevice::Nvme && *p.zero_stage != 3) {
      throw InputError("--offload-optimizer nvme (ZeRO-Infinity) needs --zero 3");
    }
    // stage_1_and_2.py asserts ZeRO-Offload runs DeepSpeedCPUAdam; stage 3 builds the same.
    if (!adam) throw InputError("--offload-optimizer runs DeepSpeedCPUAdam: use --optimizer adam or adamw");
    s.offload_optimizer = *p.offload_optimizer;
  }
  if (p.offload_params) {
    if (p.zero_stage && *p.zero_stage != 3) {
      throw InputError("--offload-params needs --zero 3 (DeepSpeed's offload_param partitions parameters) or --fsdp");
    }
    if (!p.zero_stage && !p.fsdp) throw InputError("--offload-params needs --zero 3 or --fsdp");
    if (p.fsdp) {
      if (micro_batches > 1) {
        throw InputError("--fsdp with --offload-params and --grad-accum: 1.13's FSDP does not accumulate gradients outside no_sync() with CPU offload");
      }
      if (!adam && optimizer != OptimizerKind::Sgd && optimizer != OptimizerKind::Momentum) {
        throw InputError("--fsdp --offload-params runs the optimizer on the host: use --optimizer sgd, momentum, adam or adamw");
      }
    }
    s.offload_params = true;
  }
}

}  // namespace headroom
