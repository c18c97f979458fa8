// Building blocks of the hand-written kernel rules (cpu_conv, cpu_conv_transpose): the event list
// of one call, in allocation order. Temporaries are numbered in allocation order (`next` is the
// next index); a new gradient is appended to the plan's grads and allocated where it is pushed.
#pragma once

#include <cstdint>
#include <vector>

#include "training/op_rules.h"

namespace headroom::kernel_events {

inline bool needs(const RuleContext& c, int i) {
  return static_cast<size_t>(i) < c.input_requires_grad.size() && c.input_requires_grad[static_cast<size_t>(i)];
}

inline int temp(std::vector<LocalEvent>& ev, int& next, int64_t bytes) {
  ev.push_back({LocalEvent::Kind::AllocTemp, next, bytes});
  return next++;
}

inline void drop(std::vector<LocalEvent>& ev, int index) { ev.push_back({LocalEvent::Kind::FreeTemp, index, 0}); }

// A new contiguous gradient of input `input`, allocated now.
inline void new_grad(BackwardPlan& b, int input, int64_t bytes) {
  b.grads.push_back({input, GradOut::Kind::New, bytes, true});
  b.events.push_back({LocalEvent::Kind::AllocGrad, static_cast<int>(b.grads.size()) - 1, 0});
}

}  // namespace headroom::kernel_events
