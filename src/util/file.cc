#include "util/file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace headroom {

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return ss.str();
}

Result<int64_t> write_file_atomically(const std::string& path, const std::string& content) {
  if (path.empty()) return Result<int64_t>::failure("no output file given");
  std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return Result<int64_t>::failure("cannot write '" + tmp + "': " + std::strerror(errno));
  bool ok = std::fwrite(content.data(), 1, content.size(), f) == content.size();
  ok = std::fflush(f) == 0 && ok;
  ok = ok && fsync(fileno(f)) == 0;
  int err = errno;
  ok = std::fclose(f) == 0 && ok;
  if (!ok) {
    if (err == 0) err = errno;
    std::remove(tmp.c_str());
    return Result<int64_t>::failure("cannot write '" + tmp + "': " + std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    std::remove(tmp.c_str());
    return Result<int64_t>::failure("cannot write '" + path + "': " + std::strerror(err));
  }
  return static_cast<int64_t>(content.size());
}

}  // namespace headroom
