#include "frontends/model_source.h"

#include "frontends/onnx/onnx_import.h"
#include "frontends/onnx/onnx_weights.h"
#include "util/error.h"

namespace headroom {

ModelSourceKind model_source_kind(const std::string& model) {
  if (looks_like_onnx_path(model)) return ModelSourceKind::Onnx;
  return ModelSourceKind::Builtin;
}

void select_frontend(EstimateOptions& options, const ModelSourceOptions& source) {
  if (source.captured) {
    if (!source.dims.empty()) throw InputError("--dim applies to ONNX files, not to a captured module");
    if (source.allow_unknown) throw InputError("--allow-unknown applies to ONNX files, not to a captured module");
    options.graph_loader = source.captured;
    return;
  }
  switch (model_source_kind(options.model)) {
    case ModelSourceKind::Builtin:
      if (!source.dims.empty()) {
        throw InputError("--dim applies to ONNX files; '" + options.model + "' is a built-in model");
      }
      if (source.allow_unknown) {
        throw InputError("--allow-unknown applies to ONNX files; '" + options.model + "' is a built-in model");
      }
      return;
    case ModelSourceKind::Onnx: {
      OnnxImportOptions io;
      io.dims = source.dims;
      io.allow_unknown = source.allow_unknown;
      io.infer_inplace = true;
      options.graph_loader = onnx_graph_loader(options.model, io);
      return;
    }
    case ModelSourceKind::Captured: break;  // never chosen from text
  }
}

LoadedModel load_model_for_pack(const std::string& model, int64_t batch) {
  if (model_source_kind(model) == ModelSourceKind::Builtin) return load_builtin_model(model, batch);
  OnnxImportOptions io;
  io.batch = batch;
  io.with_loss = false;
  Result<Graph> g = import_onnx(model, io);
  if (!g.ok()) throw InputError(g.error());
  LoadedModel lm = loaded_from_graph(g.value());
  // The values, for the bit-identical layer check; files without them are reported, not errors.
  Result<WeightData> w = read_onnx_weights(model);
  if (!w.ok()) throw InputError(w.error());
  lm.weights = w.value();
  return lm;
}

}  // namespace headroom
