// The plugin headroom-onnx.so (frontends/onnx_frontend.h): the ONNX importer with ONNX and
// protobuf, opened by the CLI the first time it reads a .onnx file. Only the entry point is
// exported; the plugin's copy of headroom's library stays its own (linked with hidden symbols).
#include "frontends/onnx/onnx_frontend_link.h"

extern "C" __attribute__((visibility("default"))) const headroom::OnnxFrontend* headroom_onnx_frontend_v1() {
  return &headroom::linked_onnx_frontend();
}
