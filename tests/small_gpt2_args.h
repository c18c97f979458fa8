// The small training run several schedule tests build programs of: gpt2 with a few layers, 8
// sequences of 64 per GPU in bf16 on an A100-40GB, over `gpus` GPUs (no layout given yet).
#pragma once

#include <string>

#include "options/run_args.h"

namespace headroom::testing {

inline RunArgs small_gpt2_run(int layers, const std::string& gpus) {
  RunArgs a;
  a.model = "gpt2:layers=" + std::to_string(layers);
  a.batch = "8";
  a.seq = "64";
  a.gpu = "A100-SXM4-40GB";
  a.precision = "bf16";
  a.gpus = gpus;
  return a;
}

}  // namespace headroom::testing
