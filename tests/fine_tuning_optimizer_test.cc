// Optimizers beyond torch.optim (training/optimizer.h): the state each keeps, by hand.
// mlp:layers=1,dim=128: one Linear, weight [128, 128] (16,384 elements) and bias [128].
#include <gtest/gtest.h>

#include "estimate/estimate.h"
#include "schedule/build_program.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

struct StateAndTemps {
  int64_t state = 0;
  int64_t largest_temp = 0;
};

// Optimizer state allocated over two steps, and the largest optimizer-phase temporary.
StateAndTemps run(OptimizerKind k) {
  EstimateOptions o;
  o.model = "mlp:layers=1,dim=128";
  o.batch = 4;
  o.optimizer = k;
  Program p = build_program(build_graph(o, 4), schedule_options(o));
  StateAndTemps r;
  for (const Buffer& b : p.buffers) {
    if (b.category == Category::OptimizerState) r.state += b.bytes;
    if (b.category == Category::Temporaries && b.op == kNone) r.largest_temp = std::max(r.largest_temp, b.bytes);
  }
  return r;
}

TEST(FineTuningOptimizer, AdamW8bitKeepsOneBytePerMomentAndBlockAbsmax) {
  // weight: 16,384 >= 4096 elements: state1 + state2 1 byte each = 32,768; absmax1/2
  //   ceil(16384 / 2048) = 8 blocks x 4 bytes x 2 = 64; bias: 128 < 4096: fp32 state1/2
  //   2 x 128 x 4 = 1,024 -> 33,856 bytes (fp32 AdamW: 2 x 16,512 x 4 = 132,096; its `step`
  //   counters are CPU tensors on CUDA).
  EXPECT_EQ(run(OptimizerKind::AdamW8bit).state, 33'856);
  EXPECT_EQ(run(OptimizerKind::PagedAdamW8bit).state, 33'856);
  EXPECT_EQ(run(OptimizerKind::AdamW).state, 132'096);
}

TEST(FineTuningOptimizer, LionKeepsOneMomentAndTwoUpdateTemporaries) {
  // exp_avg like each parameter: (16,384 + 128) x 4 = 66,048; update_fn's clone and add result
  // are the weight's size (65,536 bytes each).
  StateAndTemps r = run(OptimizerKind::Lion);
  EXPECT_EQ(r.state, 66'048);
  EXPECT_EQ(r.largest_temp, 65'536);
}

TEST(FineTuningOptimizer, AdafactorFactorsMatrices) {
  // weight [128, 128]: exp_avg_sq_row [128] + exp_avg_sq_col [128] fp32 = 1,024; bias [128]:
  // exp_avg_sq 512 -> 1,536 bytes.
  StateAndTemps r = run(OptimizerKind::Adafactor);
  EXPECT_EQ(r.state, 1'536);
  EXPECT_EQ(r.largest_temp, 65'536);  // grad**2 + eps, the factored estimate: fp32 weight-sized
  EstimateOptions o;
  o.model = "mlp:layers=1,dim=128";
  o.optimizer = OptimizerKind::Adafactor;
  o.foreach = true;
  Result<Estimate> e = estimate(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().find("--foreach"), std::string::npos) << e.error();
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
