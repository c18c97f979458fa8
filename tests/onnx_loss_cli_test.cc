// --loss expressions at the command line: ONNX files take them, built-in models keep their three
// names, and every malformed or inapplicable spec is a usage error (exit 2, one line).
#include <gtest/gtest.h>

#include <string>

#include "cli_runner.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::CliRun;
using testing::expect_usage_error;
using testing::run_cli;

const std::string kTiny = std::string(HEADROOM_SOURCE_DIR) + "/tests/data/onnx/tiny_cnn_training.onnx";

TEST(OnnxLossCli, ExpressionsRunOnOnnxFiles) {
  CliRun sum = run_cli("estimate " + kTiny + " --batch 4 --loss 'ce:logits + 0.5*smooth-l1:0'");
  EXPECT_EQ(sum.code, 0) << sum.err;
  EXPECT_EQ(sum.err, "");
  CliRun plain = run_cli("estimate " + kTiny + " --batch 4 --loss bce");
  EXPECT_EQ(plain.code, 0) << plain.err;
}

TEST(OnnxLossCli, BadSpecsAreUsageErrors) {
  expect_usage_error("estimate " + kTiny + " --loss 'ce+'", "empty term");
  expect_usage_error("estimate " + kTiny + " --loss 'focal'", "unknown loss 'focal'");
  expect_usage_error("estimate " + kTiny + " --loss 'ce:nope'", "'nope' is not a graph output");
  expect_usage_error("estimate " + kTiny + " --loss none", "no floating-point scalar output");
  expect_usage_error("estimate " + kTiny + " --loss bce --mode infer", "--loss applies to --mode train");
  expect_usage_error("estimate resnet18 --loss 'ce+l1'", "--loss must be cross-entropy, next-token or mse");
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
