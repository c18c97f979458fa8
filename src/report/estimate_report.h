// Text and JSON renderings of an Estimate. Both are deterministic: the same estimate gives
// byte-identical output. The JSON field names are a contract (docs/json-schema.md).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "estimate/estimate.h"

namespace headroom {

std::string estimate_text(const Estimate& e, bool color = false);
std::string estimate_json(const Estimate& e);
// The GPU section of a report (context, allocator, total, verdict) and its JSON fields.
std::string device_text(const DeviceMemory& d, bool color);
void device_json(const DeviceMemory& d, nlohmann::ordered_json& j);
// The time section (with a catalog GPU): one line, a second for a whole run; its JSON object.
std::string time_text(const RunTime& t);
nlohmann::ordered_json time_json(const RunTime& t);
// Every event of a simulated program, one line each: +/- bytes, running total, phase, step
// label, buffer name. For comparing with a measured allocation trace (validation/optrace.py).
std::string program_trace(const Program& p);

}  // namespace headroom
