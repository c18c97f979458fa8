// util/file.h and util/json_input.h: what a user's file path or document can do to headroom.
// Reads refuse devices, FIFOs and oversized files before reading; writes go through a fresh
// mkstemp file in the target's directory and never follow or replace anything but a regular
// file; JSON nesting is bounded and values are never echoed whole.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "options/run_args.h"
#include "util/file.h"
#include "util/format.h"
#include "util/json_input.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "headroom_file_" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string contents(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

size_t entries(const std::string& dir) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

// /dev/zero as a chain or workload file was read until bad_alloc.
TEST(ReadInputFile, DevZeroIsRefusedNotReadForever) {
  Result<std::string> r = read_input_file("/dev/zero", "chain file", 1 << 20);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "cannot read chain file '/dev/zero': not a regular file");
}

TEST(ReadInputFile, FifoIsRefusedWithoutBlocking) {
  std::string dir = fresh_dir("fifo");
  std::string path = dir + "/pipe";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  Result<std::string> r = read_input_file(path, "workload file", 1 << 20);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "cannot read workload file '" + path + "': not a regular file");
}

TEST(ReadInputFile, SizeLimitDirectoryAndMissing) {
  std::string dir = fresh_dir("limit");
  std::string path = dir + "/big.json";
  std::ofstream(path) << std::string(101, ' ');
  Result<std::string> r = read_input_file(path, "graph file", 100);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "cannot read graph file '" + path +
                           "': it is 101 bytes, over the limit of 100 bytes for a graph file");
  ASSERT_TRUE(read_input_file(path, "graph file", 101).ok());
  EXPECT_EQ(read_input_file(path, "graph file", 101).value().size(), 101u);
  EXPECT_EQ(read_input_file(dir, "graph file", 100).error(),
            "cannot read graph file '" + dir + "': is a directory");
  EXPECT_EQ(read_input_file(dir + "/none", "graph file", 100).error(),
            "cannot read graph file '" + dir + "/none': No such file or directory");
}

// The old writer went through a fixed PATH.tmp: an existing X.tmp was overwritten and deleted.
TEST(WriteFileAtomically, ExistingTmpFileIsLeftAlone) {
  std::string dir = fresh_dir("tmp");
  std::string path = dir + "/out.html";
  std::ofstream(path + ".tmp") << "precious";
  ASSERT_TRUE(write_file_atomically(path, "new").ok());
  EXPECT_EQ(contents(path), "new");
  EXPECT_EQ(contents(path + ".tmp"), "precious");
  EXPECT_EQ(entries(dir), 2u);  // no temporary file left behind
}

// A symlink at the target (or at the old PATH.tmp) was followed.
TEST(WriteFileAtomically, SymlinkIsNeitherFollowedNorReplaced) {
  std::string dir = fresh_dir("link");
  std::string victim = dir + "/victim";
  std::ofstream(victim) << "keep";
  std::string path = dir + "/out.html";
  fs::create_symlink(victim, path);
  fs::create_symlink(victim, path + ".tmp");
  Result<int64_t> w = write_file_atomically(path, "evil");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error(), "cannot write '" + path + "': it is a symbolic link (not followed)");
  EXPECT_EQ(contents(victim), "keep");
  EXPECT_TRUE(fs::is_symlink(path));
  EXPECT_EQ(entries(dir), 3u);
}

// As root, `-o /dev/full` replaced the device node with a regular file.
TEST(WriteFileAtomically, DeviceIsNeverReplaced) {
  Result<int64_t> w = write_file_atomically("/dev/full", "x");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error(), "cannot write '/dev/full': it exists and is not a regular file");
  struct stat st {};
  ASSERT_EQ(::stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  std::string dir = fresh_dir("dir");
  EXPECT_EQ(write_file_atomically(dir, "x").error(), "cannot write '" + dir + "': it is a directory");
}

TEST(WriteFileAtomically, ReplacesARegularFileWithTheUsualMode) {
  std::string dir = fresh_dir("mode");
  std::string path = dir + "/r.json";
  std::ofstream(path) << "old contents, longer";
  ASSERT_TRUE(write_file_atomically(path, "{}").ok());
  EXPECT_EQ(contents(path), "{}");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask);
  EXPECT_EQ(entries(dir), 1u);
  // A relative path writes its temporary file in the current directory's target.
  EXPECT_FALSE(write_file_atomically("", "x").ok());
}

// 200 KB of nested JSON overflowed the stack in the chain and graph loaders (dump()).
TEST(JsonInput, DeepNestingIsAnErrorNotAStackOverflow) {
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  try {
    parse_json_input(deep, "deep.json");
    FAIL() << "parsed";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "deep.json: JSON nested deeper than 64 levels");
  }
  std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(parse_json_input(ok, "ok.json").is_array());
  try {
    parse_json_input("{\"a\": [1,", "cut.json");
    FAIL() << "parsed";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "cut.json: not valid JSON (byte 10)");
  }
}

// Found by chain_json_fuzz: a number past double's range threw nlohmann's out_of_range, which
// no reader caught (std::terminate).
TEST(JsonInput, NumberOutOfRangeIsAnErrorNotTerminate) {
  try {
    parse_json_input("{\"fwd_ms\": [1e999]}", "big.json");
    FAIL() << "parsed";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "big.json: not valid JSON (a number out of range)");
  }
}

TEST(JsonInput, ValuesAreDescribedNotEchoed) {
  EXPECT_EQ(json_value_text(nlohmann::json(1.5)), "1.5");
  EXPECT_EQ(json_value_text(nlohmann::json("a\nb")), "\"a\\x0ab\"");
  EXPECT_EQ(json_value_text(nlohmann::json(std::string(100, 'x'))),
            "\"" + std::string(40, 'x') + "...\"");
  EXPECT_EQ(json_value_text(nlohmann::json::array({1, 2})), "an array");
  EXPECT_EQ(json_value_text(nlohmann::json::object()), "an object");
  EXPECT_EQ(escape_control("tab\there\x7f"), "tab\\x09here\\x7f");
}

// Found by option_text_fuzz: `--batch` holding a newline made parse_positive's message two lines
// (the CLI escaped it when printing, the library's Result and Python's exception did not). Every
// InputError is now one line by construction, and escaping twice changes nothing.
TEST(InputErrorLine, ControlBytesAreEscapedByTheConstructor) {
  EXPECT_STREQ(InputError("got '1\n2\x1b'").what(), "got '1\\x0a2\\x1b'");
  EXPECT_STREQ(InputError(InputError("a\tb").what()).what(), "a\\x09b");
  try {
    (void)parse_positive("--batch", "1\n2");
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "--batch must be a positive integer, got '1\\x0a2'");
  }
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
