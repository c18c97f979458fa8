// Test helper: a graph's op by name, for tests that build a graph and then inspect the rule of
// one of its ops. A missing name is a test failure (and op 0 is returned so the test goes on).
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "ir/graph.h"

namespace headroom::testing {

inline const Op& op_named(const Graph& g, const std::string& name) {
  for (const Op& op : g.ops) {
    if (op.name == name) return op;
  }
  ADD_FAILURE() << "no op " << name;
  return g.ops.at(0);
}

}  // namespace headroom::testing
