// rounded_live_peak: the lower bound fit over many GPUs uses to skip a replay. Pinned by hand on a
// script, then checked as a bound against the caching allocator model itself: every replay, with
// any capacity (runs that meet it and run out of memory included), max_split_size or expandable
// segments, reserves at least this much at its peak.
#include "sim/allocated_lower_bound.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "estimate/estimate.h"
#include "graph_dsl.h"
#include "sim/caching_allocator.h"
#include "sim/simulate.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::program_from_script;
constexpr int64_t MiB = 1024 * 1024;

TEST(RoundedLivePeak, SumsRoundSizeOfTheLiveBuffers) {
  // a: 100 B -> 512; b: 600 B -> 1,024; a freed; c: 0 B takes no block; d: 1 MiB -> 1,048,576.
  // Live after b: 512 + 1,024 = 1,536; after d: 1,024 + 1,048,576 = 1,049,600 (the peak). The
  // exact peak is 600 + 1,048,576 = 1,049,176: rounding adds 424 B.
  Program p = program_from_script("+a:100 +b:600 -a +c:0 +d:1048576 -b -d");
  EXPECT_EQ(rounded_live_peak(p), 1'049'600);
  EXPECT_EQ(simulate(p).peak.bytes, 1'049'176);
}

// Replays p on allocators of every mode and a range of capacities, and checks the bound.
void expect_bound_holds(const Program& p) {
  const int64_t bound = rounded_live_peak(p);
  const int64_t exact = simulate(p).peak.bytes;
  EXPECT_GE(bound, exact);
  CachingAllocator unlimited;
  simulate(p, &unlimited);
  const int64_t reserved = unlimited.stats().peak_reserved_bytes;
  EXPECT_LE(bound, reserved);
  for (int mode = 0; mode < 4; ++mode) {
    for (int64_t capacity : {bound / 2, bound, bound + 2 * MiB, reserved}) {
      CachingAllocatorOptions o;
      o.expandable_segments = mode & 1;
      if (mode & 2) o.max_split_size_bytes = 24 * MiB;
      o.capacity_bytes = std::max<int64_t>(capacity, 1);
      CachingAllocator a(o);
      simulate(p, &a);
      EXPECT_LE(bound, a.stats().peak_reserved_bytes) << "mode " << mode << ", capacity " << capacity;
      EXPECT_LE(bound, a.stats().peak_allocated_bytes) << "mode " << mode << ", capacity " << capacity;
    }
  }
}

TEST(RoundedLivePeak, NoReplayReservesLessOnRandomScripts) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE(seed);
    expect_bound_holds(program_from_script(testing::random_alloc_script(seed)));
  }
}

TEST(RoundedLivePeak, NoReplayReservesLessOnAResnetStep) {
  EstimateOptions o;
  o.model = "resnet18";
  o.batch = 16;
  o.keep_program = true;
  Result<Estimate> e = estimate(o);
  ASSERT_TRUE(e.ok()) << e.error();
  expect_bound_holds(e.value().program);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
