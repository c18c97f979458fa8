// The ONNX frontend: reads an exported model (a .onnx file) into headroom's Graph, with the
// PyTorch calls the exporter recorded (Conv -> conv2d, Gemm -> linear, ...) and a default loss,
// so that inference and training can be simulated as for a built-in model.
//
// Stages (import_onnx):
//   read      the file, or bytes; protobuf parsing by libprotobuf (ModelProto of onnx_pb.h);
//   check     structure: opset, tensor names defined once and before use, no cycle, graph
//             inputs with shapes, per-node schema verification (onnx::OpSchema::Verify);
//   bind      symbolic dimensions (dim_param) of the graph inputs get values from the options;
//   resolve   control flow: an If whose condition folds takes its branch, a Loop or Scan with a
//             static trip count is unrolled (onnx_control_flow.h); the new nodes are checked
//             as the file's own;
//   infer     onnx::shape_inference::InferShapes with data propagation fills every tensor's shape;
//   lower     nodes in file order become GraphBuilder calls; shape arithmetic (Shape, Gather,
//             Concat, Range, ...) folds at import time and costs no memory; known decompositions
//             (GELU's Div/Erf/Add/Mul/Mul, layer norm's ReduceMean/Sub/Pow/.../Add, MatMul + bias,
//             Pad + AveragePool) become the one PyTorch call they came from;
//   loss      the default loss (zoo/losses.h) on the model output.
//
// Weights are never read: an initializer's shape and dtype come from its declared dims and
// data_type, whether its bytes are inline, in external data, or in an external file that is
// empty or missing. Only small integer constants (shapes, axes) are decoded.
//
// Limits: ONNX carries no in-place or module information. Parameters are the floating-point
// initializers (PyTorch exports parameters and buffers as initializers); batch-norm running
// statistics and initializers used only in non-differentiable positions are buffers. Ops without a
// PyTorch counterpart in the IR are Opaque (fresh output, inputs saved for backward).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "frontends/onnx_losses.h"
#include "frontends/zoo/model_spec.h"
#include "ir/graph.h"
#include "util/error.h"

namespace headroom {

struct OnnxImportOptions {
  // Value of every symbolic batch axis: a graph input's symbolic first dimension, or a dimension
  // whose name looks like a batch (contains "batch", or is N, B, bs). Unset: batch symbols must be
  // bound through `dims`. When the model has no symbolic batch axis, a batch that differs from
  // the model's fixed leading dimension is an InputError (the file cannot be re-batched).
  std::optional<int64_t> batch;
  // NAME -> VALUE for symbolic dimensions (dim_param) of the graph inputs, e.g. {"seq", 128}.
  // Wins over `batch`. A name the inputs do not use is an InputError; so is a symbolic input
  // dimension left without a value. Values must be positive.
  std::map<std::string, int64_t> dims;
  // Value of every symbolic dimension named like a sequence ("seq", "sequence_length", "seq_len",
  // "num_tokens", T, S, L), the CLI's --seq; `dims` wins. Given while no input dimension is named
  // so: an InputError that lists the symbolic dimensions (bind one with --dim).
  std::optional<int64_t> seq;
  // Ops headroom does not know: false (default) makes them one InputError listing every unknown
  // op type with its count; true records them as Opaque elementwise ops (output shapes from shape
  // inference, else the broadcast of the inputs) and lists them in Graph::notes.
  bool allow_unknown = false;
  // Upper bound on every data-dependent count (a NonZero's or NonMaxSuppression's number of
  // results; onnx_detection.h). Unset: each takes the bound the file implies (its input's size,
  // the NMS node's max_output_boxes_per_class). Set for a model without such nodes: InputError.
  std::optional<int64_t> max_detections;
  // ONNX ops are functional. true: a Relu (or an Add of same-shaped tensors) whose input is a
  // fresh activation that nothing else reads and that its producer does not keep for backward is
  // recorded in place (relu_, add_), as torchvision writes ReLU(inplace=True) and `out +=
  // identity`.
  bool infer_inplace = false;
  // torch.onnx names nodes by the module calls around them ("/layer1/layer1.0/conv1/Conv"). true:
  // the tensors a module call reads that exist before it starts stay referenced until its last
  // node, as the caller's Python arguments do (Graph::holds); so does the result of a Concat the
  // call's own code makes and passes to a child module, a named Python local in module code
  // (`concated_features = torch.cat(inputs, 1)`; the rule and its limits are in onnx_lower.cc,
  // "module scopes"). Files without such names are unaffected.
  bool module_scopes = true;
  // Scales every Dropout's probability, as BuildConfig::dropout_scale does for built-in models:
  // 0 makes every dropout identity (the CLI's --dropout off).
  double dropout_scale = 1.0;
  // Build the loss stage (needed to simulate training; inference ignores it).
  bool with_loss = true;
  // Loss on the model output: Default is cross-entropy for a [N,C] output and MSE otherwise.
  LossKind loss = LossKind::Default;
  // The graph output the loss is computed on; "" picks the first floating-point output.
  std::string loss_output;
  // --loss as an expression (onnx_losses.h): wins over `loss` and `loss_output`.
  std::optional<OnnxLossSpec> loss_spec;
  // Graph::model; "" uses the file name without its directory and extension.
  std::string model_name;
};

// Imports the model at `path`. Every problem with the file (not a file, not protobuf, truncated,
// a cycle, a tensor used before it is produced, missing or contradictory shapes, bad or
// overflowing dims, unsupported ops, unbound symbolic dims) is a failed Result with one line that
// starts with the path.
Result<Graph> import_onnx(const std::string& path, const OnnxImportOptions& options);

// The same from the serialized ModelProto; `source` names it in messages.
Result<Graph> import_onnx_bytes(std::string_view bytes, const OnnxImportOptions& options,
                                const std::string& source = "<memory>");

// The graph of an ONNX file for one run (EstimateOptions::graph_loader): imports `path` with
// `base` at the run's batch, with its loss, its dropout and, for inference, no loss stage.
// Import problems are thrown as InputError (one line starting with the path).
std::function<Graph(const BuildConfig&)> onnx_graph_loader(const std::string& path,
                                                           const OnnxImportOptions& base);

// Whether a model argument names an ONNX file rather than a built-in model: it ends in ".onnx"
// (any case). The CLI routes such arguments here; the file need not exist yet (import reports it).
bool looks_like_onnx_path(const std::string& text);

}  // namespace headroom
