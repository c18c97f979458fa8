// The event list of one kernel rule as a list of numbers, for pinning a measured allocation
// sequence in one line: each allocation's bytes in order (a gradient by its GradOut's size, the
// op's output as -1), each free as 0.
#pragma once

#include <cstdint>
#include <vector>

#include "training/op_rules.h"

namespace headroom {

inline std::vector<int64_t> allocs(const std::vector<LocalEvent>& ev, const BackwardPlan* b = nullptr) {
  std::vector<int64_t> out;
  for (const LocalEvent& e : ev) {
    if (e.kind == LocalEvent::Kind::AllocTemp) out.push_back(e.bytes);
    else if (e.kind == LocalEvent::Kind::AllocGrad && b) out.push_back(b->grads[static_cast<size_t>(e.index)].bytes);
    else if (e.kind == LocalEvent::Kind::AllocOutput) out.push_back(-1);
    else out.push_back(0);
  }
  return out;
}

// A forward plan's events with its extra buffers by their bytes too (an AllocExtra is otherwise
// read as 0, like a free).
inline std::vector<int64_t> allocs(const ForwardPlan& p) {
  std::vector<int64_t> out = allocs(p.events);
  for (size_t i = 0; i < p.events.size(); ++i) {
    if (p.events[i].kind == LocalEvent::Kind::AllocExtra) out[i] = p.extras[static_cast<size_t>(p.events[i].index)].bytes;
  }
  return out;
}

// A backward plan's own events.
inline std::vector<int64_t> allocs(const BackwardPlan& b) { return allocs(b.events, &b); }

}  // namespace headroom
