// data/cuda_context.json: published CUDA context sizes. Every row names its source and how its
// bytes were derived; kContextLazyBytes and kContextEagerBytes (estimate/device_memory.h, the
// eager default) are the pytorch/pytorch#86509 rows, re-derived here. The lazy default is the
// measured stack's (estimate/cuda_context.h, tests/cuda_context_test.cc).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "estimate/device_memory.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

nlohmann::json table() {
  std::ifstream f(std::string(HEADROOM_SOURCE_DIR) + "/data/cuda_context.json");
  return nlohmann::json::parse(f);
}

const nlohmann::json& row(const nlohmann::json& t, const std::string& id) {
  for (const nlohmann::json& r : t.at("rows")) {
    if (r.at("id") == id) return r;
  }
  throw std::runtime_error("no row " + id);
}

TEST(CudaContextTable, EveryRowHasASourceAndADerivation) {
  nlohmann::json t = table();
  ASSERT_GE(t.at("rows").size(), 4u);
  for (const nlohmann::json& r : t.at("rows")) {
    for (const char* field : {"id", "module_loading", "cuda", "pytorch", "gpu", "driver", "published", "derivation", "source"}) {
      EXPECT_TRUE(r.contains(field) && r.at(field).is_string() && !r.at(field).get<std::string>().empty())
          << r.dump() << " lacks " << field;
    }
    EXPECT_EQ(r.at("source").get<std::string>().rfind("https://", 0), 0u) << r.at("id");
    EXPECT_GT(r.at("bytes").get<int64_t>(), 0) << r.at("id");
    EXPECT_EQ(r.at("bytes").get<int64_t>() % (1 << 20), 0) << r.at("id") << ": whole MiB";
  }
}

TEST(CudaContextTable, ConstantsAreThePyTorch86509Measurements) {
  nlohmann::json t = table();
  // The PR's test tensor, torch.randn(20, 16, 50, 100): 1,600,000 fp32 = 6,400,000 bytes, a
  // large-pool request (> 1 MiB) below 10 MiB, so the caching allocator reserves a 20 MiB segment.
  const int64_t segment = 20LL << 20;
  auto mib_rounded = [](int64_t bytes) { return ((bytes + (1 << 19)) >> 20) << 20; };
  // Lazy: 287,047,680 - 20,971,520 = 266,076,160 = 253.75 MiB -> 254 MiB.
  EXPECT_EQ(mib_rounded(287047680 - segment), 254LL << 20);
  EXPECT_EQ(row(t, "pytorch-86509-lazy").at("bytes").get<int64_t>(), kContextLazyBytes);
  EXPECT_EQ(kContextLazyBytes, 254LL << 20);
  // Eager: 666,632,192 - 20,971,520 = 645,660,672 = 615.75 MiB -> 616 MiB.
  EXPECT_EQ(mib_rounded(666632192 - segment), 616LL << 20);
  EXPECT_EQ(row(t, "pytorch-86509-eager").at("bytes").get<int64_t>(), kContextEagerBytes);
  EXPECT_EQ(kContextEagerBytes, 616LL << 20);
  // The Hugging Face V100 page: 1343 MiB device used with one 2 MiB small-pool segment.
  EXPECT_EQ(row(t, "hf-model-memory-anatomy-v100").at("bytes").get<int64_t>(), (1343LL - 2) << 20);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
