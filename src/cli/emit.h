// --emit KIND FILE (repeatable; --emit-deepspeed FILE is `--emit deepspeed FILE`): which engine
// configs a command writes (report/engine_config.h). Every config is rendered before any file
// is written, so a layout that one kind cannot express writes nothing.
//
// Invariants: kinds are deepspeed, fsdp, accelerate, each at most once; paths are non-empty.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "report/engine_config.h"

namespace headroom {

struct EmitRequest {
  EmitKind kind = EmitKind::DeepSpeed;
  std::string path;
};

// InputError on an unknown kind, a kind given twice, or an odd number of values.
std::vector<EmitRequest> parse_emit_requests(const std::vector<std::string>& pairs, const std::string& emit_deepspeed);

// Renders each request's config from the estimate `estimate_for(kind)` returns, then writes them
// all. A failure's message is returned (nothing written); `written(path, bytes)` reports each file.
Result<int> write_emits(const std::vector<EmitRequest>& requests, const std::function<Result<Estimate>(EmitKind)>& estimate_for,
                        const std::function<void(const std::string&, int64_t)>& written);

}  // namespace headroom
