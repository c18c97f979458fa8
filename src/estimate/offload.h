// Engine offloading options (--offload-optimizer cpu|nvme, --offload-params cpu): validated
// against the layout and written into the Sharding the interpreter applies
// (schedule/interpreter_offload.cc simulates them; docs/distributed.md).
//
// Invariants, each an engine's own rule: --offload-optimizer is DeepSpeed's
// zero_optimization.offload_optimizer, stage 1 or more, run by DeepSpeedCPUAdam (adam, adamw);
// nvme (ZeRO-Infinity) needs stage 3; --offload-params is stage 3's offload_param or FSDP's
// CPUOffload(offload_params=True), whose optimizer then runs on the host (sgd, momentum, adam,
// adamw) and which 1.13 cannot combine with gradient accumulation outside no_sync().
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "estimate/parallel.h"
#include "training/optimizer.h"

namespace headroom {

std::optional<OffloadDevice> parse_offload_device(std::string_view s);  // "cpu", "nvme"

// InputError for an offload that the layout's engine does not have. `micro_batches` is the
// accumulation per optimizer step.
void resolve_offload(const ParallelOptions& p, OptimizerKind optimizer, int64_t micro_batches, Sharding& s);

}  // namespace headroom
