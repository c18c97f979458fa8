// 64-bit content hashes of byte strings, for finding weights that are bit-identical: XXH3-64 from
// Debian's libxxhash (a fast non-cryptographic hash with good dispersion). A hash match is only a
// candidate: callers compare the bytes before treating two buffers as equal (pack/identical.h).
//
// Invariant: the hash of a byte string does not depend on how it is split across update() calls,
// and is the same on every platform (XXH3 is specified on bytes, not on native integers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace headroom {

uint64_t hash64(std::string_view bytes);

// Streaming form: update() with consecutive pieces, then digest() (which may be called again).
class Hasher64 {
 public:
  Hasher64();
  ~Hasher64();
  Hasher64(const Hasher64&) = delete;
  Hasher64& operator=(const Hasher64&) = delete;
  void update(const void* data, size_t size);
  void update(std::string_view bytes) { update(bytes.data(), bytes.size()); }
  // Little-endian, so that a hash over integers is the same on every platform.
  void update_u64(uint64_t v);
  uint64_t digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace headroom
