// Lowering: the nodes of a checked, bound and shape-inferred ONNX graph become GraphBuilder calls
// with PyTorch's semantics (see onnx_import.h for the pipeline and onnx_lower.cc for the table of
// ONNX ops and the PyTorch call each one records).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "frontends/onnx/onnx_import.h"
#include "frontends/onnx/onnx_model.h"
#include "ir/graph.h"

namespace headroom::onnx_import {

// REQUIRES: `st` = check_structure(model), `dims` = bind_dims(model, ...), `types` =
// infer_types(model). InputError (naming the node) for anything the file gets wrong or headroom
// cannot represent.
Graph lower_model(const onnx::ModelProto& model, const Structure& st, const DimBinding& dims,
                  const TypeTable& types, const OnnxImportOptions& options,
                  const std::string& model_name);

// Op types of `g` the lowering does not know ("domain.Op" outside the default domain), with counts.
std::map<std::string, int> unknown_op_types(const onnx::GraphProto& g);
// InputError listing every unknown op type with its count, unless `allow_unknown`.
void check_supported_ops(const onnx::GraphProto& g, bool allow_unknown);

// The ONNX op types (default domain) the lowering knows, for messages and documentation.
std::vector<std::string> supported_op_types();

}  // namespace headroom::onnx_import
