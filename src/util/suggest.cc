#include "util/suggest.h"

#include <algorithm>

namespace headroom {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string suggestion_suffix(const std::string& name, const std::vector<std::string>& known) {
  std::vector<std::pair<size_t, std::string>> scored;
  for (const std::string& k : known) {
    size_t d = edit_distance(name, k);
    bool prefix = !name.empty() && k.rfind(name, 0) == 0;
    if (d <= std::max<size_t>(2, name.size() / 3) || prefix) scored.push_back({prefix ? 0 : d, k});
  }
  std::sort(scored.begin(), scored.end());
  if (scored.empty()) return "";
  std::string out = " (did you mean '" + scored[0].second + "'";
  for (size_t i = 1; i < std::min<size_t>(scored.size(), 3); ++i) out += " or '" + scored[i].second + "'";
  return out + "?)";
}

}  // namespace headroom
