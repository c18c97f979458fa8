// Test helper shared by the Llama-2-7B pipeline pins (DeepSpeed's pipeline engine in
// pipeline_llama_pin_test.cc, Megatron's DDP in megatron_ddp_test.cc): the same run, so that
// the two engines' stage peaks differ only by what the engines hold. Llama-2-7B from its
// Hugging Face config, bf16, sequence 2048, global batch 8 in micro-batches of 1, 8 GPUs in 4
// pipeline stages (data-parallel 2); each test adds the engine and the schedule.
#pragma once

#include <string>

#include "estimate/estimate.h"
#include "frontends/hf/hf_frontend.h"

namespace headroom::testing {

inline EstimateOptions llama2_7b_four_stages() {
  EstimateOptions o;
  o.model = std::string(HEADROOM_SOURCE_DIR) + "/data/hf-configs/llama-2-7b.json";
  o.graph_loader = hf_graph_loader(o.model).load;
  o.seq = 2048;
  o.precision = Precision::Bf16;
  o.batch = 8;
  o.micro_batch = 1;
  o.parallel.gpus = 8;
  o.parallel.pipeline_parallel = 4;
  return o;
}

}  // namespace headroom::testing
