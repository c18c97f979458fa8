// Benchmark graphs for the rematerialization program: a ResNet-like DAG (residual blocks of
// three stages whose last stage also reads the block's input, the skip edge), with realistic
// sizes and times drawn from a fixed seed, and the chain of the same stages without skip edges.
#pragma once

#include <random>

#include "plan/remat_graph.h"

namespace headroom::bench {

// `stages` forward stages: a stem stage, then blocks of 3 (conv, conv, conv+add), the last block
// possibly shorter. Activations 8-64 MiB, saved state 1-3x the output, transients up to half an
// activation; forwards 0.5-4 ms, backwards 1-2x the forward.
inline RematGraph resnet_like(int stages, uint32_t seed, bool skip_edges = true) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> act(8 << 20, 64 << 20);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  RematGraph g;
  Chain& c = g.sizes;
  for (int i = 0; i <= stages; ++i) c.x_bytes.push_back(act(rng));
  for (int i = 0; i < stages; ++i) {
    const double f = 0.5 + 3.5 * unit(rng);
    c.fwd_ms.push_back(f);
    c.bwd_ms.push_back(f * (1.0 + unit(rng)));
    const int64_t out = c.x_bytes[static_cast<size_t>(i) + 1];
    c.xbar_bytes.push_back(out + static_cast<int64_t>(2.0 * unit(rng) * static_cast<double>(out)));
    c.fwd_tmp_bytes.push_back(static_cast<int64_t>(0.5 * unit(rng) * static_cast<double>(out)));
    c.bwd_tmp_bytes.push_back(static_cast<int64_t>(0.5 * unit(rng) * static_cast<double>(out)));
  }
  c.loss_ms = 1.0;
  c.loss_tmp_bytes = 16 << 20;
  for (int i = 0; i < stages; ++i) {
    std::vector<int> p{i};
    // Stage 0 is the stem; block b covers stages 3b+1..3b+3, and its last stage adds the block
    // input a_{3b+1}.
    if (skip_edges && i >= 3 && i % 3 == 0) p.insert(p.begin(), i - 2);
    g.preds.push_back(p);
  }
  return g;
}

}  // namespace headroom::bench
