#include "frontends/zoo/registry.h"

#include <algorithm>

#include "util/error.h"
#include "util/suggest.h"

namespace headroom {

const std::vector<ZooEntry>& zoo() {
  static const std::vector<ZooEntry> entries = [] {
    std::vector<ZooEntry> e;
    register_vgg_alexnet(e);
    register_resnet(e);
    register_inception(e);
    register_mobilenet(e);
    register_densenet(e);
    register_vit(e);
    register_bert(e);
    register_gpt2(e);
    register_llama(e);
    register_mlp(e);
    return e;
  }();
  return entries;
}

const ZooEntry& find_model(const std::string& name) {
  for (const ZooEntry& e : zoo()) {
    if (e.name == name) return e;
  }
  std::vector<std::string> names;
  for (const ZooEntry& e : zoo()) names.push_back(e.name);
  throw InputError("unknown model '" + name + "'" + suggestion_suffix(name, names) +
                   " (`headroom models` lists them)");
}

Graph build_model(const std::string& spec_text, const BuildConfig& config) {
  ModelSpec spec = parse_model_spec(spec_text);
  const ZooEntry& entry = find_model(spec.name);
  if (config.seq && !entry.takes_sequence) {
    throw InputError("--seq applies to sequence models (bert, gpt2, llama...); '" + spec.name +
                     "' has no sequence axis");
  }
  if (config.tensor_parallel > 1 && !entry.tensor_parallel) {
    std::string with;
    for (const ZooEntry& e : zoo()) {
      if (e.tensor_parallel) with += (with.empty() ? "" : ", ") + e.name;
    }
    throw InputError("--tensor-parallel: '" + spec.name + "' has no Megatron split in headroom (models with one: " + with + ")");
  }
  Graph g = entry.build(spec, config);
  g.model = spec_text;
  return g;
}

}  // namespace headroom
