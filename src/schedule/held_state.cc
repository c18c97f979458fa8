#include "schedule/held_state.h"

#include <algorithm>
#include <vector>

namespace headroom {
namespace {

bool is_model_state(Category c) { return c == Category::Weights || c == Category::Gradients || c == Category::OptimizerState; }

}  // namespace

ModelStateBytes model_state(const Program& p) {
  // The last iteration, and where its optimizer phase begins: its first optimizer step (the
  // program's end when it has none: then only the end state counts). One pass over the steps.
  int32_t last = 0;
  const int32_t end = static_cast<int32_t>(p.events.size());
  int32_t begin = end;
  for (const Step& s : p.steps) {
    if (s.iteration > last) {
      last = s.iteration;
      begin = end;
    }
    if (s.iteration == last && s.phase == Phase::Optimizer && begin == end) begin = s.first_event;
  }
  if (last == 0) return {};
  std::vector<Category> category(p.buffers.size(), Category::Activations);  // as last retagged
  std::vector<uint8_t> own(p.buffers.size(), 0);  // allocated by the optimizer phase
  int64_t state = 0;  // live model state
  int64_t other = 0;  // live buffers of the optimizer phase outside the model state
  ModelStateBytes out;
  for (int32_t i = 0; i < static_cast<int32_t>(p.events.size()); ++i) {
    if (i == begin) out.in_optimizer_step = state;
    const Event& e = p.events[static_cast<size_t>(i)];
    const size_t b = static_cast<size_t>(e.buffer);
    const int64_t bytes = p.buffers[b].bytes;
    auto count = [&](int64_t sign) {
      if (is_model_state(category[b])) {
        state += sign * bytes;
      } else if (own[b]) {
        other += sign * bytes;
      }
    };
    switch (e.kind) {
      case Event::Kind::Alloc:
        category[b] = p.buffers[b].category;
        own[b] = i >= begin;
        count(+1);
        break;
      case Event::Kind::Free: count(-1); break;
      case Event::Kind::Retag:
        count(-1);
        category[b] = e.category;
        count(+1);
        break;
    }
    if (i >= begin) out.in_optimizer_step = std::max(out.in_optimizer_step, state + other);
  }
  out.at_end = state;
  out.in_optimizer_step = std::max(out.in_optimizer_step, out.at_end);
  return out;
}

}  // namespace headroom
