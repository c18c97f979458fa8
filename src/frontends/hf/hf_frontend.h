// hf_frontend: a Hugging Face config.json (or a checkpoint folder holding one) as a graph
// loader for estimate(): decoder families through hf_decoder, gpt2 and bert through the zoo.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "frontends/hf/hf_config.h"
#include "frontends/zoo/model_spec.h"
#include "ir/graph.h"

namespace headroom {

struct HfLoader {
  std::function<Graph(const BuildConfig&)> load;
  std::optional<DType> torch_dtype;  // the config's default precision
  // KV cache bytes per token at one byte per value: 2 (k, v) x layers x kv_heads x head_dim;
  // 0 for models without one (t5, gpt2 and bert through the zoo).
  int64_t kv_values_per_token = 0;
};

// Reads the config now (InputError on a bad one); the loader builds a graph per BuildConfig.
HfLoader hf_graph_loader(const std::string& path);
// The loader of a config already read (parse_hf_config).
HfLoader hf_graph_loader(HfModel model);

}  // namespace headroom
