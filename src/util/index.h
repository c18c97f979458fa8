// Graph, chain and integer-program code stores ids as int and indexes std::vector with them: one
// spelling of that cast, shared (a file-local copy in each would collide in a unity build).
#pragma once

#include <cstddef>

namespace headroom {

inline size_t at(int i) { return static_cast<size_t>(i); }

}  // namespace headroom
