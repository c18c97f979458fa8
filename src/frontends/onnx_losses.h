// The training loss of an ONNX model, as `--loss` spells it: one loss on one graph output, a
// weighted sum of losses over several outputs (auxiliary heads), or `none` (the export computes
// its own loss). Each loss is the builder call a built-in model's loss makes (zoo/losses.h for
// cross-entropy, next-token and mse; GraphBuilder's bce/l1/smooth-l1), so there is one loss
// engine; the sum is the Python expression `ce(out0) + 0.4 * ce(aux)` evaluated left to right.
//
// Grammar (spaces around tokens are ignored):
//   spec   := "none" [":" output] | term ("+" term)*
//   term   := [weight "*"] kind [":" output]
//   kind   := ce | cross-entropy | pixel-ce | token-ce | next-token | mse | bce | l1 | smooth-l1
//   output := a graph output's name, or its 0-based index (a name wins over an index)
//   weight := a positive decimal number
// Without ":output" a term takes the first floating-point graph output.
//
// It reads no ONNX (the IR and the zoo's losses only), so it sits beside model_source, which
// parses --loss before a file is opened; the ONNX lowering builds the terms.
//
// Invariants: parsing never looks at a model (a spec is checked for syntax alone; outputs and
// shapes are checked when the graph is built); every problem is one InputError line.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/builder.h"

namespace headroom {

enum class OnnxLossFn : uint8_t {
  // F.cross_entropy by rank: [N,C] per row, [B,S,V] per token (logits.view(-1, V), as
  // Hugging Face heads do), [N,C,d1,...] (rank >= 4) per pixel with class dimension 1.
  CrossEntropy,
  PixelCrossEntropy,  // class dimension 1 at any rank >= 2: [N,C,L] with targets [N,L] too
  TokenCrossEntropy,  // the last dimension is the class: [..., V] viewed as [-1, V]
  NextToken,          // Hugging Face's shifted causal-LM loss on [B,S,V]
  Mse,
  BceWithLogits,
  L1,
  SmoothL1,
};

struct OnnxLossTerm {
  // Written as `w*kind`: the loss is multiplied by w (a mul by a Python float, even for 1).
  std::optional<double> weight;
  OnnxLossFn fn = OnnxLossFn::CrossEntropy;
  std::string output;  // "" = the first floating-point graph output
  std::string text;    // the term as written, for messages
};

struct OnnxLossSpec {
  bool none = false;  // the graph's own scalar output is the loss
  std::string none_output;  // `none:OUTPUT`: that output (several scalar outputs)
  std::vector<OnnxLossTerm> terms;
};

// Parses `text` (the --loss value); InputError naming what is wrong.
OnnxLossSpec parse_onnx_loss_spec(const std::string& text);

// A graph output as a loss term sees it.
struct OnnxLossOutput {
  std::string name;
  TensorId tensor;
};

// Builds the loss stage for `spec` (not `none`) on the graph's outputs and returns the loss.
// InputError for an output that does not exist, is not floating-point, or has a shape the term's
// loss does not take.
TensorId build_onnx_loss(GraphBuilder& b, const OnnxLossSpec& spec, const std::vector<OnnxLossOutput>& outputs);

// The loss for `none`: the output `spec.none_output` names, else the graph's one floating-point
// output of a single element. InputError when it is not a floating-point scalar, or when there is
// no such output or more than one (naming them).
TensorId graph_scalar_loss(const GraphBuilder& b, const OnnxLossSpec& spec, const std::vector<OnnxLossOutput>& outputs);

}  // namespace headroom
