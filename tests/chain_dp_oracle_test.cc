// The shipped chain DP (src/plan/chain_dp.cc) against the fill it had before issue #17's speed
// work (tests/chain_dp_reference.cc), bit for bit: feasibility, the makespan's bits and the
// schedule, on random chains of 1-120 stages, with tie-heavy whole-millisecond times (where the
// tie-break decides the schedule) and with times whose float sums round, at memories from
// infeasible to above storing everything, on 1 to 4 threads. Any change to the fill (pruning,
// order, layout) must keep this passing; the exhaustive search (chain_dp_test.cc) stays the oracle
// of the recurrence itself.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "chain_dp_reference.h"
#include "plan/chain_dp.h"
#include "plan/chain_model.h"
#include "plan/chain_simulate.h"

namespace headroom {
namespace {

// Sizes in slots. `wild`: transients and saved states far above the activations (the memory
// tests of the chain option and of the sweep bind); otherwise transformer-like ratios. `whole`:
// times of 0-6 ms in whole milliseconds (many equal candidates: the tie-break is exercised),
// otherwise times in (0.01, 5) ms whose float sums round.
Chain random_slot_chain(std::mt19937& rng, int L, bool wild, bool whole) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  auto time = [&]() {
    return whole ? static_cast<double>(pick(0, 6))
                 : 0.01 + 4.99 * std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  };
  Chain c;
  for (int i = 0; i <= L; ++i) c.x_bytes.push_back(pick(wild ? 0 : 1, wild ? 12 : 4));
  for (int i = 0; i < L; ++i) {
    c.fwd_ms.push_back(time());
    c.bwd_ms.push_back(time());
    const int64_t out = c.x_bytes[static_cast<size_t>(i) + 1];
    c.xbar_bytes.push_back(out + pick(0, wild ? 24 : 3 * out));
    c.fwd_tmp_bytes.push_back(pick(0, wild ? 30 : out));
    c.bwd_tmp_bytes.push_back(pick(0, wild ? 12 : out));
  }
  c.loss_ms = time();
  c.loss_tmp_bytes = pick(0, 3);
  return c;
}

std::string describe(const ChainDpResult& r) {
  std::string s = r.feasible ? "feasible " : "infeasible ";
  s += std::to_string(r.makespan_ms) + " ms, " + std::to_string(r.schedule.size()) + " ops:";
  for (ChainOp op : r.schedule) s += " " + op_token(op);
  return s;
}

TEST(ChainDpOracle, FillEqualsTheReferenceFillBitForBit) {
  std::mt19937 rng(20261125);
  int compared = 0, feasible = 0, recomputing = 0;
  for (int trial = 0; trial < 240; ++trial) {
    // Mostly short chains (many of them), every tenth one long (the blocks of 16 columns, the
    // leaves that end before a block and inside it, more than one block per thread).
    const bool long_chain = trial % 10 == 9;
    const int L = long_chain ? 50 + static_cast<int>(rng() % 71) : 1 + static_cast<int>(rng() % 40);
    const Chain c = random_slot_chain(rng, L, /*wild=*/trial % 3 == 0, /*whole=*/trial % 2 == 0);
    const int64_t all = store_all_peak(c);  // in slots: the chain's sizes are slots
    // Threads on the long chains only (short tables take one thread whatever is asked).
    const int threads = long_chain ? 1 + (trial / 10) % 4 : 1;
    for (int64_t memory : {all / 4, all / 3, all / 2, 2 * all / 3, 5 * all / 6, all, all + 3}) {
      if (memory < 0 || memory > 1500) continue;
      const int m = static_cast<int>(memory);
      const ChainDpResult fast = solve_chain_dp(c, m, threads);
      const ChainDpResult old = testing::reference_solve_chain_dp(c, m, 1);
      ++compared;
      ASSERT_EQ(fast.feasible, old.feasible) << "trial " << trial << " memory " << m;
      ASSERT_EQ(std::bit_cast<uint64_t>(fast.makespan_ms), std::bit_cast<uint64_t>(old.makespan_ms))
          << "trial " << trial << " memory " << m << "\nfast: " << describe(fast)
          << "\nold:  " << describe(old) << "\n" << chain_json(c);
      ASSERT_EQ(fast.schedule, old.schedule)
          << "trial " << trial << " memory " << m << "\nfast: " << describe(fast)
          << "\nold:  " << describe(old);
      if (!fast.feasible) continue;
      ++feasible;
      if (fast.makespan_ms > no_checkpoint_makespan_ms(c) + 1e-3) ++recomputing;
      // Equal to the old fill is only worth something if the schedule is right.
      Result<ChainSimResult> sim = simulate_chain(c, fast.schedule);
      ASSERT_TRUE(sim.ok()) << sim.error();
      EXPECT_LE(sim.value().peak, memory);
    }
  }
  // Not all trivial: many feasible answers, many of them recomputing.
  EXPECT_GT(compared, 1500);
  EXPECT_GT(feasible, 900);
  EXPECT_GT(recomputing, 400);
}

}  // namespace
}  // namespace headroom
