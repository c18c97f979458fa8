// replay_allocations: the allocator-only replay that device_memory() and fit over many GPUs use
// instead of simulate(program, &allocator). It must leave the allocator exactly as simulate()
// does: every stats field and every live block, in each allocator mode and at capacities that
// make it release its cache and run out of memory.
#include "sim/replay.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "estimate/estimate.h"
#include "graph_dsl.h"
#include "sim/simulate.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::program_from_script;
constexpr int64_t MiB = 1024 * 1024;

void expect_same_stats(const CachingAllocatorStats& a, const CachingAllocatorStats& b) {
  EXPECT_EQ(a.reserved_bytes, b.reserved_bytes);
  EXPECT_EQ(a.peak_reserved_bytes, b.peak_reserved_bytes);
  EXPECT_EQ(a.allocated_bytes, b.allocated_bytes);
  EXPECT_EQ(a.peak_allocated_bytes, b.peak_allocated_bytes);
  EXPECT_EQ(a.requested_bytes, b.requested_bytes);
  EXPECT_EQ(a.allocated_at_reserved_peak, b.allocated_at_reserved_peak);
  EXPECT_EQ(a.fragmentation_at_reserved_peak, b.fragmentation_at_reserved_peak);
  EXPECT_EQ(a.segments, b.segments);
  EXPECT_EQ(a.peak_segments, b.peak_segments);
  EXPECT_EQ(a.device_allocs, b.device_allocs);
  EXPECT_EQ(a.device_frees, b.device_frees);
  EXPECT_EQ(a.alloc_retries, b.alloc_retries);
  EXPECT_EQ(a.ooms, b.ooms);
  EXPECT_EQ(a.oom, b.oom);
  EXPECT_EQ(a.oom_buffer, b.oom_buffer);
  EXPECT_EQ(a.oom_request_bytes, b.oom_request_bytes);
  EXPECT_EQ(a.oom_reserved_bytes, b.oom_reserved_bytes);
  EXPECT_EQ(a.oom_allocated_bytes, b.oom_allocated_bytes);
}

// Replays p both ways in every mode (expandable segments, max_split_size) at capacities from
// half the unlimited reserved peak (out of memory) to unlimited.
void expect_same_as_simulate(const Program& p) {
  CachingAllocator probe;
  simulate(p, &probe);
  const int64_t reserved = probe.stats().peak_reserved_bytes;
  ASSERT_GT(reserved, 0);
  int checked_oom = 0;
  for (int mode = 0; mode < 4; ++mode) {
    for (int64_t capacity : {int64_t{0}, reserved / 2, reserved - 2 * MiB, reserved}) {
      SCOPED_TRACE(fmt::format("mode {}, capacity {}", mode, capacity));
      CachingAllocatorOptions o;
      o.expandable_segments = mode & 1;
      if (mode & 2) o.max_split_size_bytes = 24 * MiB;
      o.capacity_bytes = std::max<int64_t>(capacity, 0);
      CachingAllocator by_simulate(o), by_replay(o);
      simulate(p, &by_simulate);
      replay_allocations(p, by_replay);
      expect_same_stats(by_simulate.stats(), by_replay.stats());
      const std::vector<CachingAllocatorBlock> a = by_simulate.live_blocks(), b = by_replay.live_blocks();
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].buffer, b[i].buffer);
        EXPECT_EQ(a[i].address, b[i].address);
        EXPECT_EQ(a[i].size, b[i].size);
      }
      EXPECT_EQ(by_replay.check_invariants(), "");
      checked_oom += by_replay.stats().oom;
    }
  }
  EXPECT_GT(checked_oom, 0) << "no capacity made the allocator run out of memory";
}

TEST(ReplayAllocations, SameAllocatorStateAsSimulateOnRandomScripts) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE(seed);
    expect_same_as_simulate(program_from_script(testing::random_alloc_script(seed)));
  }
}

TEST(ReplayAllocations, SameAllocatorStateAsSimulateOnAResnetStep) {
  EstimateOptions o;
  o.model = "resnet18";
  o.batch = 16;
  o.keep_program = true;
  Result<Estimate> e = estimate(o);
  ASSERT_TRUE(e.ok()) << e.error();
  expect_same_as_simulate(e.value().program);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
