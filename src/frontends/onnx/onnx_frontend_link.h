// For programs that link the ONNX frontend (headroom_onnx) into themselves: makes the in-process
// importer the process's ONNX frontend (frontends/onnx_frontend.h), so no plugin is opened.
#pragma once

#include "frontends/onnx_frontend.h"

namespace headroom {

// The table of the linked-in importer.
const OnnxFrontend& linked_onnx_frontend();

// Idempotent; call before the first ONNX model is read.
void link_onnx_frontend();

}  // namespace headroom
