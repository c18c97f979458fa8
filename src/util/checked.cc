#include "util/checked.h"

#include <string>

#include "util/error.h"

namespace headroom {

int64_t checked_mul(int64_t a, int64_t b, std::string_view what) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) {
    throw InputError("size overflows 64 bits while computing " + std::string(what) + " (" +
                     std::to_string(a) + " x " + std::to_string(b) + ")");
  }
  return r;
}

int64_t checked_add(int64_t a, int64_t b, std::string_view what) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) {
    throw InputError("size overflows 64 bits while computing " + std::string(what) + " (" +
                     std::to_string(a) + " + " + std::to_string(b) + ")");
  }
  return r;
}

}  // namespace headroom
