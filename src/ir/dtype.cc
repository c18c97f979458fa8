#include "ir/dtype.h"

namespace headroom {

int64_t dtype_size(DType t) {
  switch (t) {
    case DType::F64:
    case DType::I64: return 8;
    case DType::F32:
    case DType::I32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::I8:
    case DType::U8:
    case DType::Bool: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
    case DType::F64: return "float64";
    case DType::I64: return "int64";
    case DType::I32: return "int32";
    case DType::I8: return "int8";
    case DType::U8: return "uint8";
    case DType::Bool: return "bool";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64, DType::I32,
                  DType::I8, DType::U8, DType::Bool}) {
    if (dtype_name(t) == name) return t;
  }
  return std::nullopt;
}

bool is_floating(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64;
}

}  // namespace headroom
