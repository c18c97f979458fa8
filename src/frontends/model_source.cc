#include "frontends/model_source.h"

#include "frontends/hf/hf_config.h"
#include "frontends/hf/hf_frontend.h"
#include "frontends/onnx_frontend.h"
#include "frontends/onnx_losses.h"
#include "util/error.h"

namespace headroom {

ModelSourceKind model_source_kind(const std::string& model) {
  if (looks_like_onnx_path(model)) return ModelSourceKind::Onnx;
  if (looks_like_hf_config(model)) return ModelSourceKind::HuggingFace;
  return ModelSourceKind::Builtin;
}

void select_frontend(EstimateOptions& options, const ModelSourceOptions& source) {
  // A captured program is the source whenever one is handed in; the model text is then its name.
  const ModelSourceKind kind = source.captured ? ModelSourceKind::Captured : model_source_kind(options.model);
  const std::string what = kind == ModelSourceKind::Captured ? "a captured module" : "'" + options.model + "'";
  if (kind != ModelSourceKind::HuggingFace) {
    if (options.generation) throw InputError("--mode generate needs a Hugging Face config.json; " + what + " is not one");
    if (options.attention != AttentionKind::Default) throw InputError("--attention applies to Hugging Face configs; " + what + " is not one");
    if (options.lora) throw InputError("--lora applies to Hugging Face decoder configs; " + what + " is not one");
    if (options.weights != WeightFormat::Default) throw InputError("--weights applies to Hugging Face decoder configs; " + what + " is not one");
  }
  if ((kind == ModelSourceKind::Onnx || kind == ModelSourceKind::Captured) && options.parallel.tensor_parallel != 1) {
    throw InputError("--tensor-parallel needs a model with a Megatron split (gpt2, llama, a Hugging Face decoder config.json); " + what + " has none");
  }
  if (kind != ModelSourceKind::Onnx && !source.loss.empty() && source.loss != "cross-entropy" &&
      source.loss != "next-token" && source.loss != "mse") {
    throw InputError("--loss must be cross-entropy, next-token or mse, got '" + source.loss +
                     "' (loss expressions apply to ONNX files; " + what + " is not one)");
  }
  switch (kind) {
    case ModelSourceKind::Captured:
      if (!source.dims.empty()) throw InputError("--dim applies to ONNX files, not to a captured module");
      if (source.allow_unknown) throw InputError("--allow-unknown applies to ONNX files, not to a captured module");
      if (source.max_detections) throw InputError("--max-detections applies to ONNX files, not to a captured module");
      options.graph_loader = source.captured;
      return;
    case ModelSourceKind::HuggingFace: {
      if (!source.dims.empty()) throw InputError("--dim applies to ONNX files; '" + options.model + "' is a Hugging Face config");
      if (source.allow_unknown) throw InputError("--allow-unknown applies to ONNX files; '" + options.model + "' is a Hugging Face config");
      if (source.max_detections) throw InputError("--max-detections applies to ONNX files; '" + options.model + "' is a Hugging Face config");
      HfLoader l = hf_graph_loader(options.model);
      options.graph_loader = l.load;
      if (!source.precision_given && l.torch_dtype) {
        if (*l.torch_dtype == DType::BF16) options.precision = Precision::Bf16;
        if (*l.torch_dtype == DType::F16) options.precision = Precision::Fp16;
      }
      return;
    }
    case ModelSourceKind::Builtin:
      if (!source.dims.empty()) {
        throw InputError("--dim applies to ONNX files; '" + options.model + "' is a built-in model");
      }
      if (source.allow_unknown) {
        throw InputError("--allow-unknown applies to ONNX files; '" + options.model + "' is a built-in model");
      }
      if (source.max_detections) {
        throw InputError("--max-detections applies to ONNX files; '" + options.model + "' is a built-in model");
      }
      return;
    case ModelSourceKind::Onnx: {
      OnnxImportOptions io;
      io.dims = source.dims;
      io.allow_unknown = source.allow_unknown;
      io.max_detections = source.max_detections;
      io.infer_inplace = true;
      if (!source.loss.empty()) {
        io.loss_spec = parse_onnx_loss_spec(source.loss);
        if (options.mode != RunMode::Training) throw InputError("--loss applies to --mode train");
      }
      const OnnxFrontend& onnx = onnx_frontend();
      if (std::optional<OnnxExportFacts> facts = onnx.inspect_export(options.model)) {
        if (facts->fixed_batch && source.batch_searched) {
          throw InputError(onnx.fit_fixed_batch_message(options.model, *facts));
        }
        if (facts->fixed_batch && *facts->fixed_batch != options.batch) {
          if (source.batch_given) throw InputError(onnx.fixed_batch_message(options.model, *facts, options.batch));
          options.batch = *facts->fixed_batch;
        }
        if (options.mode == RunMode::Training && !facts->eval_mode_evidence.empty()) {
          throw InputError(onnx.eval_export_for_training_message(options.model, *facts));
        }
      }
      options.graph_loader = onnx.graph_loader(options.model, io);
      return;
    }
  }
}

int64_t kv_cache_bytes_per_token(const std::string& model, DType dtype) {
  if (model_source_kind(model) != ModelSourceKind::HuggingFace) {
    throw InputError("--mode serve needs a Hugging Face decoder config.json; '" + model + "' is not one");
  }
  HfLoader l = hf_graph_loader(model);
  if (l.kv_values_per_token == 0) throw InputError("--mode serve needs a decoder-only model with a KV cache; '" + model + "' has none");
  return l.kv_values_per_token * dtype_size(dtype);
}

LoadedModel load_model_for_pack(const std::string& model, int64_t batch) {
  if (model_source_kind(model) == ModelSourceKind::Builtin) return load_builtin_model(model, batch);
  if (model_source_kind(model) == ModelSourceKind::HuggingFace) {
    BuildConfig cfg;
    cfg.batch = batch;
    cfg.inference = true;
    return loaded_from_graph(hf_graph_loader(model).load(cfg));
  }
  OnnxImportOptions io;
  io.batch = batch;
  io.with_loss = false;
  const OnnxFrontend& onnx = onnx_frontend();
  Result<Graph> g = onnx.import(model, io);
  if (!g.ok()) throw InputError(g.error());
  LoadedModel lm = loaded_from_graph(g.value());
  // The values, for the bit-identical layer check; files without them are reported, not errors.
  Result<WeightData> w = onnx.read_weights(model);
  if (!w.ok()) throw InputError(w.error());
  lm.weights = w.value();
  return lm;
}

}  // namespace headroom
