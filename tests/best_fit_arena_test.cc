// The best-fit arena alone, on raw Alloc/Free scripts (offsets derived by hand), with an overlap
// oracle after every event and the exact peak as a lower bound at the end.
#include "sim/best_fit_arena.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "graph_dsl.h"
#include "sim/simulate.h"
#include "util/error.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::program_from_script;

BufferId id_of(const Program& p, const std::string& name) {
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    if (p.buffers[i].name == name) return static_cast<BufferId>(i);
  }
  ADD_FAILURE() << "no buffer " << name;
  return -1;
}

std::string replay(const Program& p, BestFitArena& arena) {
  for (size_t i = 0; i < p.events.size(); ++i) {
    const Event& e = p.events[i];
    if (e.kind == Event::Kind::Alloc)
      arena.alloc(e.buffer, p.buffers[static_cast<size_t>(e.buffer)].bytes);
    if (e.kind == Event::Kind::Free) arena.free(e.buffer);
    std::vector<ArenaPlacement> live = arena.live();
    for (size_t k = 0; k < live.size(); ++k) {
      if (k > 0 && live[k - 1].offset + live[k - 1].bytes > live[k].offset) {
        return fmt::format("event {}: buffers {} and {} overlap", i, live[k - 1].buffer,
                           live[k].buffer);
      }
      if (live[k].offset + live[k].bytes > arena.footprint()) {
        return fmt::format("event {}: buffer {} ends past the footprint", i, live[k].buffer);
      }
    }
  }
  if (arena.footprint() < simulate(p).peak.bytes) return "footprint below the exact peak";
  return "";
}

TEST(BestFitArena, PicksTheSmallestGapThatFits) {
  // alignment 1. +a:100 @0, +b:50 @100, +c:30 @150, +d:20 @180, +e:10 @200 (end 210).
  // -b -d: gaps [100,150) (50 B) and [180,200) (20 B).
  // +f:20 -> both gaps fit; the smaller (20 B at 180) wins.
  // +g:40 -> only the 50 B gap fits: offset 100.
  // +h:60 -> no gap: after the highest live buffer, offset 210. footprint 270.
  Program p = program_from_script("+a:100 +b:50 +c:30 +d:20 +e:10 | -b -d | +f:20 +g:40 +h:60");
  BestFitArena arena(BestFitArenaOptions{1});
  ASSERT_EQ(replay(p, arena), "");
  EXPECT_EQ(arena.offset(id_of(p, "f")), 180);
  EXPECT_EQ(arena.offset(id_of(p, "g")), 100);
  EXPECT_EQ(arena.offset(id_of(p, "h")), 210);
  EXPECT_EQ(arena.footprint(), 270);
}

TEST(BestFitArena, EqualGapsGoToTheLowestOffset) {
  // +a:10 @0 +b:10 @10 +c:10 @20 +d:10 @30; -a -c: two 10 B gaps at 0 and 20. +e:10 -> offset 0.
  Program p = program_from_script("+a:10 +b:10 +c:10 +d:10 | -a -c | +e:10");
  BestFitArena arena(BestFitArenaOptions{1});
  ASSERT_EQ(replay(p, arena), "");
  EXPECT_EQ(arena.offset(id_of(p, "e")), 0);
  EXPECT_EQ(arena.footprint(), 40);
}

TEST(BestFitArena, OffsetsAreAlignedAndSizesAreNot) {
  // alignment 64. +a:100 @0 (ends 100, next aligned offset 128). +b:10 @128 (ends 138 -> 192).
  // -a: gap [0,128) measured to b's offset. +c:128 fits exactly @0. +d:1 @192. footprint 193.
  Program p = program_from_script("+a:100 +b:10 | -a | +c:128 +d:1");
  BestFitArena arena;  // default alignment 64
  ASSERT_EQ(replay(p, arena), "");
  EXPECT_EQ(arena.offset(id_of(p, "b")), 128);
  EXPECT_EQ(arena.offset(id_of(p, "c")), 0);
  EXPECT_EQ(arena.offset(id_of(p, "d")), 192);
  EXPECT_EQ(arena.footprint(), 193);
}

TEST(BestFitArena, FreeSpaceAtTheEndIsReusedButTheHighWaterMarkStays) {
  // +a:100 @0 +b:100 @100 (footprint 200). -b: nothing after a. +c:50 -> after a, @100.
  // -a -c: empty. +d:150 @0. The footprint stays the high-water mark 200.
  Program p = program_from_script("+a:100 +b:100 | -b | +c:50 | -a -c | +d:150");
  BestFitArena arena(BestFitArenaOptions{1});
  ASSERT_EQ(replay(p, arena), "");
  EXPECT_EQ(arena.offset(id_of(p, "c")), 100);
  EXPECT_EQ(arena.offset(id_of(p, "d")), 0);
  EXPECT_EQ(arena.footprint(), 200);
}

TEST(BestFitArena, FragmentationCanExceedTheExactPeak) {
  // +a:100 @0 +b:100 @100 +c:100 @200; -a -c: only b is live, [0,100) is a hole.
  // +d:150 does not fit the hole: it goes after the highest live buffer (b), @200.
  // footprint 350 > exact peak 300 (a+b+c): the 100 B hole is wasted.
  Program p = program_from_script("+a:100 +b:100 +c:100 | -a -c | +d:150");
  BestFitArena arena(BestFitArenaOptions{1});
  ASSERT_EQ(replay(p, arena), "");
  EXPECT_EQ(arena.offset(id_of(p, "d")), 200);
  EXPECT_EQ(arena.footprint(), 350);
  EXPECT_EQ(simulate(p).peak.bytes, 300);
}

TEST(BestFitArena, ZeroByteBuffersOccupyNothing) {
  Program p = program_from_script("+a:0 +b:10 -a +c:0 -b -c");
  BestFitArena arena(BestFitArenaOptions{1});
  ASSERT_EQ(replay(p, arena), "");
  EXPECT_EQ(arena.footprint(), 10);
}

TEST(BestFitArena, DrivenBySimulate) {
  Program p = program_from_script("+a:100 +b:50 | -a +c:60 | -b -c");
  BestFitArena arena(BestFitArenaOptions{1});
  SimResult r = simulate(p, &arena);
  // a @0, b @100; -a; c:60 fits the 100 B gap @0. Footprint 150 = exact peak 150.
  EXPECT_EQ(r.footprint_peak, 150);
  EXPECT_EQ(r.peak.bytes, 150);
}

TEST(BestFitArena, RejectsAZeroAlignment) {
  EXPECT_THROW(BestFitArena(BestFitArenaOptions{0}), InputError);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
