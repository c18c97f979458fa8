// PyTorch's CUDA caching allocator model alone, on raw Alloc/Free scripts. Every expected number
// is derived by hand from the rules in src/sim/caching_allocator.h; the arithmetic is in the
// comments. After every event of every script the oracles run: the allocator's own invariants, no
// two allocated blocks overlap, allocated <= reserved; at the end the reserved peak is at least the
// exact (ExactHeap) peak.
#include "sim/caching_allocator.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "graph_dsl.h"
#include "sim/simulate.h"
#include "util/error.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::program_from_script;
constexpr int64_t KiB = 1024;
constexpr int64_t MiB = 1024 * 1024;

BufferId id_of(const Program& p, const std::string& name) {
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    if (p.buffers[i].name == name) return static_cast<BufferId>(i);
  }
  ADD_FAILURE() << "no buffer " << name;
  return -1;
}

// Replays events [from, to) of `p` on `a`, running the per-event oracles.
std::string replay_range(const Program& p, CachingAllocator& a, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i) {
    const Event& e = p.events[i];
    if (e.kind == Event::Kind::Alloc)
      a.alloc(e.buffer, p.buffers[static_cast<size_t>(e.buffer)].bytes);
    if (e.kind == Event::Kind::Free) a.free(e.buffer);
    std::string why = a.check_invariants();
    if (!why.empty()) return fmt::format("event {}: {}", i, why);
    std::vector<CachingAllocatorBlock> live = a.live_blocks();
    for (size_t k = 1; k < live.size(); ++k) {
      if (live[k - 1].address + live[k - 1].size > live[k].address) {
        return fmt::format("event {}: blocks of buffers {} and {} overlap", i, live[k - 1].buffer,
                           live[k].buffer);
      }
    }
    for (const CachingAllocatorBlock& b : live) {
      if (b.size < b.requested) return fmt::format("event {}: block smaller than request", i);
    }
    if (a.stats().allocated_bytes > a.stats().reserved_bytes) {
      return fmt::format("event {}: allocated exceeds reserved", i);
    }
  }
  return "";
}

// Replays the whole program and checks the end-of-script oracle too.
std::string replay(const Program& p, CachingAllocator& a) {
  std::string why = replay_range(p, a, 0, p.events.size());
  if (!why.empty()) return why;
  SimResult exact = simulate(p);
  if (a.stats().peak_reserved_bytes < exact.peak.bytes) return "reserved peak below the exact peak";
  if (a.stats().peak_allocated_bytes < exact.peak.bytes)
    return "allocated peak below the exact peak";
  return "";
}

int64_t address_of(const CachingAllocator& a, BufferId id) {
  for (const CachingAllocatorBlock& b : a.live_blocks()) {
    if (b.buffer == id) return b.address;
  }
  ADD_FAILURE() << "buffer " << id << " is not live";
  return -1;
}

int64_t block_size_of(const CachingAllocator& a, BufferId id) {
  for (const CachingAllocatorBlock& b : a.live_blocks()) {
    if (b.buffer == id) return b.size;
  }
  ADD_FAILURE() << "buffer " << id << " is not live";
  return -1;
}

TEST(CachingAllocator, RoundSizeAndSegmentSizes) {
  using namespace cuda_caching;
  // Below 512 B everything takes 512 B; above, the next multiple of 512.
  EXPECT_EQ(round_size(1), 512);
  EXPECT_EQ(round_size(512), 512);
  EXPECT_EQ(round_size(513), 1024);
  EXPECT_EQ(round_size(1000), 1024);
  // <= 1 MiB: small pool, 2 MiB segments.
  EXPECT_EQ(allocation_size(512), 2 * MiB);
  EXPECT_EQ(allocation_size(1 * MiB), 2 * MiB);
  // (1 MiB, 10 MiB): one 20 MiB segment to be split.
  EXPECT_EQ(allocation_size(1 * MiB + 512), 20 * MiB);
  EXPECT_EQ(allocation_size(10 * MiB - 512), 20 * MiB);
  // >= 10 MiB: the size rounded up to 2 MiB.
  EXPECT_EQ(allocation_size(10 * MiB), 10 * MiB);
  EXPECT_EQ(allocation_size(10 * MiB + 512), 12 * MiB);
  EXPECT_EQ(allocation_size(41 * MiB), 42 * MiB);
}

TEST(CachingAllocator, SmallAndLargePoolsAndReuseOfACachedSegment) {
  // +a:1000  -> 1024 B, small pool, new 2 MiB segment (remainder 2096128 >= 512: split).
  //             reserved 2097152, allocated 1024.
  // +b:3 MiB -> large pool, < 10 MiB: new 20 MiB segment, split (remainder 17 MiB > 1 MiB).
  //             reserved 2 + 20 = 22 MiB, allocated 1024 + 3 MiB.
  // -b       -> merges with the 17 MiB remainder: one cached 20 MiB block; reserved stays 22 MiB.
  // +c:2.5 MiB -> reuses the cached 20 MiB block by splitting it: no new segment.
  Program p =
      program_from_script(fmt::format("+a:1000 | +b:{} | -b | +c:{}", 3 * MiB, 5 * MiB / 2));
  CachingAllocator a;
  ASSERT_EQ(replay_range(p, a, 0, 1), "");
  EXPECT_EQ(a.stats().reserved_bytes, 2097152);
  EXPECT_EQ(a.stats().allocated_bytes, 1024);
  ASSERT_EQ(replay_range(p, a, 1, 2), "");
  EXPECT_EQ(a.stats().reserved_bytes, 22 * MiB);
  EXPECT_EQ(a.stats().allocated_bytes, 1024 + 3 * MiB);
  ASSERT_EQ(replay_range(p, a, 2, 4), "");
  EXPECT_EQ(a.stats().reserved_bytes, 22 * MiB);
  EXPECT_EQ(a.stats().allocated_bytes, 1024 + 5 * MiB / 2);
  EXPECT_EQ(a.stats().segments, 2);
  EXPECT_EQ(a.stats().device_allocs, 2);
  EXPECT_EQ(a.stats().device_frees, 0);
  EXPECT_EQ(a.stats().peak_reserved_bytes, 22 * MiB);
  EXPECT_EQ(a.stats().peak_allocated_bytes, 1024 + 3 * MiB);
  // The reserved peak (22 MiB) was first reached by +b: fragmentation 22 MiB - (1024 + 3 MiB).
  EXPECT_EQ(a.stats().fragmentation_at_reserved_peak, 22 * MiB - 1024 - 3 * MiB);
  EXPECT_EQ(a.footprint(), 22 * MiB);
}

TEST(CachingAllocator, ExactlyOneMiBIsSmallOneMiBPlusOneByteIsLarge) {
  // +a:1048576 -> 1 MiB <= kSmallSize: small pool, 2 MiB segment.
  // +b:1048577 -> rounds to 1 MiB + 512: large pool, 20 MiB segment. reserved 22 MiB.
  Program p = program_from_script("+a:1048576 +b:1048577");
  CachingAllocator a;
  ASSERT_EQ(replay(p, a), "");
  std::vector<CachingAllocatorBlock> live = a.live_blocks();
  ASSERT_EQ(live.size(), 2u);
  EXPECT_TRUE(live[0].small_pool);
  EXPECT_FALSE(live[1].small_pool);
  EXPECT_EQ(live[1].size, 1 * MiB + 512);
  EXPECT_EQ(a.stats().reserved_bytes, 22 * MiB);
}

TEST(CachingAllocator, SmallRequestsPackIntoTwoMiBSegments) {
  // Four 512 KiB requests fill one 2 MiB segment by best-fit splitting:
  //   +a: new segment [a 512K][free 1.5M]; +b: [a][b][free 1M]; +c: [a][b][c][free 512K];
  //   +d: takes the 512 KiB block whole (remainder 0: no split).
  // +e:1 -> 512 B, no cached block left: a second 2 MiB segment. reserved 4 MiB.
  Program p = program_from_script(fmt::format("+a:{0} +b:{0} +c:{0} +d:{0} | +e:1", 512 * KiB));
  CachingAllocator a;
  ASSERT_EQ(replay_range(p, a, 0, 4), "");
  EXPECT_EQ(a.stats().reserved_bytes, 2 * MiB);
  EXPECT_EQ(a.stats().allocated_bytes, 2 * MiB);
  EXPECT_EQ(a.stats().segments, 1);
  EXPECT_EQ(address_of(a, id_of(p, "b")), address_of(a, id_of(p, "a")) + 512 * KiB);
  ASSERT_EQ(replay_range(p, a, 4, 5), "");
  EXPECT_EQ(a.stats().reserved_bytes, 4 * MiB);
  EXPECT_EQ(a.stats().segments, 2);
}

TEST(CachingAllocator, SmallPoolSplitsOffEvenA512ByteRemainder) {
  // +a:1 MiB        -> 2 MiB segment: [a 1M][free 1M]
  // +b:1 MiB - 512  -> takes the 1 MiB block, remainder 512 >= kMinBlockSize: split, [free 512]
  // +c:100          -> 512 B: the 512 B remainder, whole. Still one segment, fully allocated.
  Program p = program_from_script(fmt::format("+a:{} +b:{} +c:100", 1 * MiB, 1 * MiB - 512));
  CachingAllocator a;
  ASSERT_EQ(replay(p, a), "");
  EXPECT_EQ(a.stats().reserved_bytes, 2 * MiB);
  EXPECT_EQ(a.stats().allocated_bytes, 2 * MiB);
  EXPECT_EQ(block_size_of(a, id_of(p, "b")), 1 * MiB - 512);
  EXPECT_EQ(a.stats().requested_bytes, 1 * MiB + 1 * MiB - 512 + 100);
}

TEST(CachingAllocator, LargePoolSplitsOnlyWhenTheRemainderExceedsOneMiB) {
  // +a:9 MiB -> 20 MiB segment, split: [a 9M][free 11M].
  // +b:10 MiB - 512 -> best fit is the 11 MiB block; remainder 1 MiB + 512 > 1 MiB: split.
  //   [a 9M][b 10M-512][free 1M+512]
  Program p1 = program_from_script(fmt::format("+a:{} +b:{}", 9 * MiB, 10 * MiB - 512));
  CachingAllocator split;
  ASSERT_EQ(replay(p1, split), "");
  EXPECT_EQ(block_size_of(split, id_of(p1, "b")), 10 * MiB - 512);
  EXPECT_EQ(split.stats().allocated_bytes, 19 * MiB - 512);

  // +a:9 MiB, +b:10 MiB -> remainder exactly 1 MiB, not > 1 MiB: b gets the whole 11 MiB block,
  // and allocated (block sizes) = 9 + 11 = 20 MiB although only 19 MiB were requested.
  Program p2 = program_from_script(fmt::format("+a:{} +b:{}", 9 * MiB, 10 * MiB));
  CachingAllocator whole;
  ASSERT_EQ(replay(p2, whole), "");
  EXPECT_EQ(block_size_of(whole, id_of(p2, "b")), 11 * MiB);
  EXPECT_EQ(whole.stats().allocated_bytes, 20 * MiB);
  EXPECT_EQ(whole.stats().requested_bytes, 19 * MiB);
  EXPECT_EQ(whole.stats().reserved_bytes, 20 * MiB);

  // +a:19 MiB -> >= 10 MiB: segment rounded to 2 MiB = 20 MiB; remainder 1 MiB: no split.
  Program p3 = program_from_script(fmt::format("+a:{}", 19 * MiB));
  CachingAllocator big;
  ASSERT_EQ(replay(p3, big), "");
  EXPECT_EQ(big.stats().allocated_bytes, 20 * MiB);
  EXPECT_EQ(big.stats().reserved_bytes, 20 * MiB);
}

TEST(CachingAllocator, BestFitPicksTheSmallestCachedBlockThenTheLowestAddress) {
  // Three whole cached segments: x 12 MiB, y 16 MiB, z 14 MiB (each request >= 10 MiB gets its
  // own segment of exactly that size). reserved 42 MiB.
  // +u:13 MiB -> smallest block >= 13 MiB is z (14 MiB); remainder 1 MiB: no split, u takes 14.
  // +v:11 MiB -> x (12 MiB), remainder 1 MiB: whole. No new segment: reserved stays 42 MiB.
  Program p = program_from_script(fmt::format("+x:{} +y:{} +z:{} | -x -y -z | +u:{} +v:{}",
                                              12 * MiB, 16 * MiB, 14 * MiB, 13 * MiB, 11 * MiB));
  CachingAllocator a;
  ASSERT_EQ(replay_range(p, a, 0, 3), "");
  int64_t x_at = address_of(a, id_of(p, "x"));
  int64_t z_at = address_of(a, id_of(p, "z"));
  ASSERT_EQ(replay_range(p, a, 3, p.events.size()), "");
  EXPECT_EQ(address_of(a, id_of(p, "u")), z_at);
  EXPECT_EQ(address_of(a, id_of(p, "v")), x_at);
  EXPECT_EQ(block_size_of(a, id_of(p, "u")), 14 * MiB);
  EXPECT_EQ(a.stats().reserved_bytes, 42 * MiB);
  EXPECT_EQ(a.stats().device_allocs, 3);

  // Equal sizes: the block with the lower address (here the older segment) wins.
  Program q = program_from_script(fmt::format("+a:{0} +b:{0} | -b -a | +c:{0}", 12 * MiB));
  CachingAllocator t;
  ASSERT_EQ(replay_range(q, t, 0, 2), "");
  int64_t a_at = address_of(t, id_of(q, "a"));
  ASSERT_EQ(replay_range(q, t, 2, q.events.size()), "");
  EXPECT_EQ(address_of(t, id_of(q, "c")), a_at);
}

TEST(CachingAllocator, FreedBlocksMergeWithFreeNeighbours) {
  // One 20 MiB segment: +a,+b,+c of 3 MiB each -> [a 3][b 3][c 3][free 11].
  // -a -c: a stays a lone 3 MiB free block; c merges with the 11 MiB tail -> free 14 MiB.
  // +d:13 MiB -> best fit among {3, 14}: the merged 14 MiB block; remainder 1 MiB: whole.
  //   Without the merge it would have needed a new 14 MiB segment. reserved stays 20 MiB.
  // -b: merges with a -> free 6 MiB. -d: merges with [a+b] -> the whole 20 MiB segment.
  // +e:20 MiB -> (>= 10 MiB, segment would be 20 MiB) takes the cached 20 MiB block.
  Program p = program_from_script(fmt::format(
      "+a:{0} +b:{0} +c:{0} | -a -c | +d:{1} | -b -d | +e:{2}", 3 * MiB, 13 * MiB, 20 * MiB));
  CachingAllocator a;
  ASSERT_EQ(replay_range(p, a, 0, 6), "");
  EXPECT_EQ(block_size_of(a, id_of(p, "d")), 14 * MiB);
  EXPECT_EQ(a.stats().reserved_bytes, 20 * MiB);
  ASSERT_EQ(replay_range(p, a, 6, p.events.size()), "");
  EXPECT_EQ(a.stats().reserved_bytes, 20 * MiB);
  EXPECT_EQ(a.stats().device_allocs, 1);
  EXPECT_EQ(block_size_of(a, id_of(p, "e")), 20 * MiB);
}

TEST(CachingAllocator, MaxSplitSizeKeepsOversizeBlocksWhole) {
  // max_split_size_mb:40.
  // +a:50 MiB -> 50 MiB segment (>= max_split: never split). -a: cached oversize block.
  // +b:30 MiB -> < max_split, the only candidate (50 MiB) is oversize: refused -> new 30 MiB
  //   segment. reserved 80 MiB.
  // +c:45 MiB -> >= max_split; 50 < 45 + 20 (max_non_split_rounding): takes the 50 MiB block, and
  //   does not split it although 5 MiB would remain. reserved stays 80 MiB, allocated 30 + 50.
  CachingAllocatorOptions o;
  o.max_split_size_bytes = 40 * MiB;
  Program p =
      program_from_script(fmt::format("+a:{} | -a | +b:{} | +c:{}", 50 * MiB, 30 * MiB, 45 * MiB));
  CachingAllocator a(o);
  ASSERT_EQ(replay(p, a), "");
  EXPECT_EQ(a.stats().reserved_bytes, 80 * MiB);
  EXPECT_EQ(block_size_of(a, id_of(p, "c")), 50 * MiB);
  EXPECT_EQ(a.stats().allocated_bytes, 80 * MiB);
  EXPECT_EQ(a.stats().segments, 2);
}

TEST(CachingAllocator, OversizeBlocksServeOnlyRequestsWithinTheRoundingLimit) {
  // max_split_size_mb:40. A cached 70 MiB block.
  // +b:45 MiB -> 70 >= 45 + 20: refused -> new segment round2M(45 MiB) = 46 MiB. reserved 116 MiB.
  // +c:52 MiB -> 70 < 52 + 20: takes the 70 MiB block whole. reserved stays 116 MiB.
  CachingAllocatorOptions o;
  o.max_split_size_bytes = 40 * MiB;
  Program p =
      program_from_script(fmt::format("+a:{} | -a | +b:{} | +c:{}", 70 * MiB, 45 * MiB, 52 * MiB));
  CachingAllocator a(o);
  ASSERT_EQ(replay(p, a), "");
  EXPECT_EQ(a.stats().reserved_bytes, 116 * MiB);
  EXPECT_EQ(block_size_of(a, id_of(p, "b")), 46 * MiB);
  EXPECT_EQ(block_size_of(a, id_of(p, "c")), 70 * MiB);

  // max_non_split_rounding_mb:30: now 70 < 45 + 30, so +b takes the cached block; +c gets a new
  // 52 MiB segment. reserved 70 + 52 = 122 MiB.
  o.max_non_split_rounding_bytes = 30 * MiB;
  CachingAllocator wide(o);
  ASSERT_EQ(replay(p, wide), "");
  EXPECT_EQ(block_size_of(wide, id_of(p, "b")), 70 * MiB);
  EXPECT_EQ(wide.stats().reserved_bytes, 122 * MiB);
}

TEST(CachingAllocator, OutOfMemoryReleasesCachedSegmentsAndRetries) {
  // capacity 40 MiB. +a,+b 12 MiB each: two 12 MiB segments (24 MiB). -a -b: both cached.
  // +c:30 MiB: no cached block >= 30; cudaMalloc(30 MiB) would make 54 > 40: fails.
  //   max_split_size unset: release_available_cached_blocks does nothing.
  //   release_cached_blocks: cudaFree both whole segments (reserved 0), retry: 30 <= 40: succeeds.
  CachingAllocatorOptions o;
  o.capacity_bytes = 40 * MiB;
  Program p =
      program_from_script(fmt::format("+a:{0} +b:{0} | -a -b | +c:{1}", 12 * MiB, 30 * MiB));
  CachingAllocator a(o);
  ASSERT_EQ(replay(p, a), "");
  EXPECT_FALSE(a.stats().oom);
  EXPECT_EQ(a.stats().reserved_bytes, 30 * MiB);
  EXPECT_EQ(a.stats().peak_reserved_bytes, 30 * MiB);
  EXPECT_EQ(a.stats().device_allocs, 3);
  EXPECT_EQ(a.stats().device_frees, 2);
  EXPECT_EQ(a.stats().alloc_retries, 1);
  EXPECT_EQ(a.stats().segments, 1);
  EXPECT_EQ(a.stats().peak_segments, 2);
}

TEST(CachingAllocator, OutOfMemoryWhenNothingCanBeReleased) {
  // capacity 40 MiB. +a:12 MiB (12 reserved). +b:30 MiB: 12 + 30 = 42 > 40; nothing cached to
  // release: OOM at b. The model goes on without the limit: reserved 42 MiB afterwards.
  CachingAllocatorOptions o;
  o.capacity_bytes = 40 * MiB;
  Program p = program_from_script(fmt::format("+a:{} +b:{}", 12 * MiB, 30 * MiB));
  CachingAllocator a(o);
  ASSERT_EQ(replay(p, a), "");
  EXPECT_TRUE(a.stats().oom);
  EXPECT_EQ(a.stats().ooms, 1);
  EXPECT_EQ(a.stats().oom_buffer, id_of(p, "b"));
  EXPECT_EQ(a.stats().oom_request_bytes, 30 * MiB);
  EXPECT_EQ(a.stats().oom_reserved_bytes, 12 * MiB);
  EXPECT_EQ(a.stats().oom_allocated_bytes, 12 * MiB);
  EXPECT_EQ(a.stats().reserved_bytes, 42 * MiB);
}

TEST(CachingAllocator, PartlyUsedSegmentsAreNotReleased) {
  // capacity 40 MiB. +a,+b 3 MiB: one 20 MiB segment [a 3][b 3][free 14]. -a: [free 3][b][free 14].
  // +c:25 MiB: no cached block >= 25 MiB; new segment 26 MiB: 20 + 26 = 46 > 40. The segment
  // holding b is split, so release_cached_blocks frees nothing: OOM although 17 MiB are cached.
  CachingAllocatorOptions o;
  o.capacity_bytes = 40 * MiB;
  Program p = program_from_script(fmt::format("+a:{0} +b:{0} | -a | +c:{1}", 3 * MiB, 25 * MiB));
  CachingAllocator a(o);
  ASSERT_EQ(replay(p, a), "");
  EXPECT_TRUE(a.stats().oom);
  EXPECT_EQ(a.stats().oom_buffer, id_of(p, "c"));
  EXPECT_EQ(a.stats().oom_reserved_bytes, 20 * MiB);
  EXPECT_EQ(a.stats().oom_allocated_bytes, 3 * MiB);
  EXPECT_EQ(a.stats().device_frees, 0);
}

TEST(CachingAllocator, ReleaseAvailableFreesOneOversizeBlockFirst) {
  // capacity 100 MiB, max_split_size_mb:40.
  // +a:50 MiB, -a: cached oversize 50 MiB. +b:30 MiB: refuses the oversize block, new 30 MiB
  //   segment (80 reserved).
  // +c:25 MiB: refuses the oversize block; new 26 MiB segment: 106 > 100 fails.
  //   release_available_cached_blocks: key = max(25, 40) = 40 MiB; the smallest cached block
  //   >= 40 MiB is the 50 MiB one: cudaFree it (30 reserved). Retry (not counted as a retry):
  //   30 + 26 = 56 <= 100.
  CachingAllocatorOptions o;
  o.capacity_bytes = 100 * MiB;
  o.max_split_size_bytes = 40 * MiB;
  Program p =
      program_from_script(fmt::format("+a:{} | -a | +b:{} | +c:{}", 50 * MiB, 30 * MiB, 25 * MiB));
  CachingAllocator a(o);
  ASSERT_EQ(replay(p, a), "");
  EXPECT_FALSE(a.stats().oom);
  EXPECT_EQ(a.stats().reserved_bytes, 56 * MiB);
  EXPECT_EQ(a.stats().device_frees, 1);
  EXPECT_EQ(a.stats().alloc_retries, 0);
  EXPECT_EQ(a.stats().peak_reserved_bytes, 80 * MiB);
}

TEST(CachingAllocator, ExpandableSegmentsGrowInPagesAndReuseFreedSpace) {
  // expandable_segments:True. Large pool pages are 20 MiB, small pool pages 2 MiB.
  // +a:12 MiB -> new large expandable segment; map ceil(12/20) = 1 page: reserved 20 MiB.
  //   Split (remainder 8 MiB >= 512): [a 12][free 8][unmapped ...].
  // -a -> [free 20][unmapped]: pages stay mapped (cached).
  // +b:14 MiB -> the cached 20 MiB block; reserved stays 20 MiB. (Without expandable segments:
  //   12 MiB and 14 MiB segments, 26 MiB.)
  // +c:1000 -> 1024 B in a new small expandable segment: one 2 MiB page. reserved 22 MiB.
  // +d:5.5 MiB -> best fit: the 6 MiB free tail [14, 20) of the large segment; remainder 512 KiB
  //   is split off (under expandable segments every pool splits at >= 512 B).
  Program p = program_from_script(
      fmt::format("+a:{} | -a | +b:{} | +c:1000 | +d:{}", 12 * MiB, 14 * MiB, 11 * MiB / 2));
  CachingAllocatorOptions o;
  o.expandable_segments = true;
  CachingAllocator a(o);
  ASSERT_EQ(replay_range(p, a, 0, 1), "");
  EXPECT_EQ(a.stats().reserved_bytes, 20 * MiB);
  ASSERT_EQ(replay_range(p, a, 1, 3), "");
  EXPECT_EQ(a.stats().reserved_bytes, 20 * MiB);
  ASSERT_EQ(replay_range(p, a, 3, 4), "");
  EXPECT_EQ(a.stats().reserved_bytes, 22 * MiB);
  ASSERT_EQ(replay_range(p, a, 4, 5), "");
  EXPECT_EQ(a.stats().reserved_bytes, 22 * MiB);
  EXPECT_EQ(block_size_of(a, id_of(p, "d")), 11 * MiB / 2);
  EXPECT_EQ(address_of(a, id_of(p, "d")), address_of(a, id_of(p, "b")) + 14 * MiB);
  EXPECT_EQ(a.stats().segments, 2);       // one address range per pool
  EXPECT_EQ(a.stats().device_allocs, 2);  // two page mappings
  SimResult exact = simulate(p);
  EXPECT_GE(a.stats().peak_reserved_bytes, exact.peak.bytes);
}

TEST(CachingAllocator, ExpandableBestFitCountsTheRoomBehindTheTail) {
  // One large expandable segment (one 20 MiB page mapped):
  //   +a:5 +b:2 +c:10 (MiB) -> [a 0-5][b 5-7][c 7-17][free 17-20][unmapped].  -a -> [free 0-5].
  // +d:2 MiB: by size alone the best fit is the 3 MiB tail, but the tail can grow into the
  //   unmapped range, so PyTorch ranks it by 3 MiB + the unmapped size and takes the 5 MiB block
  //   at 0 instead: d lands at the segment start.
  Program p = program_from_script(
      fmt::format("+a:{} +b:{} +c:{} | -a | +d:{}", 5 * MiB, 2 * MiB, 10 * MiB, 2 * MiB));
  CachingAllocatorOptions o;
  o.expandable_segments = true;
  CachingAllocator a(o);
  ASSERT_EQ(replay_range(p, a, 0, 3), "");
  int64_t a_at = address_of(a, id_of(p, "a"));
  ASSERT_EQ(replay_range(p, a, 3, p.events.size()), "");
  EXPECT_EQ(address_of(a, id_of(p, "d")), a_at);
  EXPECT_EQ(a.stats().reserved_bytes, 20 * MiB);
}

TEST(CachingAllocator, ExpandableSegmentGrowsByMappingPagesBehindAFreeTail) {
  // +a:30 MiB -> map 2 pages (40 MiB): [a 30][free 10][unmapped].
  // +b:15 MiB -> no cached block >= 15 MiB; the free 10 MiB tail plus the unmapped range has room:
  //   map ceil(5/20) = 1 more page (reserved 60 MiB), merge: [a 30][free 30]; split b:
  //   [a 30][b 15][free 15][unmapped].
  Program p = program_from_script(fmt::format("+a:{} +b:{}", 30 * MiB, 15 * MiB));
  CachingAllocatorOptions o;
  o.expandable_segments = true;
  CachingAllocator a(o);
  ASSERT_EQ(replay(p, a), "");
  EXPECT_EQ(a.stats().reserved_bytes, 60 * MiB);
  EXPECT_EQ(address_of(a, id_of(p, "b")), address_of(a, id_of(p, "a")) + 30 * MiB);
  EXPECT_EQ(a.stats().device_allocs, 2);
  EXPECT_EQ(a.stats().segments, 1);
}

TEST(CachingAllocator, ExpandableSegmentsUnmapFreePagesOnOutOfMemory) {
  // capacity 60 MiB, expandable segments (20 MiB large pages).
  // +a:30, +b:15 -> as above: reserved 60 MiB, [a 0-30][b 30-45][free 45-60][unmapped 60-].
  // -a -> [free 0-30][b][free 45-60].
  // +c:35 MiB -> no cached block >= 35. Growing behind [free 45-60] needs 1 more page: 80 > 60.
  //   release_cached_blocks unmaps whole free pages: [0,20) is unmapped (reserved 40 MiB); [20,30)
  //   and [45,60) hold no whole page. Retry: the unmapped [0,20) + free [20,30) give only 30 MiB
  //   before b; behind [free 45-60] one page is mapped again (reserved 60): c = [45, 80), exactly
  //   35 MiB. No OOM; one retry, one unmap call.
  // +d:30 MiB -> [unmapped 0-20][free 20-30] has room for 30 MiB but mapping [0,20) makes 80 > 60;
  //   releasing frees nothing more (no whole free page): OOM at d.
  Program p = program_from_script(
      fmt::format("+a:{} +b:{} | -a | +c:{} | +d:{}", 30 * MiB, 15 * MiB, 35 * MiB, 30 * MiB));
  CachingAllocatorOptions o;
  o.expandable_segments = true;
  o.capacity_bytes = 60 * MiB;
  CachingAllocator a(o);
  ASSERT_EQ(replay_range(p, a, 0, 4), "");
  EXPECT_FALSE(a.stats().oom);
  EXPECT_EQ(a.stats().reserved_bytes, 60 * MiB);
  EXPECT_EQ(address_of(a, id_of(p, "c")), address_of(a, id_of(p, "b")) + 15 * MiB);
  EXPECT_EQ(a.stats().alloc_retries, 1);
  EXPECT_EQ(a.stats().device_frees, 1);
  EXPECT_EQ(a.stats().allocated_bytes, 50 * MiB);
  ASSERT_EQ(replay_range(p, a, 4, 5), "");
  EXPECT_TRUE(a.stats().oom);
  EXPECT_EQ(a.stats().oom_buffer, id_of(p, "d"));
  EXPECT_EQ(a.stats().oom_reserved_bytes, 60 * MiB);
}

TEST(CachingAllocator, EmptyCacheReturnsWholeSegmentsOnly) {
  // +a:1000 (small segment, 2 MiB), +b:3 MiB (20 MiB segment: [b 3][free 17]), +c:18 MiB (the
  // 17 MiB cached block is too small: its own 18 MiB segment). reserved 40 MiB. -b -c: b merges
  // back into a whole 20 MiB block; c's segment is whole.
  // empty_cache: both large segments are whole and free: released. The small segment still
  // holds a. reserved 2 MiB.
  Program p = program_from_script(fmt::format("+a:1000 +b:{} +c:{} | -b -c", 3 * MiB, 18 * MiB));
  CachingAllocator a;
  ASSERT_EQ(replay(p, a), "");
  EXPECT_EQ(a.stats().reserved_bytes, 40 * MiB);
  a.empty_cache();
  EXPECT_EQ(a.check_invariants(), "");
  EXPECT_EQ(a.stats().reserved_bytes, 2 * MiB);
  EXPECT_EQ(a.stats().device_frees, 2);
}

TEST(CachingAllocator, ACachedRemainderServesALaterRequest) {
  // +b:3 MiB -> 20 MiB segment [b 3][free 17]. +c:12 MiB -> best fit is the cached 17 MiB
  // remainder (remainder 5 MiB > 1 MiB: split again): no second segment. reserved 20 MiB.
  Program p = program_from_script(fmt::format("+b:{} +c:{}", 3 * MiB, 12 * MiB));
  CachingAllocator a;
  ASSERT_EQ(replay(p, a), "");
  EXPECT_EQ(a.stats().reserved_bytes, 20 * MiB);
  EXPECT_EQ(address_of(a, id_of(p, "c")), address_of(a, id_of(p, "b")) + 3 * MiB);
}

TEST(CachingAllocator, ZeroByteBuffersTakeNoBlock) {
  Program p = program_from_script("+a:0 +b:100 -a -b");
  CachingAllocator a;
  ASSERT_EQ(replay(p, a), "");
  EXPECT_EQ(a.stats().reserved_bytes, 2 * MiB);
  EXPECT_EQ(a.stats().peak_allocated_bytes, 512);
  EXPECT_EQ(a.stats().device_allocs, 1);
}

TEST(CachingAllocator, RejectsOptionsPyTorchRejects) {
  CachingAllocatorOptions o;
  o.max_split_size_bytes = 10 * MiB;  // max_split_size_mb:10 is refused by PyTorch
  EXPECT_THROW(CachingAllocator{o}, InputError);
  o = {};
  o.capacity_bytes = -1;
  EXPECT_THROW(CachingAllocator{o}, InputError);
}

TEST(CachingAllocator, DrivenBySimulateReportsTheReservedPeak) {
  // The driver (simulate) sees the same footprint: the reserved peak, above the exact peak.
  // +a:1000 +b:3 MiB | -a +c:5 MiB | -b -c
  //   exact live peak: 3 MiB + 5 MiB = 8 MiB (after +c).
  //   reserved: 2 MiB (a) + 20 MiB (b's segment; c = 5 MiB fits in the 17 MiB remainder) = 22 MiB.
  Program p =
      program_from_script(fmt::format("+a:1000 +b:{} | -a +c:{} | -b -c", 3 * MiB, 5 * MiB));
  CachingAllocator a;
  SimResult r = simulate(p, &a);
  EXPECT_EQ(r.peak.bytes, 8 * MiB);
  EXPECT_EQ(r.footprint_peak, 22 * MiB);
  EXPECT_EQ(a.stats().peak_reserved_bytes, 22 * MiB);
  EXPECT_EQ(a.check_invariants(), "");
}

TEST(CachingAllocator, RandomScriptsKeepTheInvariants) {
  // A deterministic pseudo-random stress of all modes, for the oracles only.
  for (int mode = 0; mode < 4; ++mode) {
    CachingAllocatorOptions o;
    o.expandable_segments = mode & 1;
    if (mode & 2) {
      o.max_split_size_bytes = 24 * MiB;
      o.capacity_bytes = 256 * MiB;
    }
    std::string script;
    uint64_t state = 12345 + static_cast<uint64_t>(mode);
    auto next = [&state]() {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      return state >> 33;
    };
    std::vector<int> live;
    for (int i = 0; i < 400; ++i) {
      if (!live.empty() && next() % 3 == 0) {
        size_t k = next() % live.size();
        script += fmt::format(" -b{}", live[k]);
        live.erase(live.begin() + static_cast<long>(k));
      } else {
        int64_t sizes[] = {300, 4096, 700 * KiB, 3 * MiB, 9 * MiB, 15 * MiB, 33 * MiB};
        int64_t bytes = sizes[next() % 7] + static_cast<int64_t>(next() % 4096);
        script += fmt::format(" +b{}:{}", i, bytes);
        live.push_back(i);
      }
    }
    Program p = program_from_script(script);
    CachingAllocator a(o);
    EXPECT_EQ(replay(p, a), "") << "mode " << mode;
  }
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
