#include "util/error.h"

#include <string>

namespace headroom {

void check_failed(const char* expr, const char* file, int line, const std::string& why) {
  throw std::logic_error(std::string("internal check failed: ") + expr + " at " + file + ":" +
                         std::to_string(line) + ": " + why);
}

}  // namespace headroom
