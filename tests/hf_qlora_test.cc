// --qlora SPEC: the QLoRA recipe as one option (options/run_args.h expand_qlora): it must give
// exactly the estimate of the four options it stands for, and refuse options that contradict it.
#include <gtest/gtest.h>

#include <string>

#include "cli_runner.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using headroom::testing::CliRun;
using headroom::testing::expect_usage_error;
using headroom::testing::run_cli;

std::string tiny() { return std::string(HEADROOM_SOURCE_DIR) + "/validation/hf-configs/tiny-llama-gqa.json"; }

const std::string kSpec = "r=8,alpha=16,targets=q_proj,v_proj";

TEST(HfQlora, IsNf4BaseBf16AdaptersAndPagedAdamw8bit) {
  CliRun shortcut = run_cli("estimate " + tiny() + " --seq 16 --batch 2 --json --qlora " + kSpec);
  ASSERT_EQ(shortcut.code, 0) << shortcut.err;
  CliRun spelled = run_cli("estimate " + tiny() + " --seq 16 --batch 2 --json --lora " + kSpec +
                           " --weights nf4 --precision bf16 --optimizer paged-adamw8bit");
  ASSERT_EQ(spelled.code, 0) << spelled.err;
  EXPECT_EQ(shortcut.out, spelled.out);
  EXPECT_NE(shortcut.out.find("\"optimizer\": \"paged-adamw8bit\""), std::string::npos) << shortcut.out.substr(0, 600);
  EXPECT_NE(shortcut.out.find("\"precision\": \"bf16\""), std::string::npos) << shortcut.out.substr(0, 600);
  // r = 8 on q_proj (256 -> 256) and v_proj (256 -> 128) of 2 layers:
  //   (8 x 256 + 256 x 8) + (8 x 256 + 128 x 8) = 7,168 per layer, 14,336 in all.
  EXPECT_NE(shortcut.out.find("\"trainable_parameter_count\": 14336"), std::string::npos) << shortcut.out.substr(0, 600);
  // The same values given explicitly do not conflict.
  CliRun same = run_cli("estimate " + tiny() + " --seq 16 --batch 2 --json --qlora " + kSpec +
                        " --weights nf4 --precision bf16 --optimizer paged-adamw8bit");
  ASSERT_EQ(same.code, 0) << same.err;
  EXPECT_EQ(same.out, shortcut.out);
}

TEST(HfQlora, ConflictingOptionsAreOneLineErrors) {
  const std::string base = "estimate " + tiny() + " --seq 16 --qlora " + kSpec;
  expect_usage_error(base + " --lora " + kSpec, "--qlora is --lora on an nf4 base");
  expect_usage_error(base + " --weights int8", "conflicts with --weights int8");
  expect_usage_error(base + " --optimizer adamw", "conflicts with --optimizer adamw");
  expect_usage_error(base + " --precision fp16", "conflicts with --precision fp16");
  expect_usage_error(base + " --mode infer", "--qlora is a fine-tuning recipe");
  expect_usage_error("estimate " + tiny() + " --seq 16 --qlora r=8", "--qlora: --lora needs r=N and targets");
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
