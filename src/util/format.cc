#include "util/format.h"

#include <fmt/format.h>

namespace headroom {

std::string human_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes < 0 ? -bytes : bytes);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  std::string sign = bytes < 0 ? "-" : "";
  if (u == 0) return sign + fmt::format("{} B", static_cast<int64_t>(v));
  int decimals = v >= 100 ? 0 : v >= 10 ? 1 : 2;
  return sign + fmt::format("{:.{}f} {}", v, decimals, units[u]);
}

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (n < 0 ? "-" : "") + out;
}

namespace {

// 3 significant digits without an exponent: 0.851, 98.1, 355, 12345.
std::string three_digits(double v) {
  if (v >= 100) return fmt::format("{:.0f}", v);
  if (v >= 10) return fmt::format("{:.1f}", v);
  if (v >= 1) return fmt::format("{:.2f}", v);
  return fmt::format("{:.3f}", v);
}

}  // namespace

std::string human_duration_ms(double ms) {
  const double s = ms / 1e3;
  if (s < 1) return three_digits(ms) + " ms";
  if (s < 120) return three_digits(s) + " s";
  if (s < 120 * 60) return three_digits(s / 60) + " min";
  if (s < 48 * 3600) return three_digits(s / 3600) + " h";
  if (s < 730 * 86400) return three_digits(s / 86400) + " days";
  return three_digits(s / (365 * 86400.0)) + " years";
}

std::string percent(int64_t part, int64_t total) {
  if (total <= 0) return "-";
  return fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / static_cast<double>(total));
}

std::string escape_control(std::string_view text) {
  static const char* kHex = "0123456789abcdef";
  std::string r;
  r.reserve(text.size());
  for (char ch : text) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c != 0x7f) {
      r += ch;
    } else {
      r += "\\x";
      r += kHex[c >> 4];
      r += kHex[c & 15];
    }
  }
  return r;
}

}  // namespace headroom
