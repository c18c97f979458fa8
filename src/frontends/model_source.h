// model_source: the one place that decides which frontend reads a model argument, so that the
// CLI, the Python package and `pack` resolve "resnet50", "net.onnx" and a Hugging Face
// config.json (or a checkpoint folder holding one) the same way.
//
// Invariants: the choice depends only on the argument's text (and, for a directory, on whether it
// holds a config.json), never on the options, except that a program captured from PyTorch (the
// Python package's headroom.capture) is the source whenever one is handed in; options that belong to another frontend than the
// chosen one are InputErrors naming the option (an option that does not apply is never ignored).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "estimate/estimate.h"
#include "pack/pack.h"

namespace headroom {

enum class ModelSourceKind : uint8_t { Builtin, Onnx, HuggingFace, Captured };

// Options that only some frontends take.
struct ModelSourceOptions {
  // ONNX: NAME -> VALUE for symbolic input dimensions (--dim).
  std::map<std::string, int64_t> dims;
  // ONNX: unknown ops become elementwise Opaque ops (--allow-unknown).
  bool allow_unknown = false;
  // ONNX: upper bound on every data-dependent count (--max-detections; onnx_detection.h).
  std::optional<int64_t> max_detections;
  // --loss as written, when given. ONNX files take an expression (onnx_losses.h: "ce:out+0.4*ce:aux",
  // "none", ...); other models only cross-entropy, next-token or mse (EstimateOptions::loss).
  std::string loss;
  // A program captured from an nn.Module (python/headroom/recorder.py): builds the graph for each
  // run's BuildConfig. Set, it is the model source and the model argument is its display name.
  std::function<Graph(const BuildConfig&)> captured;
  // Whether the user chose the batch (--batch, or --grad-accum's micro x accumulation). ONNX:
  // when not, a fixed-batch export runs at its own batch; when so, another batch is refused.
  bool batch_given = false;
  // Whether the run searches the batch (fit --vary batch). ONNX: a fixed-batch or image-list
  // export holds one batch, so the search is refused in one line.
  bool batch_searched = false;
  // Whether the user chose the precision (--precision). Hugging Face configs: when not, the
  // config's torch_dtype is the precision (float16 -> fp16, bfloat16 -> bf16).
  bool precision_given = false;
};

// Which frontend reads `model`.
ModelSourceKind model_source_kind(const std::string& model);

// ONNX files are also inspected (onnx_export_kind.h): a fixed-batch export sets options.batch to
// its own batch unless the batch was given, and refuses another; an eval-mode export refuses
// --mode train with the line that says how to export for training.
// Sets options.graph_loader for `options.model` (left unset for built-in models, which
// estimate() builds from the zoo), and for Hugging Face configs the default precision. Throws
// InputError when `source` or `options` hold an option the chosen frontend does not take
// (--attention and --mode generate need a Hugging Face config).
void select_frontend(EstimateOptions& options, const ModelSourceOptions& source);

// KV cache bytes per token of a Hugging Face decoder config at `dtype` (2 x layers x kv_heads x
// head_dim x bytes); InputError for any other model.
int64_t kv_cache_bytes_per_token(const std::string& model, DType dtype);

// pack's loader: every model argument, built-in or file, as an inference graph at a batch size
// (ONNX files also with their weights' values, for the identical-layer check).
LoadedModel load_model_for_pack(const std::string& model, int64_t batch);

}  // namespace headroom
