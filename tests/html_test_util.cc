#include "html_test_util.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace headroom::testing {

namespace fs = std::filesystem;

std::vector<Attrs> elements(const std::string& html, const std::string& element, const std::string& cls) {
  std::vector<Attrs> out;
  std::string open = "<" + element + " ";
  for (size_t pos = html.find(open); pos != std::string::npos; pos = html.find(open, pos + 1)) {
    size_t end = html.find('>', pos);
    std::string tag = html.substr(pos + open.size(), end - pos - open.size());
    Attrs a;
    size_t i = 0;
    while (i < tag.size()) {
      while (i < tag.size() && tag[i] == ' ') ++i;
      size_t eq = tag.find("=\"", i);
      if (eq == std::string::npos) break;
      std::string key = tag.substr(i, eq - i);
      size_t close = tag.find('"', eq + 2);
      std::string value = tag.substr(eq + 2, close - eq - 2);
      for (auto [from, to] : {std::pair<std::string, std::string>{"&quot;", "\""}, {"&amp;", "&"}}) {
        for (size_t k = value.find(from); k != std::string::npos; k = value.find(from, k + 1)) value.replace(k, from.size(), to);
      }
      a[key] = value;
      i = close + 1;
    }
    if (a["class"] == cls) out.push_back(a);
  }
  return out;
}

std::vector<double> numbers(const std::string& text) {
  std::vector<double> v;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) v.push_back(std::stod(cur));
    cur.clear();
  };
  for (char c : text) {
    if ((c >= '0' && c <= '9') || c == '.' || c == '-') {
      cur += c;
    } else {
      flush();
    }
  }
  flush();
  return v;
}

std::vector<int64_t> int_list(const std::string& text) {
  std::vector<int64_t> v;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(std::stoll(item));
  return v;
}


std::string artifact_dir() {
#ifdef HEADROOM_BINARY_DIR
  std::string dir = std::string(HEADROOM_BINARY_DIR) + "/test-artifacts";
#else
  std::string dir = fs::path(HEADROOM_CLI).parent_path().string() + "/test-artifacts";
#endif
  fs::create_directories(dir);
  return dir;
}

std::string find_chromium() {
  if (const char* env = std::getenv("HEADROOM_CHROMIUM"); env && *env) return env;
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    for (const char* name : {"chromium", "chromium-browser"}) {
      std::string p = dir + "/" + name;
      if (access(p.c_str(), X_OK) == 0) return p;
    }
  }
  return "";
}

// Width and height from a PNG's IHDR chunk (0, 0 when the file is not a PNG).
std::pair<uint32_t, uint32_t> png_size(const std::string& bytes) {
  static const char kSig[] = "\x89PNG\r\n\x1a\n";
  if (bytes.size() < 24 || bytes.compare(0, 8, std::string(kSig, 8)) != 0) return {0, 0};
  auto be32 = [&](size_t at) {
    return (static_cast<uint32_t>(static_cast<unsigned char>(bytes[at])) << 24) |
           (static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + 1])) << 16) |
           (static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + 2])) << 8) |
           static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + 3]));
  };
  return {be32(16), be32(20)};
}

void expect_renders_in_chromium(const std::string& html, const std::string& png) {
  std::string chromium = find_chromium();
  ASSERT_FALSE(chromium.empty())
      << "Chromium is not installed: the HTML tests render the pages in headless Chromium. "
         "Install it with `scripts/install-deps.sh browser` (Debian package chromium; `make test` does this), "
         "or point HEADROOM_CHROMIUM at the binary.";
  std::string log = png + ".log";
  fs::remove(png);
  char profile[] = "/tmp/headroom-chromium-XXXXXX";
  ASSERT_NE(mkdtemp(profile), nullptr);
  std::string cmd = "timeout 120 " + chromium +
                    " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
                    " --disable-background-networking --disable-component-update --disable-sync"
                    " --user-data-dir=" + std::string(profile) + " --screenshot=" + png +
                    " --window-size=1400,2000 --enable-logging=stderr --v=0 file://" + fs::absolute(html).string() +
                    " >" + log + " 2>&1";
  int status = std::system(cmd.c_str());
  fs::remove_all(profile);
  std::ifstream lf(log);
  std::string out((std::istreambuf_iterator<char>(lf)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "chromium failed:\n" << out;

  std::ifstream pf(png, std::ios::binary);
  ASSERT_TRUE(pf.good()) << "no screenshot at " << png << "\n" << out;
  std::string bytes((std::istreambuf_iterator<char>(pf)), std::istreambuf_iterator<char>());
  auto [w, h] = png_size(bytes);
  EXPECT_EQ(w, 1400u);
  EXPECT_EQ(h, 2000u);
  // A blank 1400x2000 page compresses to a few KB; charts, tables and text are far larger.
  EXPECT_GT(bytes.size(), 100u * 1024) << png;

  // Console messages (errors, warnings, failed loads) are logged as "...:CONSOLE...".
  std::stringstream ls(out);
  std::string line;
  while (std::getline(ls, line)) {
    EXPECT_EQ(line.find(":CONSOLE"), std::string::npos) << line;
  }
}

}  // namespace headroom::testing
