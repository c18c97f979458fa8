// The CLI's load boundary (src/util/plugins.h): the binary itself needs none of ONNX, protobuf or
// COIN-OR (with its BLAS/LAPACK), reads ONNX files through its plugin, and says in one line what
// is missing when the plugin is not there.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

namespace {
namespace HEADROOM_UNITY_ID {

std::string command_output(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  pclose(p);
  return out;
}

std::vector<std::string> needed_libraries(const std::string& binary) {
  std::vector<std::string> out;
  const std::string dyn = command_output("readelf -d '" + binary + "'");
  const std::regex needed(R"(\(NEEDED\)\s+Shared library: \[([^\]]+)\])");
  for (auto it = std::sregex_iterator(dyn.begin(), dyn.end(), needed); it != std::sregex_iterator(); ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

TEST(StartupLink, CliNeedsNoOnnxProtobufOrCoinLibraries) {
  const std::vector<std::string> needed = needed_libraries(HEADROOM_CLI);
  ASSERT_FALSE(needed.empty()) << "readelf found no NEEDED entries in " << HEADROOM_CLI;
  const std::regex heavy("onnx|protobuf|Cbc|Clp|Cgl|Osi|CoinUtils|lapack|blas|gfortran", std::regex::icase);
  for (const std::string& lib : needed) EXPECT_FALSE(std::regex_search(lib, heavy)) << lib;
}

TEST(StartupLink, CliReadsOnnxThroughItsPlugin) {
  const std::string plugin = std::filesystem::path(HEADROOM_CLI).parent_path() / "headroom-onnx.so";
  ASSERT_TRUE(std::filesystem::exists(plugin)) << plugin;
  const std::string out = command_output(std::string(HEADROOM_CLI) + " estimate " + HEADROOM_SOURCE_DIR +
                                         "/tests/data/onnx/tiny_cnn_training.onnx --json");
  EXPECT_NE(out.find("\"peak_bytes\""), std::string::npos) << out;
}

TEST(StartupLink, MissingPluginIsOneLineAndExitTwo) {
  // The CLI alone in a folder of its own: neither next to it nor in <prefix>/lib/headroom.
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                                    ("headroom_lonely_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "bin");
  const std::filesystem::path cli = dir / "bin" / "headroom";
  std::filesystem::copy_file(HEADROOM_CLI, cli, std::filesystem::copy_options::overwrite_existing);
  const std::string err_file = (dir / "err.txt").string();
  const std::string run = "'" + cli.string() + "' estimate " + HEADROOM_SOURCE_DIR +
                          "/tests/data/onnx/tiny_cnn_training.onnx 2>'" + err_file + "'; echo \"rc=$?\"";
  const std::string out = command_output(run);
  const std::string err = command_output("cat '" + err_file + "'");
  const bool installed_elsewhere = std::filesystem::exists(HEADROOM_PLUGIN_INSTALL_DIR "/headroom-onnx.so");
  if (installed_elsewhere) GTEST_SKIP() << "an installed plugin in " HEADROOM_PLUGIN_INSTALL_DIR " would be found";
  EXPECT_EQ(out, "rc=2\n");
  EXPECT_NE(err.find("needs headroom's plugin headroom-onnx.so"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  // A built-in model does not need it.
  EXPECT_NE(command_output("'" + cli.string() + "' estimate mlp --json").find("\"peak_bytes\""), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
