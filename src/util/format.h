// Formatting shared by the text reports and messages: binary byte units, thousands separators,
// control bytes escaped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace headroom {

// "1.50 GiB", "312.0 MiB", "4.0 KiB", "12 B" (binary units, 3 significant digits).
std::string human_bytes(int64_t bytes);
// "25,557,032"
std::string with_commas(int64_t n);
// A duration given in milliseconds: "0.85 ms", "98.1 ms", "12.3 s", "38.2 min", "5.1 h", "3.2 days",
// "355 years" (365-day years), 3 significant digits.
std::string human_duration_ms(double ms);
// "12.3%" of total (0 total gives "-")
std::string percent(int64_t part, int64_t total);
// `text` with control bytes (and DEL) written as \xNN, so a name from a file or the command line
// keeps a message on one printable line.
std::string escape_control(std::string_view text);

}  // namespace headroom
