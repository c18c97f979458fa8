// What kind of export an ONNX file is, read before any run is set up, so that a run the file
// cannot answer is refused up front instead of being estimated as something else:
//
//   fixed batch   no graph input has a symbolic batch axis (a dim_param on axis 0 or named like
//                 a batch): the file holds one batch size, that of its first input's axis 0 --
//                 except an image-list export (onnx_image_list.h: one [C, H, W] image that the
//                 graph unsqueezes), which holds batch 1 and has no batch axis.
//   eval mode     torch.onnx.export in eval mode (its default, TrainingMode.EVAL) folds every
//                 BatchNorm that follows a Conv into the Conv's weights, which then carry names
//                 the exporter makes up ("onnx::Conv_12") instead of the parameter's
//                 ("conv1.weight"), and drops every Dropout; a BatchNorm it cannot fold is written
//                 in eval mode (training_mode 0 from opset 14, one output before). Training
//                 exports keep parameter names, BatchNormalization nodes and their running
//                 statistics outputs (checked on torch 1.13, opsets 13, 14 and 17). A model
//                 without BatchNorm (an MLP) exports the same program in both modes apart from
//                 Dropout, so nothing marks it: it is not refused.
//
// Invariant: inspection never fails a run; a file it cannot read yields no facts and the import
// reports the problem with its own message.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace headroom {

struct OnnxExportFacts {
  // The batch the file was exported with, when no input has a symbolic batch axis.
  std::optional<int64_t> fixed_batch;
  std::string fixed_batch_input;  // the graph input that carries it
  // An image-list export's one image [C, H, W] (fixed_batch is then 1); empty otherwise.
  std::vector<int64_t> image;
  // Why the file is an eval-mode export ("" when nothing says so), e.g. "3 Conv weights hold
  // folded batch norm ('onnx::Conv_12', ...) and it has no BatchNormalization".
  std::string eval_mode_evidence;
};

// Facts of the file at `path`; nullopt when it cannot be read or parsed.
std::optional<OnnxExportFacts> inspect_onnx_export(const std::string& path);

// The same from a serialized ModelProto.
std::optional<OnnxExportFacts> inspect_onnx_export_bytes(const std::string& bytes);

// The one line that refuses --mode train on an eval-mode export named `model`.
std::string eval_export_for_training_message(const std::string& model, const OnnxExportFacts& facts);

// The one line that refuses --batch `batch` on a fixed-batch export named `model`.
std::string fixed_batch_message(const std::string& model, const OnnxExportFacts& facts, int64_t batch);

// The one line that refuses fit's batch search on a fixed-batch or image-list export.
std::string fit_fixed_batch_message(const std::string& model, const OnnxExportFacts& facts);

}  // namespace headroom
