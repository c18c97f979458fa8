// The values of a model's weights, as far as a frontend can read them: per weight tensor (by the
// name the Graph gives it) its dtype, shape, size, a 64-bit content hash and where its bytes are,
// so that pack can find layers whose weights are bit-identical (pack/identical.h).
//
// Bytes are in one canonical layout: the tensor's elements in row-major order, little-endian,
// exactly as ONNX's raw_data stores them (typed ONNX fields are converted to it), so two copies of
// one tensor hash and compare equal however each file stored them.
//
// Invariants: for every TensorBytes, `size` == product(shape) x dtype_size(dtype); `hash` is
// hash64 (util/hash.h) of the `size` bytes; the bytes are either in `memory` (exactly `size` of
// them) or at [offset, offset + size) of `file`, which was checked to be that long when read.
// Weights a frontend could not read are listed in `missing` with the reason, never guessed.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace headroom {

struct TensorBytes {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t size = 0;   // bytes
  uint64_t hash = 0;  // hash64 of the bytes
  std::shared_ptr<const std::string> memory;  // inline data; or
  std::string file;                           // a range of this file
  int64_t offset = 0;
};

struct WeightData {
  std::string source;                           // the model file, for messages
  std::map<std::string, TensorBytes> tensors;   // weight name -> bytes
  std::map<std::string, std::string> missing;   // weight name -> why its bytes are not available
};

// Whether the two tensors hold the same dtype, shape and bytes: compares the bytes themselves
// (from memory or by reading both files in chunks), not the hashes. InputError when a file can no
// longer be read as it was (changed or removed since it was hashed).
bool same_bytes(const TensorBytes& a, const TensorBytes& b);

}  // namespace headroom
