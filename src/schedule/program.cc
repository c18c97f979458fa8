#include "schedule/program.h"

#include <string>
#include <vector>

#include "util/error.h"

namespace headroom {

std::string_view category_name(Category c) {
  switch (c) {
    case Category::Weights: return "weights";
    case Category::Inputs: return "inputs";
    case Category::Gradients: return "gradients";
    case Category::OptimizerState: return "optimizer_state";
    case Category::SavedActivations: return "saved_activations";
    case Category::Activations: return "activations";
    case Category::ActivationGradients: return "activation_gradients";
    case Category::Temporaries: return "temporaries";
    case Category::Workspaces: return "workspaces";
    case Category::KvCache: return "kv_cache";
  }
  return "?";
}

std::string_view phase_name(Phase p) {
  switch (p) {
    case Phase::Setup: return "setup";
    case Phase::Inference: return "inference";
    case Phase::Forward: return "forward";
    case Phase::Backward: return "backward";
    case Phase::Optimizer: return "optimizer";
  }
  return "?";
}

void validate_program(const Program& p) {
  for (const Buffer& b : p.buffers) {
    HEADROOM_CHECK(b.reduction < static_cast<int64_t>(p.cuda_reductions.size()), "a staging buffer of an unlisted reduction: " + b.name);
  }
  enum class State : uint8_t { Unborn, Live, Dead };
  std::vector<State> state(p.buffers.size(), State::Unborn);
  for (const Event& e : p.events) {
    HEADROOM_CHECK(e.buffer >= 0 && static_cast<size_t>(e.buffer) < p.buffers.size(), "event on unknown buffer");
    State& s = state[static_cast<size_t>(e.buffer)];
    const std::string& name = p.buffers[static_cast<size_t>(e.buffer)].name;
    switch (e.kind) {
      case Event::Kind::Alloc:
        HEADROOM_CHECK(s == State::Unborn, "buffer allocated twice: " + name);
        s = State::Live;
        break;
      case Event::Kind::Free:
        HEADROOM_CHECK(s == State::Live, "free of a buffer that is not live: " + name);
        s = State::Dead;
        break;
      case Event::Kind::Retag:
        HEADROOM_CHECK(s == State::Live, "retag of a buffer that is not live: " + name);
        break;
    }
  }
  int32_t next = 0;
  for (const Step& st : p.steps) {
    HEADROOM_CHECK(st.first_event == next && st.end_event >= st.first_event, "steps must tile the events: " + st.label);
    next = st.end_event;
    const ParamUpdate& u = st.update;
    HEADROOM_CHECK(u.empty() ? u.bytes == 0 && u.tensors == 0 : u.elements > 0 && u.bytes > 0 && u.tensors > 0 && st.phase == Phase::Optimizer,
                   "a parameter update is all zero or all positive, on an optimizer step: " + st.label);
  }
  HEADROOM_CHECK(next == static_cast<int32_t>(p.events.size()), "steps must cover every event");
}

CategoryBytes category_bytes_before(const Program& program, int32_t event) {
  CategoryBytes bytes{};
  std::vector<Category> cat(program.buffers.size(), Category::Activations);
  for (int32_t i = 0; i < event && i < static_cast<int32_t>(program.events.size()); ++i) {
    const Event& e = program.events[static_cast<size_t>(i)];
    const Buffer& b = program.buffers[static_cast<size_t>(e.buffer)];
    auto& slot = cat[static_cast<size_t>(e.buffer)];
    switch (e.kind) {
      case Event::Kind::Alloc:
        slot = b.category;
        bytes[static_cast<size_t>(slot)] += b.bytes;
        break;
      case Event::Kind::Free: bytes[static_cast<size_t>(slot)] -= b.bytes; break;
      case Event::Kind::Retag:
        bytes[static_cast<size_t>(slot)] -= b.bytes;
        slot = e.category;
        bytes[static_cast<size_t>(slot)] += b.bytes;
        break;
    }
  }
  return bytes;
}

}  // namespace headroom
