#include "report/engine_config.h"

#include "report/deepspeed_config.h"

namespace headroom {

std::optional<EmitKind> parse_emit_kind(std::string_view s) {
  if (s == "deepspeed") return EmitKind::DeepSpeed;
  if (s == "fsdp") return EmitKind::Fsdp;
  if (s == "accelerate") return EmitKind::Accelerate;
  if (s == "megatron") return EmitKind::Megatron;
  return std::nullopt;
}

std::string_view emit_kind_name(EmitKind k) {
  switch (k) {
    case EmitKind::DeepSpeed: return "deepspeed";
    case EmitKind::Fsdp: return "fsdp";
    case EmitKind::Accelerate: return "accelerate";
    case EmitKind::Megatron: return "megatron";
  }
  return "";
}

Result<std::string> engine_config(EmitKind kind, const Estimate& e) {
  switch (kind) {
    case EmitKind::DeepSpeed: return deepspeed_config(e);
    case EmitKind::Fsdp: return fsdp_config(e);
    case EmitKind::Accelerate: return accelerate_config(e);
    case EmitKind::Megatron: return megatron_config(e);
  }
  return Result<std::string>::failure("unknown --emit kind");
}

}  // namespace headroom
