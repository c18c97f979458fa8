// libFuzzer target for the ONNX importer: any bytes must import or fail with a one-line
// InputError, never crash, hang or leak (AddressSanitizer). An imported graph must pass
// Graph::validate. The weight reader (onnx_weights.h) gets the same bytes: it must read or skip
// every initializer without reading out of bounds, with no folder for external data (so no file
// is opened). Build and run with fuzz/run_onnx_fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "frontends/onnx/onnx_import.h"
#include "frontends/onnx/onnx_weights.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  headroom::OnnxImportOptions options;
  options.batch = 2;
  // Vary the options with the input so both paths of each are explored.
  options.allow_unknown = size % 2 == 0;
  options.infer_inplace = size % 3 == 0;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  headroom::Result<headroom::Graph> g = headroom::import_onnx_bytes(bytes, options, "fuzz");
  if (g.ok()) {
    g.value().validate();
  } else if (g.error().find('\n') != std::string::npos) {
    __builtin_trap();  // errors are one line
  }
  headroom::Result<headroom::WeightData> w = headroom::read_onnx_weights_bytes(bytes, "", "fuzz");
  if (!w.ok() && w.error().find('\n') != std::string::npos) __builtin_trap();
  return 0;
}
