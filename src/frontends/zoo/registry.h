// The built-in model zoo: architectures only (no weights), each matching its reference
// implementation layer for layer (torchvision 0.14, Hugging Face transformers; see
// validation/MODELS.md). A builder turns a spec and a BuildConfig into a Graph with its loss.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "frontends/zoo/model_spec.h"
#include "ir/graph.h"

namespace headroom {

using ModelBuilderFn = std::function<Graph(const ModelSpec&, const BuildConfig&)>;

struct ZooEntry {
  std::string name;
  std::string description;
  std::string family;        // "vision", "transformer", "mlp"
  bool takes_sequence = false;
  ModelBuilderFn build;
  bool tensor_parallel = false;  // the builder knows Megatron's split (BuildConfig::tensor_parallel)
};

const std::vector<ZooEntry>& zoo();
// InputError for an unknown name, suggesting the closest ones.
const ZooEntry& find_model(const std::string& name);
Graph build_model(const std::string& spec_text, const BuildConfig& config);

// Registration lists of each family (one file each).
void register_mlp(std::vector<ZooEntry>& out);
void register_resnet(std::vector<ZooEntry>& out);
void register_vgg_alexnet(std::vector<ZooEntry>& out);
void register_inception(std::vector<ZooEntry>& out);
void register_mobilenet(std::vector<ZooEntry>& out);
void register_densenet(std::vector<ZooEntry>& out);
void register_vit(std::vector<ZooEntry>& out);
void register_bert(std::vector<ZooEntry>& out);
void register_gpt2(std::vector<ZooEntry>& out);
void register_llama(std::vector<ZooEntry>& out);

}  // namespace headroom
