// The test binary links the ONNX importer: make it the process's ONNX frontend before any test
// runs (frontends/onnx_frontend.h), so in-process tests never open the plugin; the CLI tests run
// the real binary, which does.
#include "frontends/onnx/onnx_frontend_link.h"

namespace {
const bool kLinked = (headroom::link_onnx_frontend(), true);
}  // namespace
