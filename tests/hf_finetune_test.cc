// Fine-tuning Hugging Face decoders with frozen weights (--freeze) and LoRA adapters (--lora):
// trainable parameter counts by hand, and training-step peaks against validation/hf_lora.py's
// CPU measurements (PyTorch 1.13, AdamW single-tensor), to the byte.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "estimate/estimate.h"
#include "frontends/model_source.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using headroom::testing::CliRun;
using headroom::testing::run_cli;

std::string tiny(const std::string& name) { return std::string(HEADROOM_SOURCE_DIR) + "/validation/hf-configs/" + name; }

EstimateOptions training(const std::string& config, int64_t batch, int64_t seq) {
  EstimateOptions o;
  o.model = config;
  o.batch = batch;
  o.seq = seq;
  o.mode = RunMode::Training;
  o.optimizer = OptimizerKind::AdamW;
  o.foreach = false;
  o.device = "cpu";
  o.attention = AttentionKind::Eager;
  return o;
}

Result<Estimate> run(EstimateOptions o) {
  ModelSourceOptions src;
  src.precision_given = true;
  select_frontend(o, src);
  return estimate(o);
}

TEST(HfFinetune, LoraTrainsOnlyTheAdapters) {
  // tiny-llama-gqa (hidden 256, 2 layers, q 256 -> 256, v 256 -> 128), r = 8 on q_proj and v_proj:
  //   q: lora_A 8 x 256 + lora_B 256 x 8 = 4,096; v: 8 x 256 + 128 x 8 = 3,072; x 2 layers = 14,336.
  EstimateOptions o = training(tiny("tiny-llama-gqa.json"), 2, 32);
  o.lora = LoraConfig{8, 16.0, {"q_proj", "v_proj"}, 0.0};
  Result<Estimate> e = run(o);
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_EQ(e.value().trainable_parameter_count, 14'336);
  // The base model: embed 1000 x 256 = 256,000; a layer: q, o 2 x 256^2 = 131,072, k, v
  // 2 x 128 x 256 = 65,536, mlp 3 x 256 x 688 = 528,384, norms 512 = 725,504 (x 2); norm 256;
  // lm_head 256,000 -> 1,963,264, plus the adapters.
  EXPECT_EQ(e.value().parameter_count, 1'963'264 + 14'336);
  // Optimizer state: AdamW's exp_avg and exp_avg_sq of the adapters only (fp32), and a 4-byte step
  // per adapter tensor: 2 x 14,336 x 4 + 8 x 4 = 114,720 bytes, alive at the step-2 peak.
  EXPECT_EQ(e.value().breakdown_at_peak[static_cast<size_t>(Category::OptimizerState)], 114'720);
}

TEST(HfFinetune, BadLoraAndFreezeAreOneLineErrors) {
  EstimateOptions o = training(tiny("tiny-llama-gqa.json"), 1, 8);
  o.lora = LoraConfig{8, 16.0, {"q_proj", "c_attn"}, 0.0};
  Result<Estimate> e = run(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().find("no nn.Linear named 'c_attn'"), std::string::npos) << e.error();
  EstimateOptions f = training(tiny("tiny-llama-gqa.json"), 1, 8);
  f.freeze = {"nothing_like_this"};
  e = run(f);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().find("matches no parameter"), std::string::npos) << e.error();
  f.freeze = {"."};
  e = run(f);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().find("every parameter is frozen"), std::string::npos) << e.error();
  f.freeze = {"(("};
  e = run(f);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().find("not a regular expression"), std::string::npos) << e.error();
  for (const char* bad : {"--lora r=8", "--lora targets=q_proj", "--lora r=8,targets=q_proj,rank=3", "--lora r=0,targets=q_proj",
                          "--lora r=8,alpha=x,targets=q_proj"}) {
    CliRun r = run_cli("estimate " + tiny("tiny-llama-gqa.json") + " --seq 8 " + bad);
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_EQ(r.out, "") << bad;
    EXPECT_NE(r.err.find("--lora"), std::string::npos) << bad << ": " << r.err;
  }
  CliRun r = run_cli("estimate resnet18 --lora r=8,targets=fc");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--lora applies to Hugging Face"), std::string::npos) << r.err;
}

TEST(HfFinetune, FreezeWorksOnEveryModel) {
  // resnet18 with its first convolution frozen: conv1 is 64 x 3 x 7 x 7 = 9,408 parameters.
  EstimateOptions o;
  o.model = "resnet18";
  o.freeze = {"^conv1\\."};
  Result<Estimate> e = estimate(o);
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_EQ(e.value().parameter_count - e.value().trainable_parameter_count, 9'408);
  CliRun r = run_cli("estimate resnet18 --freeze '^conv1\\.' --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"trainable_parameter_count\": 11680104"), std::string::npos) << r.out.substr(0, 400);
}

// validation/measured_lora.json: measured by validation/hf_lora.py.
TEST(HfFinetune, MatchesTheCpuMeasurementToTheByte) {
  std::ifstream f(std::string(HEADROOM_SOURCE_DIR) + "/validation/measured_lora.json");
  ASSERT_TRUE(f.good());
  nlohmann::json j = nlohmann::json::parse(f);
  ASSERT_GE(j.at("cases").size(), 5u);
  for (const nlohmann::json& c : j.at("cases")) {
    EstimateOptions o = training(tiny(c.at("config").get<std::string>()), c.at("batch").get<int64_t>(), c.at("seq").get<int64_t>());
    if (!c.at("lora").is_null()) {
      const nlohmann::json& l = c.at("lora");
      o.lora = LoraConfig{l.at("r").get<int64_t>(), l.at("alpha").get<double>(),
                          l.at("targets").get<std::vector<std::string>>(), l.at("dropout").get<double>()};
    }
    if (!c.at("freeze").is_null()) o.freeze = {c.at("freeze").get<std::string>()};
    Result<Estimate> e = run(o);
    ASSERT_TRUE(e.ok()) << e.error();
    std::string id = c.at("config").get<std::string>() + " b" + std::to_string(o.batch) + " s" + std::to_string(*o.seq) +
                     (o.lora ? " lora" : " freeze");
    EXPECT_EQ(e.value().trainable_parameter_count, c.at("trainable_parameters").get<int64_t>()) << id;
    EXPECT_EQ(e.value().parameter_count, c.at("parameters").get<int64_t>()) << id;
    EXPECT_EQ(e.value().peak_bytes, c.at("peak_bytes").get<int64_t>()) << id;
  }
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
