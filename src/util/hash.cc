#include "util/hash.h"

#include <xxhash.h>

#include "util/error.h"

namespace headroom {

struct Hasher64::State {
  XXH3_state_t* s = nullptr;
};

uint64_t hash64(std::string_view bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

Hasher64::Hasher64() : state_(std::make_unique<State>()) {
  state_->s = XXH3_createState();
  HEADROOM_CHECK(state_->s != nullptr, "XXH3_createState: out of memory");
  HEADROOM_CHECK(XXH3_64bits_reset(state_->s) == XXH_OK, "XXH3_64bits_reset");
}

Hasher64::~Hasher64() { XXH3_freeState(state_->s); }

void Hasher64::update(const void* data, size_t size) {
  if (size == 0) return;
  HEADROOM_CHECK(XXH3_64bits_update(state_->s, data, size) == XXH_OK, "XXH3_64bits_update");
}

void Hasher64::update_u64(uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
  update(b, 8);
}

uint64_t Hasher64::digest() const { return XXH3_64bits_digest(state_->s); }

}  // namespace headroom
