// Shared by the libFuzzer targets: an error must be one line (a newline in a message traps, so
// the fuzzer records the input as a crash).
#pragma once

#include <string>

namespace headroom::fuzz {

inline void require_one_line(const std::string& message) {
  if (message.find('\n') != std::string::npos) __builtin_trap();
}

}  // namespace headroom::fuzz
