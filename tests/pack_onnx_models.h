// Test helper: small ONNX models with known weight values for the pack tests (bit-identical
// layers, the pack page). The trio:
//   a.onnx  x[b,3,4,4] -> conv1 (4x3x3x3 + bias, pad 1) -> bn1 -> Relu -> conv2 (4x4x1x1) -> bn2
//           -> GlobalAveragePool -> Flatten -> fc (Gemm [2,4] + bias); weights inline (raw_data);
//   b.onnx  the same backbone with a 3-class head, conv1 stored in typed float_data, conv2 with
//           one bit of element 5 flipped;
//   c.onnx  a copy of a.onnx with its weights in external data (c.weights).
// Bytes (fp32): conv1 (108 + 4) x 4 = 448; bn1, bn2 4 x [4] x 4 = 64 each (fresh: ones, zeros,
// zeros, ones, alike in every model); conv2 16 x 4 = 64; fc (4 x classes + classes) x 4 = 20 x
// classes; plus 2 x 8 bytes of num_batches_tracked the importer adds (no op reads them).
#pragma once

#include <string>
#include <vector>

#include "onnx_test_models.h"
#include "pack/pack.h"

namespace headroom::testing {

std::vector<float> values(size_t n, int seed);  // deterministic, different for each seed
std::string le_bytes(const std::vector<float>& v);  // little-endian fp32
onnx::TensorProto* find_initializer(OnnxModel& m, const std::string& name);
enum class Store { Raw, Typed };
void set_values(OnnxModel& m, const std::string& name, const std::vector<float>& v, Store how = Store::Raw);
OnnxModel backbone(int64_t classes);
// Moves every initializer's bytes into one external data file `file` in `dir`.
void externalize(OnnxModel& m, const std::string& dir, const std::string& file);
// An empty folder under the test temp dir.
std::string fresh_dir(const std::string& name);
// The CLI's loader (src/cli/main.cc): import at the batch, then read the weight values.
LoadedModel load_onnx(const std::string& path, int64_t batch);

struct Trio {
  std::string dir, a, b, c;
};
Trio write_trio(const std::string& name = "trio");

}  // namespace headroom::testing
