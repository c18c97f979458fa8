// Image-list exports: torchvision's detection models take a list of [C, H, W] images, and the
// export of one call holds one rank-3 image input that the model's transform
// (GeneralizedRCNNTransform: normalize, then `image[None]` before the resize) turns into a batch
// of one. Such an input has no batch axis: its axis 0 is the channels, not a batch of 3.
//
// The rule: the graph's first input (initializers aside) is a rank-3 floating-point tensor with
// static dims and 1 or 3 channels on axis 0, and an Unsqueeze at axis 0 reads it directly or
// through elementwise ops (Sub, Div, Mul, Add, Cast, Identity: the normalization).
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace headroom::onnx_import {

// The image's static [C, H, W] when `input` (a graph input of `g`) is one image of an image-list
// export; nothing otherwise.
std::optional<std::vector<int64_t>> image_list_input(const onnx::GraphProto& g,
                                                     const onnx::ValueInfoProto& input);

// "one image (input 'images' [3,320,320], which the graph unsqueezes to a batch of one: an
// image-list export, as torchvision's detection models are)", for messages and notes.
std::string image_list_text(const std::string& input, const std::vector<int64_t>& image);

}  // namespace headroom::onnx_import
