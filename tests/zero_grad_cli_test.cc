// --zero-grad and --framework hf-trainer on the command line: what they set, and the errors of
// values that do not exist or do not apply. The bytes themselves are pinned in
// MlpArithmetic.ZeroGradZerosKeepsGradientsIntoTheNextStep.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace {
namespace HEADROOM_UNITY_ID {

using headroom::testing::CliRun;
using headroom::testing::run_cli;
using headroom::testing::expect_usage_error;

nlohmann::json estimate_json(const std::string& args) {
  CliRun r = run_cli("estimate " + args + " --json");
  EXPECT_EQ(r.code, 0) << args << " -> " << r.err;
  return nlohmann::json::parse(r.out);
}

TEST(ZeroGradCli, BadValuesAndModesAreErrors) {
  expect_usage_error("estimate mlp --zero-grad sometimes", "--zero-grad must be none or zeros");
  expect_usage_error("estimate mlp --mode infer --zero-grad zeros", "--zero-grad applies to --mode train");
  expect_usage_error("estimate mlp --framework keras", "--framework must be hf-trainer");
  expect_usage_error("estimate mlp --mode infer --framework hf-trainer", "applies to --mode train");
}

TEST(ZeroGradCli, KeptGradientsRaiseTheSecondStepByTheGradientBytes) {
  // mlp (16 x Linear(1024, 1024)): 16 x (1024 x 1024 + 1024) x 4 = 67,174,400 bytes of gradients.
  // SGD's peak is in step 2's backward with the kept gradients on top.
  nlohmann::json freed = estimate_json("mlp --batch 8 --optimizer sgd");
  nlohmann::json kept = estimate_json("mlp --batch 8 --optimizer sgd --zero-grad zeros");
  EXPECT_EQ(kept["steps"][1]["phase_peaks"]["forward"].get<int64_t>() -
                freed["steps"][1]["phase_peaks"]["forward"].get<int64_t>(),
            67174400);
  EXPECT_EQ(kept["steps"][0]["peak_bytes"], freed["steps"][0]["peak_bytes"]);
}

TEST(ZeroGradCli, HfTrainerIsAdamwSingleTensorWithKeptGradients) {
  nlohmann::json hf = estimate_json("mlp --batch 8 --framework hf-trainer");
  nlohmann::json spelled = estimate_json("mlp --batch 8 --optimizer adamw --no-foreach --zero-grad zeros");
  EXPECT_EQ(hf["optimizer"], "adamw");
  EXPECT_EQ(hf["foreach"], false);
  EXPECT_EQ(hf, spelled);
  // Explicit flags win over the framework's defaults.
  nlohmann::json sgd = estimate_json("mlp --batch 8 --framework hf-trainer --optimizer sgd --foreach");
  EXPECT_EQ(sgd["optimizer"], "sgd");
  EXPECT_EQ(sgd["foreach"], true);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
