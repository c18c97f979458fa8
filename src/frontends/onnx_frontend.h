// The ONNX frontend behind a load boundary: model_source reaches the importer only through this
// table, so that a program which never reads a .onnx file does not load ONNX and protobuf.
//
// Where the table comes from:
//  - a program that links headroom_onnx (the tests, the Python extension, the fuzzers, a
//    find_package consumer) calls link_onnx_frontend() (frontends/onnx/onnx_frontend_link.h) once
//    and the importer runs in-process;
//  - otherwise (the CLI) the plugin headroom-onnx.so is opened on first use (util/plugins.h) and
//    its entry point headroom_onnx_frontend_v1 returns the table.
//
// Invariant: every entry is set; the table, once obtained, is the same for the life of the process.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "frontends/onnx/onnx_export_kind.h"
#include "frontends/onnx/onnx_import.h"
#include "ir/weight_data.h"
#include "util/error.h"

namespace headroom {

struct OnnxFrontend {
  Result<Graph> (*import)(const std::string& path, const OnnxImportOptions& options) = nullptr;
  std::function<Graph(const BuildConfig&)> (*graph_loader)(const std::string& path, const OnnxImportOptions& base) = nullptr;
  std::optional<OnnxExportFacts> (*inspect_export)(const std::string& path) = nullptr;
  std::string (*eval_export_for_training_message)(const std::string& model, const OnnxExportFacts& facts) = nullptr;
  std::string (*fixed_batch_message)(const std::string& model, const OnnxExportFacts& facts, int64_t batch) = nullptr;
  Result<WeightData> (*read_weights)(const std::string& path) = nullptr;
  std::string (*fit_fixed_batch_message)(const std::string& model, const OnnxExportFacts& facts) = nullptr;
};

// The C name of the plugin's entry point: `const OnnxFrontend* headroom_onnx_frontend_v1()`.
inline constexpr const char* kOnnxPluginEntry = "headroom_onnx_frontend_v1";
inline constexpr const char* kOnnxPluginFile = "headroom-onnx.so";

// The in-process table when one was provided, else the plugin's (opened on first call). Throws
// InputError when the plugin is needed and cannot be loaded.
const OnnxFrontend& onnx_frontend();

// Makes `table` the frontend of this process (link_onnx_frontend calls it).
void provide_onnx_frontend(const OnnxFrontend& table);

}  // namespace headroom
