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

// A backward plan's own events.
inline std::vector<int64_t> allocs(const BackwardPlan& b) { return allocs(b.events, &b); }

}  // namespace headroom
