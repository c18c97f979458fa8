#include "schedule/held_state.h"

namespace headroom {

int64_t model_state_at_end(const Program& p) {
  bool training = false;
  for (const Step& s : p.steps) training = training || s.iteration > 0;
  if (!training) return 0;
  const CategoryBytes end = category_bytes_before(p, static_cast<int32_t>(p.events.size()));
  return end[static_cast<size_t>(Category::Weights)] + end[static_cast<size_t>(Category::Gradients)] +
         end[static_cast<size_t>(Category::OptimizerState)];
}

}  // namespace headroom
