#include "frontends/onnx/onnx_export_kind.h"

#include <exception>
#include <set>
#include <stdexcept>

#include "frontends/onnx/onnx_image_list.h"
#include "frontends/onnx/onnx_model.h"

namespace headroom {
namespace {

int64_t opset_of(const onnx::ModelProto& m) {
  for (const auto& o : m.opset_import()) {
    if (onnx_import::is_default_domain(o.domain())) return o.version();
  }
  return 0;
}

// The exporter's name for a tensor it computed rather than a module's parameter.
bool exporter_named(const std::string& name) { return name.rfind("onnx::", 0) == 0; }

OnnxExportFacts facts_of(const onnx::ModelProto& model) {
  const onnx::GraphProto& g = model.graph();
  OnnxExportFacts f;
  std::set<std::string> initializers;
  for (const auto& t : g.initializer()) initializers.insert(t.name());

  // Fixed batch: no input (initializers aside) has a non-numeric axis 0 or a batch-named axis.
  const onnx::ValueInfoProto* first = nullptr;
  bool symbolic_batch = false;
  for (const onnx::ValueInfoProto& in : g.input()) {
    if (initializers.count(in.name())) continue;
    if (!first) first = &in;
    if (!in.type().tensor_type().has_shape()) return f;  // the import reports it
    const auto& dims = in.type().tensor_type().shape().dim();
    for (int i = 0; i < dims.size(); ++i) {
      bool value = dims[i].value_case() == onnx::TensorShapeProto_Dimension::kDimValue;
      if (!value && (i == 0 || onnx_import::is_batch_symbol(dims[i].dim_param()))) symbolic_batch = true;
    }
  }
  if (first && !symbolic_batch) {
    const auto& dims = first->type().tensor_type().shape().dim();
    if (std::optional<std::vector<int64_t>> image = onnx_import::image_list_input(g, *first)) {
      f.fixed_batch = 1;
      f.fixed_batch_input = first->name();
      f.image = *image;
    } else if (dims.size() > 0 && dims[0].dim_value() > 0) {
      f.fixed_batch = dims[0].dim_value();
      f.fixed_batch_input = first->name();
    }
  }

  // Eval mode: folded batch norm (Conv weights the exporter named, no BatchNormalization) or a
  // BatchNormalization written in eval mode.
  int folded = 0, bn = 0, bn_eval = 0;
  std::string folded_example;
  const int64_t opset = opset_of(model);
  for (const onnx::NodeProto& n : g.node()) {
    if (!onnx_import::is_default_domain(n.domain())) continue;
    if (n.op_type() == "Conv" && n.input_size() > 1 && initializers.count(n.input(1)) &&
        exporter_named(n.input(1))) {
      if (folded++ == 0) folded_example = n.input(1);
    }
    if (n.op_type() == "BatchNormalization") {
      ++bn;
      int outputs = 0;
      for (const std::string& o : n.output()) outputs += !o.empty();
      bool training = outputs > 1;
      if (opset >= 14) {
        training = false;
        for (const auto& a : n.attribute()) {
          if (a.name() == "training_mode") training = a.i() != 0;
        }
      }
      bn_eval += !training;
    }
  }
  if (folded > 0 && bn == 0) {
    f.eval_mode_evidence = std::to_string(folded) + " Conv weight" + (folded > 1 ? "s hold" : " holds") +
                           " folded batch norm ('" + folded_example + "'" + (folded > 1 ? ", ..." : "") +
                           ") and there is no BatchNormalization";
  } else if (bn_eval > 0) {
    f.eval_mode_evidence = std::to_string(bn_eval) + " BatchNormalization node" +
                           (bn_eval > 1 ? "s are" : " is") + " in eval mode";
  }
  return f;
}

}  // namespace

std::optional<OnnxExportFacts> inspect_onnx_export_bytes(const std::string& bytes) {
  try {
    return facts_of(onnx_import::parse_model(bytes));
  } catch (const std::logic_error&) {
    throw;  // a broken invariant of headroom itself
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<OnnxExportFacts> inspect_onnx_export(const std::string& path) {
  try {
    return inspect_onnx_export_bytes(onnx_import::read_model_file(path));
  } catch (const std::logic_error&) {
    throw;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string eval_export_for_training_message(const std::string& model, const OnnxExportFacts& facts) {
  return "'" + model + "' is an eval-mode export (" + facts.eval_mode_evidence +
         "), so it cannot be estimated for --mode train: export for training with "
         "torch.onnx.export(model, x, path, training=torch.onnx.TrainingMode.TRAINING, "
         "do_constant_folding=False), or use --mode infer";
}

std::string fixed_batch_message(const std::string& model, const OnnxExportFacts& facts, int64_t batch) {
  if (!facts.image.empty()) {
    return "'" + model + "' takes " + onnx_import::image_list_text(facts.fixed_batch_input, facts.image) +
           ", so it cannot run at --batch " + std::to_string(batch) + ": leave --batch out (or give 1)";
  }
  const std::string b = std::to_string(*facts.fixed_batch);
  return "'" + model + "' was exported with a fixed batch of " + b + " (input '" + facts.fixed_batch_input +
         "'), so it cannot run at --batch " + std::to_string(batch) + ": leave --batch out (or give " + b +
         "), or re-export with dynamic_axes={'" + facts.fixed_batch_input + "': {0: 'batch'}}";
}

std::string fit_fixed_batch_message(const std::string& model, const OnnxExportFacts& facts) {
  if (!facts.image.empty()) {
    return "fit searches the largest batch, but '" + model + "' takes " +
           onnx_import::image_list_text(facts.fixed_batch_input, facts.image) +
           ", so it runs at batch 1 only: use headroom estimate";
  }
  const std::string b = std::to_string(*facts.fixed_batch);
  return "fit searches the largest batch, but '" + model + "' was exported with a fixed batch of " + b +
         " (input '" + facts.fixed_batch_input + "'): re-export with dynamic_axes={'" + facts.fixed_batch_input +
         "': {0: 'batch'}} to fit it, or use headroom estimate (batch " + b + ")";
}

}  // namespace headroom
