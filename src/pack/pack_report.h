// The text and JSON reports of `headroom pack`. The JSON fields are documented in docs/pack.md;
// `groups` (in greedy order, each with `bytes_saved` and `members`) is the merge plan.
#pragma once

#include <string>

#include "pack/pack.h"

namespace headroom {

std::string pack_text(const PackReport& r);
std::string pack_json(const PackReport& r);

}  // namespace headroom
