// Text and JSON renderings of an Estimate. Both are deterministic: the same estimate gives
// byte-identical output. The JSON field names are a contract (docs/json-schema.md).
#pragma once

#include <string>

#include "estimate/estimate.h"

namespace headroom {

std::string estimate_text(const Estimate& e, bool color = false);
std::string estimate_json(const Estimate& e);

}  // namespace headroom
