#include "ir/weight_data.h"

#include <algorithm>
#include <cstring>
#include <fstream>

#include "util/error.h"

namespace headroom {
namespace {

constexpr int64_t kChunk = 1 << 20;

// Reads the tensor's bytes [at, at + n) into `out` (n <= kChunk).
class Reader {
 public:
  explicit Reader(const TensorBytes& t) : t_(t) {
    if (t_.memory) {
      HEADROOM_CHECK(static_cast<int64_t>(t_.memory->size()) == t_.size, "inline tensor bytes of the wrong size");
      return;
    }
    in_.open(t_.file, std::ios::binary);
    if (!in_) throw InputError("cannot reopen weight file '" + t_.file + "' to compare its bytes");
    in_.seekg(static_cast<std::streamoff>(t_.offset));
  }
  const char* read(int64_t at, int64_t n) {
    if (t_.memory) return t_.memory->data() + at;
    buf_.resize(static_cast<size_t>(n));
    in_.read(buf_.data(), static_cast<std::streamsize>(n));
    if (in_.gcount() != static_cast<std::streamsize>(n)) {
      throw InputError("weight file '" + t_.file + "' changed while it was read (shorter than when it was hashed)");
    }
    return buf_.data();
  }

 private:
  const TensorBytes& t_;
  std::ifstream in_;
  std::string buf_;
};

}  // namespace

bool same_bytes(const TensorBytes& a, const TensorBytes& b) {
  if (a.dtype != b.dtype || a.shape != b.shape || a.size != b.size) return false;
  if (a.memory && a.memory == b.memory) return true;
  Reader ra(a), rb(b);
  for (int64_t at = 0; at < a.size; at += kChunk) {
    int64_t n = std::min(kChunk, a.size - at);
    const char* pa = ra.read(at, n);
    const char* pb = rb.read(at, n);
    if (std::memcmp(pa, pb, static_cast<size_t>(n)) != 0) return false;
  }
  return true;
}

}  // namespace headroom
