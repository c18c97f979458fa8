// Element types of tensors and their widths in bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace headroom {

enum class DType : uint8_t { F32, F16, BF16, F64, I64, I32, I8, U8, Bool };

int64_t dtype_size(DType t);
std::string_view dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view name);
bool is_floating(DType t);

}  // namespace headroom
