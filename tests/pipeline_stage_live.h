// Test helper shared by the pipeline tests: what a stage program holds just before its first
// backward, SavedActivations plus the p2p receive buffers (category Activations, named
// "p2p recv ..." by schedule/pipeline_split.cc).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>

#include "estimate/parallel.h"
#include "schedule/program.h"
#include "sim/simulate.h"

namespace headroom::testing {

struct LiveAtFirstBackward {
  int64_t saved = 0, received = 0;
  int received_buffers = 0;
};

inline LiveAtFirstBackward live_at_first_backward(const Program& p) {
  int32_t at = -1;
  for (const Step& st : p.steps) {
    if (st.phase == Phase::Backward) {
      at = st.first_event;
      break;
    }
  }
  EXPECT_GT(at, 0);
  LiveAtFirstBackward r;
  r.saved = category_bytes_before(p, at)[static_cast<size_t>(Category::SavedActivations)];
  for (BufferId id : live_after(p, at - 1)) {
    const Buffer& b = p.buffers[static_cast<size_t>(id)];
    if (b.name.rfind("p2p recv ", 0) == 0) {
      r.received += b.bytes;
      ++r.received_buffers;
    }
  }
  return r;
}

}  // namespace headroom::testing
