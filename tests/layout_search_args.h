// The layout search of `plan MODEL --gpus N` from the CLI's arguments, as the CLI runs it: the
// options parsed for the plan command, then search_layouts. A parse or search error fails the
// calling test.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>

#include "options/run_args.h"
#include "plan/layout_search.h"

namespace headroom::testing {

// `threads`: LayoutRequest::threads (0: one per hardware thread).
inline LayoutPlan search_layouts_for(const RunArgs& a, int64_t gpus, int threads = 0) {
  Result<EstimateOptions> o = to_estimate_options(a, RunCommand::Plan);
  EXPECT_TRUE(o.ok()) << o.error();
  LayoutRequest r;
  r.run = o.value();
  r.gpus = gpus;
  r.threads = threads;
  Result<LayoutPlan> p = search_layouts(r);
  EXPECT_TRUE(p.ok()) << p.error();
  return p.value();
}

}  // namespace headroom::testing
