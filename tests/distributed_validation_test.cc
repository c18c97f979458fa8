// Each DDP rank measured on the CPU (validation/measured_distributed.json, made by
// validation/distributed_cpu.py: PyTorch 1.13 DistributedDataParallel over gloo, one process per
// rank, live CPU tensor bytes by memtrace.py's profiler replay) against headroom's per-rank
// prediction, `estimate MODEL --device cpu --gpus N`: every rank exact to the byte. Without the
// Reducer's buckets (schedule/interpreter_ddp.cc) each prediction was short by exactly the
// trainable parameters' bytes, which the file records as gradient_bytes.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "estimate/estimate.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

TEST(DistributedValidation, EveryDdpRankIsPredictedToTheByte) {
  std::ifstream f(std::string(HEADROOM_SOURCE_DIR) + "/validation/measured_distributed.json");
  ASSERT_TRUE(f.good()) << "validation/measured_distributed.json is missing: run validation/distributed_cpu.py --record";
  nlohmann::json doc = nlohmann::json::parse(f);
  ASSERT_GE(doc.at("cases").size(), 3u);
  for (const nlohmann::json& c : doc.at("cases")) {
    EstimateOptions o;
    o.model = c.at("model").get<std::string>();
    o.batch = c.at("batch").get<int64_t>();
    if (!c.at("seq").is_null()) o.seq = c.at("seq").get<int64_t>();
    auto opt = parse_optimizer(c.at("optimizer").get<std::string>());
    ASSERT_TRUE(opt.has_value());
    o.optimizer = *opt;
    o.foreach = c.at("foreach").get<bool>();
    o.device = "cpu";
    o.parallel.gpus = c.at("world_size").get<int64_t>();
    Result<Estimate> e = estimate(o);
    ASSERT_TRUE(e.ok()) << c.at("id") << ": " << e.error();
    Result<Estimate> single = [&] {
      EstimateOptions one = o;
      one.parallel = {};
      return estimate(one);
    }();
    ASSERT_TRUE(single.ok());
    for (const nlohmann::json& rank : c.at("measured")) {
      const int64_t measured = rank.at("peak_bytes").get<int64_t>();
      EXPECT_EQ(e.value().peak_bytes, measured) << c.at("id") << " rank " << rank.at("rank");
      // The buckets are the difference from one process's program: the gradients again.
      EXPECT_EQ(e.value().peak_bytes - single.value().peak_bytes, rank.at("gradient_bytes").get<int64_t>()) << c.at("id");
    }
  }
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
