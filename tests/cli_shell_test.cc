// The CLI in a shell: the generated bash completion completes commands, options and values;
// the man page covers every command; the progress line appears on a terminal only, erases
// itself, and --quiet silences it and the "wrote FILE" notes.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>

#include "cli_runner.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::CliRun;
using testing::expect_usage_error;
using testing::run_cli;

std::string shell_output(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  pclose(p);
  return out;
}

// What bash offers for the words typed so far (the last one being completed).
std::string bash_complete(const std::string& script, const std::string& words) {
  return shell_output("bash -c 'source " + script + "; COMP_WORDS=(" + words +
                      "); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _headroom; echo \"${COMPREPLY[*]}\"'");
}

class BashCompletion : public ::testing::Test {
 protected:
  void SetUp() override {
    CliRun r = run_cli("completion bash");
    ASSERT_EQ(r.code, 0) << r.err;
    // One file per test: ctest -j runs this fixture's tests side by side, and a shared file was
    // truncated by one test's SetUp while the other's bash sourced it ("_headroom: command not found").
    script_ = ::testing::TempDir() + "headroom_completion_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".bash";
    std::ofstream(script_) << r.out;
  }
  std::string script_;
};

TEST_F(BashCompletion, CompletesCommandsOptionsAndValues) {
  EXPECT_EQ(bash_complete(script_, "headroom est"), "estimate\n");
  EXPECT_EQ(bash_complete(script_, "headroom estimate resnet50 --prec"), "--precision\n");
  EXPECT_EQ(bash_complete(script_, "headroom estimate resnet50 --precision amp"), "amp-fp16 amp-bf16\n");
  EXPECT_EQ(bash_complete(script_, "headroom fit gpt2 --gpu H100-S"), "H100-SXM\n");
  EXPECT_EQ(bash_complete(script_, "headroom plan gpt2 --strategy offl"), "offload offload+checkpoint\n");
  // A model name at the position of an argument (files too, none match here).
  EXPECT_EQ(bash_complete(script_, "headroom estimate resnet1"), "resnet18 resnet101 resnet152\n");
}

TEST_F(BashCompletion, OffersEveryOptionOfACommand) {
  // Options of each command, including the rarely typed ones, come from the option tree.
  EXPECT_NE(bash_complete(script_, "headroom estimate x --cuda-con").find("--cuda-context"), std::string::npos);
  EXPECT_EQ(bash_complete(script_, "headroom watch --inte"), "--interval\n");
  EXPECT_EQ(bash_complete(script_, "headroom pack a --work"), "--workload\n");
}

TEST(CliShell, CompletionNeedsAKnownShell) {
  expect_usage_error("completion fish", "unknown shell 'fish' (bash or zsh)");
  expect_usage_error("completion", "SHELL is required");
  CliRun zsh = run_cli("completion zsh");
  EXPECT_EQ(zsh.code, 0);
  EXPECT_EQ(zsh.out.rfind("#compdef headroom\n", 0), 0u);
}

TEST(CliShell, ManPageCoversEveryCommandAndOption) {
  CliRun r = run_cli("help --man");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind(".TH HEADROOM 1", 0), 0u);
  for (const char* command : {"estimate MODEL", "fit MODEL \\-\\-gpu NAME", "plan MODEL", "report MODEL", "pack MODEL",
                              "models", "gpus", "watch \\-\\- COMMAND", "completion bash|zsh", "help [COMMAND]"}) {
    EXPECT_NE(r.out.find(".SS \"headroom " + std::string(command)), std::string::npos) << command;
  }
  EXPECT_NE(r.out.find(".B \\-\\-gpu\\-memory VALUE"), std::string::npos);
  EXPECT_NE(r.out.find(".B \\-\\-eager\\-module\\-loading\n"), std::string::npos);  // a flag: no VALUE
  EXPECT_NE(r.out.find(".SH EXIT STATUS"), std::string::npos);
  expect_usage_error("help --man plan", "help --man prints the whole manual");
}

// `script` gives the command a terminal; HEADROOM_PROGRESS_DELAY_MS=0 shows the line at once.
std::string on_terminal(const std::string& args, const std::string& delay_ms = "0") {
  return shell_output("HEADROOM_PROGRESS_DELAY_MS=" + delay_ms + " script -qec '" + std::string(HEADROOM_CLI) + " " +
                      args + "' /dev/null");
}

TEST(CliProgress, ShowsOnATerminalAndErasesItself) {
  std::string out = on_terminal("fit resnet50 --gpu all");
  EXPECT_NE(out.find("\r\033[Kfitting T4 (3/14)..."), std::string::npos);
  // The line is erased before the table is printed.
  size_t erase = out.rfind("\r\033[K");
  ASSERT_NE(erase, std::string::npos);
  EXPECT_EQ(out.find("headroom fit: resnet50"), erase + 4);
}

TEST(CliProgress, QuietAndShortRunsShowNothing) {
  EXPECT_EQ(on_terminal("fit resnet50 --gpu all --quiet").find('\033'), std::string::npos);
  EXPECT_EQ(on_terminal("-q fit resnet50 --gpu all").find('\033'), std::string::npos);
  // An estimate of a small model ends long before a second.
  EXPECT_EQ(on_terminal("estimate resnet18", "1000").find("\r\033[K"), std::string::npos);  // colours, but no status line
  // Not a terminal (the tests' pipe): nothing on stderr.
  CliRun r = run_cli("fit resnet50 --gpu all");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.err, "");
}

TEST(CliProgress, QuietSilencesWrittenNotes) {
  const std::string file = ::testing::TempDir() + "headroom_quiet_report.html";
  CliRun loud = run_cli("report mlp:layers=2,dim=64 -o " + file);
  EXPECT_EQ(loud.err.rfind("headroom: wrote " + file, 0), 0u);
  CliRun quiet = run_cli("report mlp:layers=2,dim=64 -o " + file + " --quiet");
  EXPECT_EQ(quiet.code, 0);
  EXPECT_EQ(quiet.err, "");
  std::remove(file.c_str());
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
