// Size arithmetic that cannot silently overflow: every byte count headroom computes from user
// input (batch, sequence, layer widths) goes through these, and an overflow becomes an InputError
// naming what was being computed.
#pragma once

#include <cstdint>
#include <string_view>

namespace headroom {

int64_t checked_mul(int64_t a, int64_t b, std::string_view what);
int64_t checked_add(int64_t a, int64_t b, std::string_view what);
// `value` rounded to the nearest int64; InputError when it is not finite or outside int64 (a
// cast would be undefined and print a wrong, often negative, number).
int64_t checked_round(double value, std::string_view what);

}  // namespace headroom
