// Attribute values checked before ONNX's shape inference sees them. The library's inference
// trusts them: a `strides` of 0 divides by zero (SIGFPE, the process dies), a `blocksize` of 0
// likewise, and huge values overflow its int64 arithmetic. Every default-domain node's window,
// grouping, axis and scale attributes are checked here for sign, range and length, each failure
// one InputError naming the node and the attribute.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>

namespace headroom::onnx_import {

// Largest stride, dilation, kernel extent, pad, group or block size accepted: far above any real
// model, and small enough that ONNX's shape arithmetic (products of two of them with a dimension)
// stays inside int64.
inline constexpr int64_t kMaxWindowValue = int64_t{1} << 31;
// Largest |axis| accepted in `axes` and `perm` (ranks of real tensors are below 10).
inline constexpr int64_t kMaxAxis = 64;

// InputError for the first node whose attributes ONNX's shape inference cannot take safely.
void check_attributes(const onnx::GraphProto& g);

}  // namespace headroom::onnx_import
