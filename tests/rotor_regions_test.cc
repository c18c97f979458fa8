// Rotor's persistent schedules read as nested checkpoint regions (plan/rotor_regions.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "plan/rotor_regions.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

std::vector<ChainOp> ops(const std::vector<std::string>& tokens) {
  std::vector<ChainOp> out;
  for (const std::string& t : tokens) out.push_back(parse_op_token(t));
  return out;
}

TEST(RotorRegions, StoreAllHasNoRegion) {
  EXPECT_TRUE(rotor_regions(ops({"Fall0", "Fall1", "Loss", "B1", "B0"})).empty());
}

TEST(RotorRegions, OneSweepIsOneRegion) {
  // Leaf 2 on [0, 2] of a 2-stage chain: stages 0..1 run without history keeping a_0, the loss,
  // then [0, 1] again with history.
  EXPECT_EQ(rotor_regions(ops({"Fck0", "Fn1", "Loss", "Fall0", "Fall1", "B1", "B0"})), (std::vector<SegmentRange>{{0, 1}}));
}

TEST(RotorRegions, ASweepInsideAReRunIsANestedRegion) {
  // 4 stages: sweep 0..3 (leaf 4), the loss; the re-run of [0, 3] takes leaf 2: sweep 0..1
  // inside it, [2, 3] with history, then [0, 1] with history. Then a sibling case: sweep 2..3
  // after a kept stage would be a region beside, not inside.
  EXPECT_EQ(rotor_regions(ops({"Fck0", "Fn1", "Fn2", "Fn3", "Loss", "Fck0", "Fn1", "Fall2", "Fall3", "B3", "B2", "Fall0", "Fall1",
                               "B1", "B0"})),
            (std::vector<SegmentRange>{{0, 3}, {0, 1}}));
  EXPECT_EQ(rotor_regions(ops({"Fall0", "Fck1", "Fn2", "Fck3", "Loss", "Fall3", "B3", "Fall1", "Fall2", "B2", "B1", "B0"})),
            (std::vector<SegmentRange>{{1, 2}, {3, 3}}));
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
