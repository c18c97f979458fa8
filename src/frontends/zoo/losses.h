// The default and overridable losses of built-in models, built into the graph's loss stage.
#pragma once

#include "frontends/zoo/model_spec.h"
#include "ir/builder.h"

namespace headroom {

// Adds targets and the loss for a model output, following `config.loss` (or `fallback` when the
// config says Default). Classifier logits [N,C]: integer class targets [N]. Sequence logits
// [B,S,V]: cross-entropy per position, or next-token (HF's shift, which copies the logits).
// Dense logits [N,C,H,W,...]: cross-entropy per pixel (class dimension 1, targets [N,H,W,...]).
// Any output: mse against a float target shaped like it.
TensorId add_loss(GraphBuilder& b, TensorId output, LossKind fallback, const BuildConfig& config,
                  const std::string& prefix = "loss");

}  // namespace headroom
