#include "util/json_input.h"

#include "util/error.h"
#include "util/format.h"

namespace headroom {

nlohmann::json parse_json_input(std::string_view text, const std::string& source,
                                bool allow_comments) {
  // nlohmann's parser is iterative; the callback sees each value's depth before it is stored,
  // so a deep document is refused before anything recursive touches it.
  auto bound = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxJsonDepth)
      throw InputError(source + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
                       " levels");
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), bound, /*allow_exceptions=*/true,
                                 allow_comments);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(source + ": not valid JSON (byte " + std::to_string(e.byte) + ")");
  } catch (const nlohmann::json::out_of_range&) {
    // A number past double's range (1e999): found by chain_json_fuzz, it escaped as an
    // exception no caller caught.
    throw InputError(source + ": not valid JSON (a number out of range)");
  }
}

std::string json_value_text(const nlohmann::json& v) {
  if (v.is_number() || v.is_boolean() || v.is_null()) return v.dump();  // one short token
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    std::string cut = s.size() > 40 ? s.substr(0, 40) + "..." : s;
    return "\"" + escape_control(cut) + "\"";
  }
  return v.is_array() ? "an array" : "an object";
}

}  // namespace headroom
