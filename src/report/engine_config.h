// The configuration files of the engine a layout runs on (estimate --emit KIND FILE, plan --gpus
// --emit KIND FILE): what to hand DeepSpeed, FSDP or Hugging Face Accelerate so they run what
// headroom simulated, with the batch arithmetic set (global batch = micro-batch x accumulation x
// data-parallel size).
//
//   deepspeed   DeepSpeed's JSON config (report/deepspeed_config.h)
//   fsdp        a Python snippet constructing FullyShardedDataParallel (torch 1.13 API): sharding
//               strategy, CPU offload, mixed precision, the auto-wrap policy of the model's block
//               class, activation checkpointing when the layout checkpoints blocks
//   accelerate  an `accelerate launch --config_file` YAML: distributed_type (DEEPSPEED, FSDP or
//               MULTI_GPU for DDP), num_processes, mixed_precision, the engine's section
//   megatron    Megatron-LM's parallel and batch arguments (report/megatron_config.cc):
//               --tensor-model-parallel-size, --pipeline-model-parallel-size,
//               --num-layers-per-virtual-pipeline-stage, --micro-batch-size, --global-batch-size
//
// Invariants: the output is deterministic; a layout the kind cannot express is an InputError
// naming what is missing (no file is written then).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "estimate/estimate.h"
#include "util/error.h"

namespace headroom {

enum class EmitKind : uint8_t { DeepSpeed, Fsdp, Accelerate, Megatron };

std::optional<EmitKind> parse_emit_kind(std::string_view s);
std::string_view emit_kind_name(EmitKind k);

Result<std::string> engine_config(EmitKind kind, const Estimate& e);

// Each kind (report/fsdp_config.cc, report/accelerate_config.cc).
Result<std::string> fsdp_config(const Estimate& e);
Result<std::string> accelerate_config(const Estimate& e);
Result<std::string> megatron_config(const Estimate& e);

}  // namespace headroom
