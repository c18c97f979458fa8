// The exact heap driver alone, on raw Alloc/Free scripts.
#include <gtest/gtest.h>

#include "graph_dsl.h"
#include "sim/simulate.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::check_oracles;
using testing::program_from_script;

TEST(Simulate, PeakIsLargestLiveSum) {
  // +a:100 +b:50 | -a +c:70 | -b -c
  // live: 100, 150 (peak), 50, 120, 70, 0
  Program p = program_from_script("+a:100 +b:50 | -a +c:70 | -b -c");
  SimResult r = simulate(p);
  EXPECT_EQ(r.peak.bytes, 150);
  EXPECT_EQ(r.peak.step, 0);
  EXPECT_EQ(r.peak.event, 1);
  EXPECT_EQ(r.end_bytes, 0);
  EXPECT_EQ(check_oracles(p), "");
}

TEST(Simulate, FirstOccurrenceOfATiedPeakWins) {
  // live: 10, 0, 10 -> the peak of 10 is reported at event 0
  Program p = program_from_script("+a:10 -a | +b:10");
  SimResult r = simulate(p);
  EXPECT_EQ(r.peak.bytes, 10);
  EXPECT_EQ(r.peak.event, 0);
}

TEST(Simulate, LivePeakAloneIsTheSimulatedPeak) {
  // live: 100, 150 (peak), 50, 120, 70, 0; a tie later does not move it.
  for (const char* script : {"+a:100 +b:50 | -a +c:70 | -b -c", "+a:10 -a | +b:10", "+a:5 +b:7 -a +c:5 -b -c +d:12"}) {
    Program p = program_from_script(script);
    EXPECT_EQ(live_peak_bytes(p), simulate(p).peak.bytes) << script;
  }
  EXPECT_EQ(live_peak_bytes(program_from_script("+a:100 +b:50 | -a +c:70 | -b -c")), 150);
}

TEST(Simulate, LiveAfterListsBuffersInAllocationOrder) {
  Program p = program_from_script("+a:1 +b:2 +c:3 -b");
  std::vector<BufferId> live = live_after(p, 3);
  ASSERT_EQ(live.size(), 2u);
  EXPECT_EQ(p.buffers[static_cast<size_t>(live[0])].name, "a");
  EXPECT_EQ(p.buffers[static_cast<size_t>(live[1])].name, "c");
}

TEST(Simulate, ValidateRejectsDoubleFree) {
  Program p = program_from_script("+a:1 -a -a");
  EXPECT_NE(check_oracles(p), "");
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
