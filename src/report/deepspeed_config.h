// The DeepSpeed JSON config of an estimate's layout (estimate --emit-deepspeed FILE): the batch
// arithmetic DeepSpeed checks at start-up (train_batch_size = train_micro_batch_size_per_gpu *
// gradient_accumulation_steps * data-parallel size, deepspeed/runtime/config.py
// _batch_assertion), the ZeRO stage and bucket, bf16 and the optimizer the estimate simulated.
#pragma once

#include <string>

#include "estimate/estimate.h"
#include "util/error.h"

namespace headroom {

// InputError unless the estimate has a DeepSpeed layout (--gpus with --zero).
Result<std::string> deepspeed_config(const Estimate& e);

}  // namespace headroom
