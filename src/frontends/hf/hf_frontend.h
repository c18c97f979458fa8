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
};

// Reads the config now (InputError on a bad one); the loader builds a graph per BuildConfig.
HfLoader hf_graph_loader(const std::string& path);

}  // namespace headroom
