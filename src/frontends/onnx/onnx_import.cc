#include "frontends/onnx/onnx_import.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <functional>
#include <stdexcept>

#include "frontends/onnx/onnx_attr_check.h"
#include "frontends/onnx/onnx_control_flow.h"
#include "frontends/onnx/onnx_detection.h"
#include "frontends/onnx/onnx_lower.h"
#include "frontends/onnx/onnx_model.h"
#include "util/format.h"

namespace headroom {
namespace {

Graph import_model(std::string_view bytes, const OnnxImportOptions& options,
                   const std::string& default_name) {
  using namespace onnx_import;
  onnx::ModelProto model = parse_model(bytes);
  check_names(model.graph());
  check_supported_ops(model.graph(), options.allow_unknown);
  Structure st = check_structure(model);
  check_attributes(model.graph());  // before any of ONNX's shape inference runs
  check_branches(model.graph(), st.opset);
  DimBinding dims = bind_dims(model, st, options);
  DetectionBounds bounds;
  bounds.max_detections = options.max_detections;
  const int64_t opset = st.opset;
  auto bound = [&](onnx::ModelProto& m) { bound_data_dependent_sizes(m, opset, bounds); };
  if (resolve_control_flow(model, st.opset, bound) > 0 || bounds.has_data_dependent_ops) {
    // The taken branches' and unrolled bodies' nodes are top-level nodes now: the same checks as the file's own.
    check_supported_ops(model.graph(), options.allow_unknown);
    st = check_structure(model);
  }
  TypeTable types = infer_types(model);
  std::string name = options.model_name.empty() ? default_name : options.model_name;
  std::vector<std::string> bound_notes = detection_notes(bounds);
  Graph g = lower_model(model, st, dims, types, options, name);
  g.notes.insert(g.notes.end(), bound_notes.begin(), bound_notes.end());
  return g;
}

// Names in a file are arbitrary bytes: control characters in a message are escaped so that it
// stays one printable line.
std::string one_line(const std::string& text) { return escape_control(text); }

// Runs the import; every InputError (and any exception the ONNX library throws on a malformed
// file) becomes a failed Result prefixed with the source.
Result<Graph> guarded(const std::string& source, const std::function<Graph()>& fn) {
  try {
    return fn();
  } catch (const InputError& e) {
    return Result<Graph>::failure(one_line(source + ": " + e.what()));
  } catch (const std::logic_error&) {
    throw;  // a broken invariant of headroom itself
  } catch (const std::exception& e) {
    std::string what = e.what();
    return Result<Graph>::failure(
        one_line(source + ": invalid ONNX model: " + what.substr(0, what.find('\n'))));
  }
}

}  // namespace

Result<Graph> import_onnx(const std::string& path, const OnnxImportOptions& options) {
  return guarded(path, [&] {
    std::string bytes = onnx_import::read_model_file(path);
    return import_model(bytes, options, std::filesystem::path(path).stem().string());
  });
}

Result<Graph> import_onnx_bytes(std::string_view bytes, const OnnxImportOptions& options,
                                const std::string& source) {
  return guarded(source, [&] { return import_model(bytes, options, "onnx"); });
}

std::function<Graph(const BuildConfig&)> onnx_graph_loader(const std::string& path,
                                                           const OnnxImportOptions& base) {
  return [path, base](const BuildConfig& cfg) {
    OnnxImportOptions run = base;
    run.batch = cfg.batch;
    run.seq = cfg.seq;
    run.with_loss = !cfg.inference;
    run.loss = cfg.loss;
    run.dropout_scale = cfg.dropout_scale;
    Result<Graph> g = import_onnx(path, run);
    if (!g.ok()) throw InputError(g.error());
    return g.value();
  };
}

}  // namespace headroom
