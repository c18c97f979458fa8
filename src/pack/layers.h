// Layers of a model as GEMEL sees them: the ops that own weights (conv2d, linear, batch_norm,
// layer_norm, embedding), each with a configuration key that is equal for two layers exactly when
// one layer's weights could stand in for the other's (same op kind, same weight shapes and dtypes
// in the same positions, same geometry).
//
// A layer is one such op with the weights it reads (through views). Layer ops that read a common
// weight form one layer: GPT-2's token embedding and the lm_head tied to it ("wte+lm_head"), a module called twice;
// sharing one of them shares the other, so their key lists every op and which weights they have in
// common. A layer whose weight is also read by an op that is not a layer (a weight used in a
// matmul or an add) is not a candidate. Everything not held by a candidate layer (ViT's class token
// and position embedding, rotary tables, weights of non-candidates) is the model's "other" weight
// memory, never shared; so are weights no op reads (batch norm's num_batches_tracked, 8 bytes,
// which ONNX exports name differently; the inception aux head in eval), whatever their names.
//
// Invariant (HEADROOM_CHECK): layer bytes + other bytes == Graph::weights_bytes().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace headroom {

struct Layer {
  std::vector<OpId> ops;  // usually one; several when they read a common weight
  std::string name;     // the op's module path, e.g. "layer1.0.conv1"; "wte+lm_head" for several
  OpKind kind = OpKind::Opaque;  // of the first op
  // "conv2d|1w[64,3,7,7]:f32#0|k7x7 s2x2 p3x3 d1x1 g1": per op, its kind, each weight by input
  // position with role (w parameter, b buffer), shape, dtype and index among the layer's weights,
  // then the geometry the kind reads. Ops are joined by " + ".
  // Equal keys = shareable.
  std::string config;
  std::vector<std::string> weight_names;  // the weights it owns, in first-read order (Tensor::name)
  int64_t bytes = 0;    // parameters and buffers the layer owns
  int32_t tensors = 0;  // how many tensors (one host-to-device copy each)
};

struct ModelLayers {
  std::string model;
  std::vector<Layer> layers;  // execution order
  int64_t weights_bytes = 0;  // Graph::weights_bytes()
  int64_t layer_bytes = 0;    // sum of layers[].bytes
  int64_t other_bytes = 0;    // weights owned by no candidate layer
  int32_t other_tensors = 0;
};

// Whether ops of this kind are GEMEL layers (own weights, can be merged).
bool is_layer_kind(OpKind k);

// The candidate layers of the model stage of `g` (loss ops are ignored).
ModelLayers extract_layers(const Graph& g);

}  // namespace headroom
