#include "frontends/onnx/onnx_frontend_link.h"

#include "frontends/onnx/onnx_weights.h"

namespace headroom {

const OnnxFrontend& linked_onnx_frontend() {
  static const OnnxFrontend table = [] {
    OnnxFrontend t;
    t.import = &import_onnx;
    t.graph_loader = &onnx_graph_loader;
    t.inspect_export = &inspect_onnx_export;
    t.eval_export_for_training_message = &eval_export_for_training_message;
    t.fixed_batch_message = &fixed_batch_message;
    t.read_weights = &read_onnx_weights;
    t.fit_fixed_batch_message = &fit_fixed_batch_message;
    return t;
  }();
  return table;
}

void link_onnx_frontend() { provide_onnx_frontend(linked_onnx_frontend()); }

}  // namespace headroom
