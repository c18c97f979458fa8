// Weight values of an ONNX file, for pack's bit-identical layer check (ir/weight_data.h). The
// importer itself never reads weights (onnx_import.h); this reader does, and only this.
//
// Every floating-point initializer is read in the canonical layout (little-endian, row-major):
//   - inline raw_data as it is; typed fields (float_data, double_data, and int32_data for fp16 and
//     bf16) converted to it;
//   - external data (data_location EXTERNAL): the `location` file relative to the model's folder,
//     bytes [offset, offset + length), hashed in 1 MiB chunks without loading the file.
// Anything that does not add up is skipped with a reason in WeightData::missing, never read out of
// bounds: a missing or empty data file (exports with stripped weights, tests/data/onnx), a
// location that is absolute or leaves the model's folder, an offset or length that is not a
// decimal number, a range past the end of the file, a byte count that is not shape x element size,
// a segmented tensor. Only an unreadable or unparsable model file fails the whole read.
#pragma once

#include <string>
#include <string_view>

#include "ir/weight_data.h"
#include "util/error.h"

namespace headroom {

Result<WeightData> read_onnx_weights(const std::string& path);

// The same from the serialized ModelProto; external data is looked up in `base_dir` ("" for none:
// every external tensor is then missing). `source` names the model in messages.
Result<WeightData> read_onnx_weights_bytes(std::string_view bytes, const std::string& base_dir,
                                           const std::string& source = "<memory>");

}  // namespace headroom
