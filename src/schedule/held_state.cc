#include "schedule/held_state.h"

#include <vector>

namespace headroom {

int64_t model_state_at_end(const Program& p) {
  bool training = false;
  for (const Step& s : p.steps) training = training || s.iteration > 0;
  if (!training) return 0;
  std::vector<Category> category(p.buffers.size());
  for (size_t b = 0; b < p.buffers.size(); ++b) category[b] = p.buffers[b].category;
  std::vector<uint8_t> live(p.buffers.size(), 0);
  for (const Event& e : p.events) {
    const auto b = static_cast<size_t>(e.buffer);
    if (e.kind == Event::Kind::Alloc) live[b] = 1;
    if (e.kind == Event::Kind::Free) live[b] = 0;
    if (e.kind == Event::Kind::Retag) category[b] = e.category;
  }
  int64_t held = 0;
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const Category c = category[b];
    if (live[b] && (c == Category::Weights || c == Category::Gradients || c == Category::OptimizerState)) held += p.buffers[b].bytes;
  }
  return held;
}

}  // namespace headroom
