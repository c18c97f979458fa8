// JSON documents from users (chain and graph models, workloads, GPU catalogs): parsed with a
// bound on nesting depth, and described in messages without echoing the document back. A
// deeply nested document would otherwise exhaust the stack in the recursive code that walks,
// prints or destroys it; an echoed value could be megabytes or span lines.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace headroom {

// Deepest nesting of arrays and objects accepted (headroom's formats use at most 3).
inline constexpr int kMaxJsonDepth = 64;
// Largest JSON file read (util/file.h read_input_file's limit for these readers).
inline constexpr int64_t kMaxJsonFileBytes = int64_t{64} << 20;

// The document, or InputError "<source>: not valid JSON (byte N)" / "<source>: JSON nested
// deeper than 64 levels". Comments are accepted when `allow_comments`.
nlohmann::json parse_json_input(std::string_view text, const std::string& source,
                                bool allow_comments = false);

// A short one-line description of a value for messages: a number as written, a string quoted
// (control bytes escaped, cut at 40 characters), otherwise its type ("an array", "an object").
std::string json_value_text(const nlohmann::json& v);

}  // namespace headroom
