// Runs the built `headroom` binary as a user would, capturing exit code, stdout and stderr.
#pragma once

#include <string>

namespace headroom::testing {

struct CliRun {
  int code = -1;
  std::string out, err;
};

// `args` is appended to the binary's path and run through the shell.
CliRun run_cli(const std::string& args);

// A usage error as every command must report one: exit 2, nothing on stdout, one stderr line
// containing `fragment`.
void expect_usage_error(const std::string& args, const std::string& fragment);

}  // namespace headroom::testing
