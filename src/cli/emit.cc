#include "cli/emit.h"

#include "util/file.h"

namespace headroom {

std::vector<EmitRequest> parse_emit_requests(const std::vector<std::string>& pairs, const std::string& emit_deepspeed) {
  if (pairs.size() % 2 != 0) throw InputError("--emit takes KIND FILE (deepspeed, fsdp, accelerate or megatron, then a path)");
  std::vector<EmitRequest> out;
  auto add = [&](EmitKind k, const std::string& path) {
    for (const EmitRequest& r : out) {
      if (r.kind == k) throw InputError("--emit " + std::string(emit_kind_name(k)) + " is given twice");
    }
    if (path.empty()) throw InputError("--emit " + std::string(emit_kind_name(k)) + " needs a file name");
    out.push_back({k, path});
  };
  for (size_t i = 0; i < pairs.size(); i += 2) {
    auto k = parse_emit_kind(pairs[i]);
    if (!k) throw InputError("--emit must be deepspeed, fsdp, accelerate or megatron, got '" + pairs[i] + "'");
    add(*k, pairs[i + 1]);
  }
  if (!emit_deepspeed.empty()) add(EmitKind::DeepSpeed, emit_deepspeed);
  return out;
}

Result<int> write_emits(const std::vector<EmitRequest>& requests, const std::function<Result<Estimate>(EmitKind)>& estimate_for,
                        const std::function<void(const std::string&, int64_t)>& written) {
  std::vector<std::string> contents;
  for (const EmitRequest& r : requests) {
    Result<Estimate> e = estimate_for(r.kind);
    if (!e.ok()) return Result<int>::failure(e.error());
    Result<std::string> config = engine_config(r.kind, e.value());
    if (!config.ok()) return Result<int>::failure(config.error());
    contents.push_back(config.value());
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    Result<int64_t> w = write_file_atomically(requests[i].path, contents[i]);
    if (!w.ok()) return Result<int>::failure(w.error());
    written(requests[i].path, w.value());
  }
  return static_cast<int>(requests.size());
}

}  // namespace headroom
