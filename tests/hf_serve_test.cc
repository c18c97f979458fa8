// fit --mode serve (estimate/serve.h): vLLM's KV block arithmetic on top of the simulated profile
// forward, and the option errors.
#include <gtest/gtest.h>

#include <string>

#include "cli_runner.h"
#include "estimate/serve.h"
#include "frontends/model_source.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using headroom::testing::CliRun;
using headroom::testing::run_cli;

const std::string kTiny = std::string(HEADROOM_SOURCE_DIR) + "/validation/hf-configs/tiny-llama-gqa.json";

TEST(HfServe, BlocksFollowVllmsFormula) {
  ServeOptions o;
  o.estimate.model = kTiny;
  ModelSourceOptions src;
  src.precision_given = true;
  select_frontend(o.estimate, src);
  o.estimate.precision = Precision::Bf16;
  o.estimate.mode = RunMode::Inference;
  GpuOptions gpu;
  gpu.gpu_memory = int64_t{1} << 30;
  gpu.context_bytes = 0;
  o.estimate.gpu = gpu;
  o.context = 300;
  o.kv_bytes_per_token = kv_cache_bytes_per_token(kTiny, DType::BF16);
  // 2 (k, v) x 2 layers x 4 kv heads x 32 x 2 bytes = 1,024 bytes per token; 16-token blocks 16,384.
  EXPECT_EQ(o.kv_bytes_per_token, 1'024);
  Result<ServeResult> r = serve_capacity(o);
  ASSERT_TRUE(r.ok()) << r.error();
  const ServeResult& s = r.value();
  EXPECT_EQ(s.block_bytes, 16'384);
  EXPECT_EQ(s.profile_tokens, 2'048);  // max(context, 2048)
  EXPECT_EQ(s.profile_sequences, 256);
  // available = total x gpu_memory_utilization - peak (torch's allocated peak + non-torch memory)
  EXPECT_EQ(s.usable_bytes, static_cast<int64_t>(0.9 * (int64_t{1} << 30)));
  EXPECT_EQ(s.kv_budget_bytes, s.usable_bytes - s.profile_peak_bytes - s.non_torch_bytes);
  EXPECT_EQ(s.num_blocks, s.kv_budget_bytes / 16'384);
  EXPECT_EQ(s.max_sequences, s.num_blocks / 19);  // ceil(300 / 16) = 19 blocks per sequence
  EXPECT_EQ(s.longest_context, s.num_blocks * 16);
  EXPECT_GT(s.num_blocks, 0);
}

TEST(HfServe, OptionErrors) {
  CliRun r = run_cli("fit " + kTiny + " --gpu L4 --mode serve");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--context"), std::string::npos) << r.err;
  r = run_cli("estimate " + kTiny + " --mode serve");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--mode serve applies to fit"), std::string::npos) << r.err;
  r = run_cli("fit gpt2 --gpu L4 --mode serve --context 512");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("Hugging Face decoder"), std::string::npos) << r.err;
  r = run_cli("fit " + kTiny + " --gpu L4 --context 512");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("apply to --mode serve"), std::string::npos) << r.err;
  r = run_cli("fit " + kTiny + " --gpu L4 --mode serve --context 512 --gpu-memory-utilization 1.5");
  EXPECT_EQ(r.code, 2);
  r = run_cli("fit " + kTiny + " --gpu L4 --mode serve --context 512 --json");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"num_blocks\""), std::string::npos);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
