#include "frontends/zoo/model_spec.h"

#include <charconv>

#include "util/error.h"

namespace headroom {

ModelSpec parse_model_spec(const std::string& text) {
  ModelSpec spec;
  size_t colon = text.find(':');
  spec.name = text.substr(0, colon);
  if (spec.name.empty()) throw InputError("model name is empty in '" + text + "'");
  if (colon == std::string::npos) return spec;
  std::string rest = text.substr(colon + 1);
  if (rest.empty()) throw InputError("model '" + spec.name + "': nothing after ':' (expected key=value,...)");
  size_t pos = 0;
  while (pos <= rest.size()) {
    size_t comma = rest.find(',', pos);
    std::string item = rest.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      throw InputError("model '" + spec.name + "': parameter '" + item + "' is not key=value");
    }
    std::string key = item.substr(0, eq);
    if (!spec.params.emplace(key, item.substr(eq + 1)).second) {
      throw InputError("model '" + spec.name + "': parameter '" + key + "' given twice");
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return spec;
}

int64_t SpecReader::get_int(const std::string& key, int64_t fallback, int64_t min_value) {
  used_.insert(key);
  auto it = spec_.params.find(key);
  if (it == spec_.params.end()) return fallback;
  const std::string& v = it->second;
  int64_t out = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec == std::errc::result_out_of_range) {
    throw InputError("model '" + spec_.name + "': " + key + "=" + v + " does not fit in 64 bits");
  }
  if (ec != std::errc() || end != v.data() + v.size()) {
    throw InputError("model '" + spec_.name + "': " + key + "=" + v + " is not an integer");
  }
  if (out < min_value) {
    throw InputError("model '" + spec_.name + "': " + key + "=" + v + " must be at least " + std::to_string(min_value));
  }
  return out;
}

bool SpecReader::get_bool(const std::string& key, bool fallback) {
  used_.insert(key);
  auto it = spec_.params.find(key);
  if (it == spec_.params.end()) return fallback;
  const std::string& v = it->second;
  if (v == "true" || v == "1" || v == "on" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "off" || v == "no") return false;
  throw InputError("model '" + spec_.name + "': " + key + "=" + v + " is not true or false");
}

std::string SpecReader::get_string(const std::string& key, const std::string& fallback) {
  used_.insert(key);
  auto it = spec_.params.find(key);
  return it == spec_.params.end() ? fallback : it->second;
}

void SpecReader::reject_unused() const {
  for (const auto& [key, value] : spec_.params) {
    if (!used_.count(key)) {
      std::string known;
      for (const std::string& k : used_) known += (known.empty() ? "" : ", ") + k;
      throw InputError("model '" + spec_.name + "' has no parameter '" + key + "'" +
                       (known.empty() ? " (it takes none)" : " (known: " + known + ")"));
    }
  }
}

}  // namespace headroom
