// Text and JSON renderings of an Estimate. Both are deterministic: the same estimate gives
// byte-identical output. The JSON field names are a contract (docs/json-schema.md).
#pragma once

#include <string>

#include "estimate/estimate.h"

namespace headroom {

std::string estimate_text(const Estimate& e, bool color = false);
std::string estimate_json(const Estimate& e);
// Every event of a simulated program, one line each: +/- bytes, running total, phase, step
// label, buffer name. For comparing with a measured allocation trace (validation/optrace.py).
std::string program_trace(const Program& p);

}  // namespace headroom
