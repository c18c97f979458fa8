// Families whose builders are being written; registered empty until they land.
#include "frontends/zoo/registry.h"

namespace headroom {

void register_vgg_alexnet(std::vector<ZooEntry>&) {}
void register_inception(std::vector<ZooEntry>&) {}
void register_mobilenet(std::vector<ZooEntry>&) {}
void register_densenet(std::vector<ZooEntry>&) {}
void register_vit(std::vector<ZooEntry>&) {}
void register_bert(std::vector<ZooEntry>&) {}
void register_gpt2(std::vector<ZooEntry>&) {}
void register_llama(std::vector<ZooEntry>&) {}

}  // namespace headroom
