#include "util/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace headroom {
namespace {

std::string system_reason(int err) { return std::strerror(err); }

// Closes a descriptor on every path out of a function.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }

 private:
  int fd_;
};

}  // namespace

Result<std::string> read_input_file(const std::string& path, const std::string& what,
                                    int64_t max_bytes) {
  using R = Result<std::string>;
  const std::string head = "cannot read " + what + " '" + path + "': ";
  // O_NONBLOCK: opening a FIFO with no writer must not hang before fstat can refuse it.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return R::failure(head + system_reason(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return R::failure(head + system_reason(errno));
  if (S_ISDIR(st.st_mode)) return R::failure(head + "is a directory");
  if (!S_ISREG(st.st_mode)) return R::failure(head + "not a regular file");
  if (st.st_size > max_bytes) {
    return R::failure(head + "it is " + std::to_string(st.st_size) + " bytes, over the limit of " +
                      std::to_string(max_bytes) + " bytes for a " + what);
  }
  std::string bytes;
  bytes.reserve(static_cast<size_t>(st.st_size));
  std::vector<char> buf(1 << 16);
  for (;;) {
    ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return R::failure(head + system_reason(errno));
    if (n == 0) break;
    bytes.append(buf.data(), static_cast<size_t>(n));
    // The file may grow while it is read: the limit holds for what is read.
    if (static_cast<int64_t>(bytes.size()) > max_bytes) {
      return R::failure(head + "it grew past the limit of " + std::to_string(max_bytes) +
                        " bytes for a " + what + " while being read");
    }
  }
  return bytes;
}

Result<int64_t> write_file_atomically(const std::string& path, const std::string& content) {
  using R = Result<int64_t>;
  if (path.empty()) return R::failure("no output file given");
  const std::string head = "cannot write '" + path + "': ";
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) return R::failure(head + "it is a symbolic link (not followed)");
    if (S_ISDIR(st.st_mode)) return R::failure(head + "it is a directory");
    if (!S_ISREG(st.st_mode)) return R::failure(head + "it exists and is not a regular file");
  } else if (errno != ENOENT) {
    return R::failure(head + system_reason(errno));
  }
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  std::string tmp = dir + ".headroom-XXXXXX";
  std::vector<char> name(tmp.begin(), tmp.end());
  name.push_back('\0');
  // mkstemp creates the file with O_EXCL: a fresh name, never an existing file or link.
  Fd fd(::mkostemp(name.data(), O_CLOEXEC));
  if (fd.get() < 0) return R::failure(head + system_reason(errno));
  tmp.assign(name.data());
  auto fail = [&](int err) {
    ::unlink(tmp.c_str());
    return R::failure(head + system_reason(err));
  };
  // mkstemp makes the file 0600; a report is as readable as any file the user creates.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd.get(), 0666 & ~mask) != 0) return fail(errno);
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd.get(), content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(errno);
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) return fail(errno);
  if (::close(fd.release()) != 0) return fail(errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail(errno);
  return static_cast<int64_t>(content.size());
}

}  // namespace headroom
