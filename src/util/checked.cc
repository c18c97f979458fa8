#include "util/checked.h"

#include <cmath>
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

int64_t checked_round(double value, std::string_view what) {
  // 2^63 is exact in double; every double below it in magnitude rounds into int64.
  if (!std::isfinite(value) || std::fabs(value) >= 9223372036854775808.0) {
    throw InputError("value overflows 64 bits while computing " + std::string(what) + " (" +
                     std::to_string(value) + ")");
  }
  return static_cast<int64_t>(std::llround(value));
}

}  // namespace headroom
