// "Did you mean" suggestions for unknown names, by edit distance.
#pragma once

#include <string>
#include <vector>

namespace headroom {

size_t edit_distance(const std::string& a, const std::string& b);
// " (did you mean 'x' or 'y'?)" or "" when nothing is close.
std::string suggestion_suffix(const std::string& name, const std::vector<std::string>& known);

}  // namespace headroom
