// The probe classes of issue 18 through the `headroom` binary: crash, hang, unbounded memory,
// internal error, silent overflow, accepted bad input, multi-line message and output safety.
// Each test is named after the bug it pins; every failure is one line on stderr, exit code 2,
// nothing on stdout. (Under the asan preset the same tests run the sanitized binary.)
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli_runner.h"
#include "onnx_test_models.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::CliRun;
using testing::run_cli;
namespace fs = std::filesystem;

void expect_usage_error(const std::string& args, const std::string& expected_line) {
  CliRun r = run_cli(args);
  EXPECT_EQ(r.code, 2) << args;
  EXPECT_EQ(r.out, "") << args;
  EXPECT_EQ(r.err, "headroom: " + expected_line + "\n") << args;
}

std::string temp_file(const std::string& name, const std::string& text) {
  std::string dir = ::testing::TempDir() + "headroom_hardened";
  fs::create_directories(dir);
  std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(HardenedCli, EmptyOptionValuesAreErrorsNotNotGiven) {
  expect_usage_error("estimate resnet18 --gpu ''", "--gpu needs a value, got ''");
  expect_usage_error("estimate resnet18 --gpu-memory ''", "--gpu-memory needs a value, got ''");
  expect_usage_error("plan --chain x.json --budget 1GiB --slots ''", "--slots needs a value, got ''");
  expect_usage_error("plan --graph x.json --budget ''", "--budget needs a value, got ''");
  expect_usage_error("pack resnet18 --workload ''", "--workload needs a value, got ''");
  expect_usage_error("estimate ''", "MODEL needs a value, got ''");
}

TEST(HardenedCli, GpuAllOutsideFitIsAnError) {
  const std::string line = "--gpu all applies to fit; give one GPU (see headroom gpus)";
  expect_usage_error("estimate resnet18 --gpu all", line);
  expect_usage_error("plan resnet18 --gpu all", line);
  expect_usage_error("report resnet18 --gpu all -o /tmp/x.html", line);
}

TEST(HardenedCli, ControlCharactersInNamesStayOneLine) {
  CliRun r = run_cli("estimate \"$(printf 'res\\nnet\\033[31m')\"");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("res\\x0anet\\x1b[31m"), std::string::npos) << r.err;
}

// Training an ONNX graph without parameters was "internal error" and exit code 3.
TEST(HardenedCli, ParameterlessModelInTrainingIsExit2NotInternalError) {
  testing::OnnxModel m;
  m.input("x", {std::string("batch"), int64_t{4}});
  m.node("Relu", {"x"}, {"y"}, "relu");
  m.output("y");
  std::string path = temp_file("noparam.onnx", "");
  m.save(path);
  expect_usage_error("estimate " + path + " --mode train",
                     "model 'noparam' has no parameters, so it cannot be trained (use --mode infer)");
  CliRun infer = run_cli("estimate " + path + " --mode infer");
  EXPECT_EQ(infer.code, 0) << infer.err;
}

// mlp:dim=1000000000 printed "7105 PiB": the optimizer states' total wrapped around int64.
TEST(HardenedCli, MlpDim1e9OverflowIsAnErrorNot7105PiB) {
  // Two 1e9 x 1e9 fp32 weights are 2 x 4e18 bytes; their gradients alone pass 2^63. The first
  // checked sum to overflow is the parameter count: 9 x (1e18 + 1e9) + 1e18 > 2^63 - 1.
  CliRun r = run_cli("estimate mlp:dim=1000000000");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("size overflows 64 bits while computing parameter count"), std::string::npos)
      << r.err;
  // Under 2^63 but past the 2^60 limit: 1.5e8^2 x 4 B = 9e16 B per weight matrix (x layers,
  // gradients, Adam's two states): refused with the limit named.
  CliRun big = run_cli("estimate mlp:layers=8,dim=150000000");
  EXPECT_EQ(big.code, 2);
  EXPECT_NE(big.err.find("over headroom's limit of 2^60 bytes (1 EiB)"), std::string::npos) << big.err;
}

// mlp:layers=100000000 built ops until the machine ran out of memory (the process was killed).
TEST(HardenedCli, MlpWith100MLayersIsRefusedNotOutOfMemory) {
  expect_usage_error("estimate mlp:layers=100000000",
                     "model 'mlp' has more than 500000 ops, over headroom's limit "
                     "(fewer layers, or a smaller ONNX graph)");
}

// --max-split-size-mb 99999999999999999 became a negative byte count (x 2^20 wrapped).
TEST(HardenedCli, HugeMaxSplitSizeMbIsAnErrorNotNegative) {
  expect_usage_error("estimate resnet18 --gpu T4 --max-split-size-mb 99999999999999999",
                     "size overflows 64 bits while computing --max-split-size-mb in bytes "
                     "(99999999999999999 x 1048576)");
}

// `estimate ... > /dev/full` exited 0 with the report lost.
TEST(HardenedCli, FailedStdoutWriteExits2) {
  CliRun r = run_cli("estimate resnet18 > /dev/full");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "headroom: cannot write to standard output: No space left on device\n");
}

// /dev/zero as a chain, graph or workload file was read until bad_alloc.
TEST(HardenedCli, DevZeroAsAnInputFileIsRefused) {
  expect_usage_error("plan --chain /dev/zero --budget 1GiB",
                     "cannot read chain file '/dev/zero': not a regular file");
  expect_usage_error("plan --graph /dev/zero --budget 1GiB",
                     "cannot read graph file '/dev/zero': not a regular file");
  expect_usage_error("pack resnet18 --workload /dev/zero",
                     "cannot read workload file '/dev/zero': not a regular file");
}

// 200 KB of nested JSON overflowed the stack in the chain and graph loaders.
TEST(HardenedCli, DeeplyNestedJsonIsAnErrorNotAStackOverflow) {
  std::string deep = "{\"fwd_ms\": " + std::string(200000, '[') + std::string(200000, ']') + "}";
  std::string path = temp_file("deep.json", deep);
  expect_usage_error("plan --chain " + path + " --budget 1GiB",
                     path + ": JSON nested deeper than 64 levels");
  expect_usage_error("plan --graph " + path + " --budget 1GiB",
                     path + ": JSON nested deeper than 64 levels");
}

// A workload with phase_ms 1e308 looped forever; huge times printed latencies of -9.2e12 ms.
TEST(HardenedCli, WorkloadPhaseMs1e308IsAnErrorNotAHang) {
  std::string w = temp_file("phase.json", R"({"window_s": 1, "models": [
      {"model": "resnet18", "fps": 10, "phase_ms": 1e308, "latency_ms": 100}]})");
  expect_usage_error("pack resnet18 --gpu T4 --workload " + w,
                     w + ": models[0] (resnet18): 'phase_ms' must be a non-negative number up to 1e9");
  std::string slow = temp_file("slow.json", R"({"window_s": 1,
      "load": {"bandwidth_gb_per_s": 1e-300},
      "models": [{"model": "resnet18", "fps": 10, "latency_ms": 100}]})");
  CliRun r = run_cli("pack resnet18 --gpu T4 --workload " + slow);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("overflows 64 bits while computing a time in nanoseconds"), std::string::npos)
      << r.err;
}

// Every plan --graph read xbar_bytes[-1] for a predecessor 0 (ASan: out of bounds); the bundled
// example is the smallest such graph.
TEST(HardenedCli, PlanGraphWithPredecessorZeroReadsInBounds) {
  CliRun r = run_cli(std::string("plan --graph ") + HEADROOM_SOURCE_DIR +
                     "/examples/graph-example.json --budget 1GiB --time-limit 5");
  EXPECT_EQ(r.code, 0) << r.err;
}

// vDNN's prefetch kept a reference into the buffer table across new_buffer() (ASan:
// heap-use-after-free), reached by a plain plan on a small GPU.
TEST(HardenedCli, PlanResnet50OnT4PrefetchUseAfterFree) {
  CliRun r = run_cli("plan resnet50 --gpu T4 --strategy vdnn-all");
  EXPECT_EQ(r.code, 0) << r.err;
  CliRun a = run_cli("plan resnet50 --gpu T4");
  EXPECT_EQ(a.code, 0) << a.err;
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
