#include "cli_runner.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace headroom::testing {

CliRun run_cli(const std::string& args) {
  // One stderr file per process: ctest runs test cases in parallel processes.
  std::string err_file = ::testing::TempDir() + "headroom_cli_stderr_" + std::to_string(getpid()) + ".txt";
  std::string cmd = std::string(HEADROOM_CLI) + " " + args + " 2>" + err_file;
  CliRun r;
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream f(err_file);
  std::stringstream ss;
  ss << f.rdbuf();
  r.err = ss.str();
  return r;
}


void expect_usage_error(const std::string& args, const std::string& fragment) {
  CliRun r = run_cli(args);
  EXPECT_EQ(r.code, 2) << args;
  EXPECT_EQ(r.out, "") << args;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << args << " -> " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << " -> " << r.err;
}

}  // namespace headroom::testing
