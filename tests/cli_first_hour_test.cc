// A new user's first hour (issue 14): bare `headroom`, help and --version, options that do not
// apply, sizes without a unit, the default safety margin, and files named when written.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli_runner.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::CliRun;
using testing::run_cli;
using testing::expect_usage_error;

TEST(CliHelp, BareHeadroomAndHelpPrintTheCommandsWithExamples) {
  CliRun bare = run_cli("");
  EXPECT_EQ(bare.code, 0) << bare.err;
  EXPECT_EQ(bare.err, "");
  for (const char* cmd : {"estimate MODEL", "fit MODEL --gpu NAME", "plan MODEL", "report MODEL -o FILE", "pack MODEL...",
                          "models", "gpus", "help [COMMAND]"}) {
    EXPECT_NE(bare.out.find(cmd), std::string::npos) << cmd << "\n" << bare.out;
  }
  EXPECT_NE(bare.out.find("e.g. headroom estimate resnet50 --batch 32"), std::string::npos) << bare.out;
  CliRun help = run_cli("help");
  EXPECT_EQ(help.code, 0);
  EXPECT_EQ(help.out, bare.out);
}

TEST(CliHelp, HelpOfACommandListsItsOptions) {
  CliRun r = run_cli("help estimate");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("--batch"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--margin"), std::string::npos) << r.out;
  expect_usage_error("help nosuch", "help: unknown command 'nosuch'");
}

TEST(CliHelp, VersionNamesTheRelease) {
  CliRun r = run_cli("--version");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("headroom ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find('.'), std::string::npos) << r.out;
}

// README's "Commands" block (between the two markers) is exactly what `headroom help` prints.
TEST(CliHelp, ReadmeAgreesWithHelp) {
  std::ifstream in(std::string(HEADROOM_SOURCE_DIR) + "/README.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string readme = ss.str();
  const std::string begin = "<!-- headroom help -->\n```\n", end = "```\n<!-- /headroom help -->";
  size_t b = readme.find(begin), e = readme.find(end);
  ASSERT_NE(b, std::string::npos) << "README.md lacks the " << begin << " block";
  ASSERT_NE(e, std::string::npos);
  std::string block = readme.substr(b + begin.size(), e - b - begin.size());
  CliRun help = run_cli("help");
  // The first line carries the version; the rest must match to the byte.
  auto tail = [](const std::string& s) { return s.substr(s.find('\n') + 1); };
  EXPECT_EQ(tail(block), tail(help.out));
}

TEST(CliFirstHour, OptionsThatDoNotApplyAreErrors) {
  // `estimate resnet50 --seq 128` printed "seq 128" and changed nothing.
  expect_usage_error("estimate resnet50 --seq 128", "--seq applies to sequence models");
  expect_usage_error("estimate resnet50 --allow-unknown", "--allow-unknown applies to ONNX files");
  expect_usage_error("estimate resnet50 --margin 5%", "--margin applies with a GPU");
}

TEST(CliFirstHour, OnnxSequenceAxisFollowsSeqOrSaysWhichDim) {
  // The GPT-2 export has its sequence fixed at 128: --seq names the dimensions there are.
  const std::string dir = std::string(HEADROOM_SOURCE_DIR) + "/tests/data/onnx/";
  expect_usage_error("estimate " + dir + "gpt2_training.onnx --seq 64",
                     "--seq: no symbolic dimension of the model's inputs is named like a sequence");
}

TEST(CliFirstHour, SizesWithoutAUnitAreRefused) {
  // `--gpu-memory 24` meant 24 bytes: "does not fit: 3.29 GiB short".
  expect_usage_error("estimate resnet18 --gpu-memory 24", "'24' has no unit: write e.g. 24GiB or 24GB");
  expect_usage_error("plan resnet18 --budget 8", "'8' has no unit");
}

TEST(CliFirstHour, FitKeepsAFivePercentMarginByDefault) {
  CliRun r = run_cli("fit resnet18 --gpu T4");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("with a 5% margin (kept free: fragmentation drift"), std::string::npos) << r.out;
  CliRun off = run_cli("fit resnet18 --gpu T4 --margin 0%");
  ASSERT_EQ(off.code, 0) << off.err;
  EXPECT_EQ(off.out.find("margin"), std::string::npos) << off.out;
  CliRun est = run_cli("estimate resnet18 --gpu T4");
  ASSERT_EQ(est.code, 0) << est.err;
  EXPECT_NE(est.out.find("usable with a 5% margin"), std::string::npos) << est.out;
}

TEST(CliFirstHour, WrittenFilesAreNamed) {
  const std::string path = std::string(HEADROOM_BINARY_DIR) + "/first_hour_report.html";
  std::filesystem::remove(path);
  CliRun r = run_cli("report resnet18 -o " + path);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("headroom: wrote " + path + " (", 0), 0u) << r.err;
  EXPECT_TRUE(std::filesystem::exists(path));
  std::filesystem::remove(path);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
