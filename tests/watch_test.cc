// headroom watch: the sample formats, the peaks and the summary on synthetic samples; the NVML
// loader and the whole command against a fake libnvidia-ml (tests/fake_nvml) scripted by a file,
// including a process that appears and disappears mid-run and the command's exit code.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "cli_runner.h"
#include "measure/nvml.h"
#include "measure/watch.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::CliRun;
using testing::run_cli;

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "watch_" + std::to_string(getpid()) + "_" + name;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(WatchFormat, IntervalsParseStrictly) {
  EXPECT_EQ(parse_interval_ms("100ms"), 100);
  EXPECT_EQ(parse_interval_ms("1s"), 1000);
  EXPECT_EQ(parse_interval_ms("0.25s"), 250);
  EXPECT_EQ(parse_interval_ms("60s"), 60000);
  for (const char* bad : {"", "100", "0ms", "-5ms", "1.5ms", "61s", "abc", "2min", "nanms", "1e400s"}) {
    EXPECT_THROW(parse_interval_ms(bad), InputError) << bad;
  }
}

TEST(WatchFormat, OutputFormatFromTheFileName) {
  EXPECT_EQ(sample_format_for("run.csv"), SampleFormat::Csv);
  EXPECT_EQ(sample_format_for("dir/run.jsonl"), SampleFormat::Jsonl);
  EXPECT_THROW(sample_format_for("run.json"), InputError);
  EXPECT_THROW(sample_format_for(".csv"), InputError);
}

TEST(WatchFormat, RowsAreFixedColumnsWithEmptyOrNullForMissingValues) {
  WatchSample s{.t_ms = 200, .device = 1, .device_used_bytes = 1024, .device_total_bytes = 4096,
                .process_used_bytes = 512, .utilization = GpuUtilization{37, 12}};
  EXPECT_EQ(sample_csv_header(),
            "t_ms,device,device_used_bytes,device_total_bytes,process_used_bytes,gpu_util_pct,memory_util_pct\n");
  EXPECT_EQ(sample_row(s, SampleFormat::Csv), "200,1,1024,4096,512,37,12\n");
  EXPECT_EQ(sample_row(s, SampleFormat::Jsonl),
            "{\"t_ms\":200,\"device\":1,\"device_used_bytes\":1024,\"device_total_bytes\":4096,"
            "\"process_used_bytes\":512,\"gpu_util_pct\":37,\"memory_util_pct\":12}\n");
  s.process_used_bytes.reset();
  s.utilization.reset();
  EXPECT_EQ(sample_row(s, SampleFormat::Csv), "200,1,1024,4096,,,\n");
  EXPECT_EQ(sample_row(s, SampleFormat::Jsonl),
            "{\"t_ms\":200,\"device\":1,\"device_used_bytes\":1024,\"device_total_bytes\":4096,"
            "\"process_used_bytes\":null,\"gpu_util_pct\":null,\"memory_util_pct\":null}\n");
}

TEST(WatchFormat, PeaksKeepTheFirstTimeAPeakIsReached) {
  WatchResult r;
  r.watched_process = true;
  int64_t used[] = {100, 300, 300, 200};
  int64_t proc[] = {0, 250, 250, 0};
  for (int k = 0; k < 4; ++k) {
    add_to_peaks(WatchSample{.t_ms = 50 * k, .device = 0, .device_used_bytes = used[k], .device_total_bytes = 1000,
                             .process_used_bytes = proc[k], .utilization = std::nullopt},
                 r);
  }
  ASSERT_EQ(r.devices.size(), 1u);
  EXPECT_EQ(r.devices[0].used_peak_bytes, 300);
  EXPECT_EQ(r.devices[0].used_peak_t_ms, 50);
  EXPECT_EQ(r.devices[0].process_peak_bytes, 250);
  EXPECT_EQ(r.devices[0].process_peak_t_ms, 50);
  EXPECT_EQ(r.last_t_ms, 150);
}

TEST(WatchFormat, SummaryComparesThePredictionWithTheProcessPeak) {
  WatchResult r;
  r.driver_version = "550.54";
  r.interval_ms = 100;
  r.samples = 3;
  r.last_t_ms = 200;
  r.watched_process = true;
  r.devices.push_back(DevicePeak{.device = 0, .name = "GPU", .total_bytes = 16LL << 30,
                                 .used_peak_bytes = 3LL << 30, .used_peak_t_ms = 100,
                                 .process_peak_bytes = 2LL << 30, .process_peak_t_ms = 100});
  r.exit_code = 0;
  // Predicted 2.5 GiB against a measured 2 GiB: (2.5 - 2) / 2 = +25.0%.
  std::string s = watch_summary(r, (5LL << 30) / 2);
  EXPECT_EQ(s,
            "3 samples every 100 ms over 0.2 s (NVML, driver 550.54)\n"
            "device 0 (GPU): peak used 3.00 GiB of 16.0 GiB at 0.1 s\n"
            "  watched process peak: 2.00 GiB (2,147,483,648 bytes) at 0.1 s\n"
            "predicted device total 2.50 GiB (2,684,354,560 bytes), measured watched process peak 2.00 GiB: "
            "prediction +25.0%\n"
            "command exited with code 0\n");
}

TEST(WatchFormat, PredictedDeviceTotalComesFromEstimateJson) {
  std::string good = temp_path("estimate.json"), cpu = temp_path("cpu.json"), junk = temp_path("junk.json");
  write(good, "{\"model\":\"mlp\",\"device_total_bytes\":123456789}");
  write(cpu, "{\"model\":\"mlp\",\"peak_bytes\":5}");
  write(junk, "not json");
  ASSERT_TRUE(predicted_device_total(good).ok());
  EXPECT_EQ(predicted_device_total(good).value(), 123456789);
  EXPECT_NE(predicted_device_total(cpu).error().find("no device_total_bytes"), std::string::npos);
  EXPECT_NE(predicted_device_total(junk).error().find("not valid JSON"), std::string::npos);
  EXPECT_NE(predicted_device_total(temp_path("missing.json")).error().find("cannot read"), std::string::npos);
}

// Points HEADROOM_NVML_LIBRARY at the fake and FAKE_NVML_SCRIPT at a script for one test.
class FakeNvml : public ::testing::Test {
 protected:
  void use(const std::string& script, const char* library = HEADROOM_FAKE_NVML) {
    script_ = temp_path("script.txt");
    write(script_, script);
    setenv(kNvmlLibraryEnv, library, 1);
    setenv("FAKE_NVML_SCRIPT", script_.c_str(), 1);
  }
  void TearDown() override {
    for (const char* v : {kNvmlLibraryEnv, "FAKE_NVML_SCRIPT", "FAKE_NVML_FAIL", "FAKE_NVML_DEVICES"}) unsetenv(v);
  }
  std::string script_;
};

TEST_F(FakeNvml, LoaderReadsMemoryProcessesAndUtilization) {
  use("# total used gpu mem processes\n"
      "1000 100 5 6\n"
      "1000 400 50 60 42=300 7=na\n");
  std::unique_ptr<Nvml> n = Nvml::load();
  EXPECT_EQ(n->device_count(), 1);
  EXPECT_EQ(n->device_name(0), "Fake GPU 0");
  EXPECT_EQ(n->driver_version(), "999.99");
  EXPECT_EQ(n->memory(0).used_bytes, 100);
  EXPECT_TRUE(n->compute_processes(0).empty());
  EXPECT_EQ(n->utilization(0)->gpu_percent, 5);
  GpuMemoryInfo m = n->memory(0);
  EXPECT_EQ(m.total_bytes, 1000);
  EXPECT_EQ(m.used_bytes, 400);
  std::vector<GpuProcessMemory> p = n->compute_processes(0);
  ASSERT_EQ(p.size(), 2u);  // sorted by pid; NVML_VALUE_NOT_AVAILABLE is no number
  EXPECT_EQ(p[0].pid, 7u);
  EXPECT_FALSE(p[0].used_bytes.has_value());
  EXPECT_EQ(p[1].pid, 42u);
  EXPECT_EQ(p[1].used_bytes, 300);
  EXPECT_EQ(n->utilization(0)->memory_percent, 60);
  EXPECT_EQ(n->memory(0).used_bytes, 400);  // the last line repeats
}

TEST_F(FakeNvml, OldDriversUnversionedProcessCallIsTheFallback) {
  // Only nvmlDeviceGetComputeRunningProcesses with the 16-byte v1 struct: the loader must read
  // 16-byte records, or the second pid would come out of the first record's padding.
  use("1000 400 0 0 11=100 12=200 13=300\n", HEADROOM_FAKE_NVML_V1);
  std::unique_ptr<Nvml> n = Nvml::load();
  n->memory(0);
  std::vector<GpuProcessMemory> p = n->compute_processes(0);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[1].pid, 12u);
  EXPECT_EQ(p[1].used_bytes, 200);
  EXPECT_EQ(p[2].used_bytes, 300);
}

TEST_F(FakeNvml, ManyProcessesGrowTheBuffer) {
  std::string line = "1000 400 0 0";
  for (int pid = 1; pid <= 40; ++pid) line += " " + std::to_string(pid) + "=" + std::to_string(pid * 10);
  use(line + "\n");
  std::unique_ptr<Nvml> n = Nvml::load();
  n->memory(0);
  std::vector<GpuProcessMemory> p = n->compute_processes(0);
  ASSERT_EQ(p.size(), 40u);
  EXPECT_EQ(p[39].used_bytes, 400);
}

// validation/nvml_probe.py (make validate-gpu's NVML reader, ctypes) against both fake layouts:
// the same calls and structs as the C++ loader.
TEST_F(FakeNvml, ValidationProbeReadsBothProcessLayouts) {
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  for (const char* lib : {HEADROOM_FAKE_NVML, HEADROOM_FAKE_NVML_V1}) {
    use("1000 400 0 0 7=na " + std::to_string(getpid()) + "=300 11=5\n", lib);
    std::string cmd = "cd " + std::string(HEADROOM_SOURCE_DIR) +
                      "/validation && /usr/bin/python3 -c 'import nvml_probe; n = nvml_probe.Nvml(); "
                      "print(n.ok, n.driver_version(), n.device_used(), n.process_used(" +
                      std::to_string(getpid()) + "), n.process_used(7), n.process_used(12))'";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    char buf[256] = {};
    std::string out = fgets(buf, sizeof buf, p) != nullptr ? buf : "";
    EXPECT_EQ(pclose(p), 0) << lib;
    // NVML_VALUE_NOT_AVAILABLE and an unlisted pid are both unknown (None).
    EXPECT_EQ(out, "True 999.99 400 300 None None\n") << lib;
  }
}

void expect_one_line_error(const CliRun& r, const std::string& fragment) {
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// The command's process appears at the second sample, grows, and is gone at the fourth; the
// device keeps 100 bytes of other use. Columns: t_ms, device, used, total, process, gpu%, mem%.
constexpr const char* kAppearingProcess =
    "1000 100 0 0\n"
    "1000 300 40 10 child=200 99999=7\n"
    "1000 700 90 30 child=600\n"
    "1000 100 0 0\n";

TEST_F(FakeNvml, CommandRunIsSampledAndThePeakPrinted) {
  use(kAppearingProcess);
  std::string csv = temp_path("run.csv");
  CliRun r = run_cli("watch --interval 20ms --samples 4 -o " + csv + " -- sleep 0.5");
  ASSERT_EQ(r.code, 0) << r.err;
  // The process column is the child's own memory: pid 99999 belongs to someone else.
  EXPECT_EQ(slurp(csv),
            "t_ms,device,device_used_bytes,device_total_bytes,process_used_bytes,gpu_util_pct,memory_util_pct\n"
            "0,0,100,1000,0,0,0\n"
            "20,0,300,1000,200,40,10\n"
            "40,0,700,1000,600,90,30\n"
            "60,0,100,1000,0,0,0\n");
  EXPECT_EQ(r.out,
            "4 samples every 20 ms over 0.1 s (NVML, driver 999.99)\n"
            "device 0 (Fake GPU 0): peak used 700 B of 1000 B at 0.0 s\n"
            "  watched process peak: 600 B (600 bytes) at 0.0 s\n"
            "command exited with code 0\n");
}

TEST_F(FakeNvml, JsonlIsByteIdenticalAcrossRunsAndComparesWithTheEstimate) {
  use(kAppearingProcess);
  std::string estimate = temp_path("est.json");
  // A prediction of 500 bytes against the measured 600: (500 - 600) / 600 = -16.7%.
  write(estimate, "{\"device_total_bytes\":500}");
  std::string a = temp_path("a.jsonl"), b = temp_path("b.jsonl");
  CliRun ra = run_cli("watch --interval 10ms --samples 4 --compare " + estimate + " -o " + a + " -- sleep 0.3");
  CliRun rb = run_cli("watch --interval 10ms --samples 4 --compare " + estimate + " -o " + b + " -- sleep 0.3");
  ASSERT_EQ(ra.code, 0) << ra.err;
  EXPECT_EQ(slurp(a), slurp(b));
  EXPECT_EQ(ra.out, rb.out);
  EXPECT_NE(slurp(a).find("{\"t_ms\":20,\"device\":0,\"device_used_bytes\":700,\"device_total_bytes\":1000,"
                          "\"process_used_bytes\":600,\"gpu_util_pct\":90,\"memory_util_pct\":30}\n"),
            std::string::npos)
      << slurp(a);
  EXPECT_NE(ra.out.find("predicted device total 500 B (500 bytes), measured watched process peak 600 B: prediction -16.7%"),
            std::string::npos)
      << ra.out;
}

TEST_F(FakeNvml, TheCommandsExitCodeIsPropagated) {
  use(kAppearingProcess);
  CliRun r = run_cli("watch --interval 5ms -- sh -c 'exit 7'");
  EXPECT_EQ(r.code, 7) << r.err;
  EXPECT_NE(r.out.find("command exited with code 7"), std::string::npos) << r.out;
  // Killed by a signal: 128 + 9, the shell's convention.
  r = run_cli("watch --interval 5ms -- sh -c 'kill -9 $$'");
  EXPECT_EQ(r.code, 137) << r.err;
  EXPECT_NE(r.out.find("command exited with code 137"), std::string::npos) << r.out;
}

TEST_F(FakeNvml, PidIsWatchedWithItsChildren) {
  // This test process is the watched pid; NVML reports memory for it.
  use("1000 500 0 0 " + std::to_string(getpid()) + "=321\n");
  CliRun r = run_cli("watch --interval 5ms --samples 3 --pid " + std::to_string(getpid()));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("3 samples every 5 ms over 0.0 s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("watched process peak: 321 B"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("command exited"), std::string::npos) << r.out;
}

TEST_F(FakeNvml, DeviceOnlyWatchComparesTheDevicePeak) {
  use("2000 1000 0 0\n2000 1500 0 0\n");
  std::string estimate = temp_path("est2.json");
  write(estimate, "{\"device_total_bytes\":1500}");
  setenv("FAKE_NVML_DEVICES", "2", 1);
  CliRun r = run_cli("watch --interval 5ms --samples 2 --compare " + estimate);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("device 1 (Fake GPU 1): peak used"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("measured device used peak 1.46 KiB: prediction +0.0%"), std::string::npos) << r.out;
}

TEST_F(FakeNvml, BadInputIsOneLineAndExitTwo) {
  use(kAppearingProcess);
  std::string csv = temp_path("never.csv");
  expect_one_line_error(run_cli("watch --interval 0ms -- true"), "--interval");
  expect_one_line_error(run_cli("watch --interval fast -- true"), "--interval must be a duration");
  expect_one_line_error(run_cli("watch --pid 2147483646 --samples 1"), "--pid 2147483646: no such process");
  expect_one_line_error(run_cli("watch --pid abc"), "--pid must be a positive integer");
  expect_one_line_error(run_cli("watch --pid 1 -- true"), "not both");
  expect_one_line_error(run_cli("watch --samples 0 -- true"), "--samples must be a positive integer");
  expect_one_line_error(run_cli("watch -o run.txt -- true"), "must end in .csv or .jsonl");
  expect_one_line_error(run_cli("watch --compare " + temp_path("nothing.json") + " -- true"), "cannot read");
  expect_one_line_error(run_cli("watch -o " + csv + " -- /nonexistent/command"), "cannot run '/nonexistent/command'");
  EXPECT_FALSE(std::ifstream(csv).good()) << "no half-written file";
}

TEST_F(FakeNvml, NoNvmlOrNoGpuIsOneLineAndExitTwo) {
  use(kAppearingProcess);
  setenv(kNvmlLibraryEnv, "/nonexistent/libnvidia-ml.so.1", 1);
  expect_one_line_error(run_cli("watch -- true"), "no NVML: cannot load /nonexistent/libnvidia-ml.so.1");
  setenv(kNvmlLibraryEnv, HEADROOM_FAKE_NVML, 1);
  setenv("FAKE_NVML_FAIL", "init", 1);
  expect_one_line_error(run_cli("watch -- true"), "no GPU: nvmlInit_v2 failed with NVML error 9");
  unsetenv("FAKE_NVML_FAIL");
  setenv("FAKE_NVML_DEVICES", "0", 1);
  expect_one_line_error(run_cli("watch -- true"), "no GPU: NVML sees no device");
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
