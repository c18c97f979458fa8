// torchvision 0.14 mobilenet_v2 (width_mult 1.0), 224x224 input, 1000 classes.
//
// Conv2dNormActivation = Sequential(conv(bias=False), BatchNorm2d, ReLU6(inplace=True)); ReLU6 is
// F.hardtanh(x, 0, 6, inplace=True). InvertedResidual: Sequential `conv` of [pw
// Conv2dNormActivation when expand_ratio != 1], dw Conv2dNormActivation, pw-linear conv,
// BatchNorm2d; `x + self.conv(x)` (out of place) when stride == 1 and inp == oup. A module's input
// stays referenced by its caller (the enclosing Sequential's local) until the module returns. The
// head is nn.functional.adaptive_avg_pool2d(x, (1, 1)), flatten, Dropout(0.2), Linear.
#include <array>

#include "frontends/zoo/losses.h"
#include "frontends/zoo/registry.h"

namespace headroom {
namespace {

TensorId conv_bn_relu6(GraphBuilder& b, const std::string& p, TensorId x, int64_t out, int64_t k,
                       int64_t stride, int64_t groups) {
  size_t scope = b.open_scope();
  b.hold(x);
  Conv2dSpec s = Conv2dSpec::square(k, stride, (k - 1) / 2, false);
  s.groups = groups;
  TensorId y = b.conv2d(p + ".0", x, out, s);
  y = b.batch_norm2d(p + ".1", y);
  y = b.hardtanh(p + ".2", y, 0.0, 6.0, true);
  b.release_holds(scope);
  return y;
}

TensorId inverted_residual(GraphBuilder& b, const std::string& p, TensorId x, int64_t inp,
                           int64_t oup, int64_t stride, int64_t expand_ratio) {
  size_t scope = b.open_scope();
  b.hold(x);
  const int64_t hidden = inp * expand_ratio;  // int(round(inp * expand_ratio)), integers here
  int i = 0;  // index in the `conv` Sequential
  TensorId y = x;
  if (expand_ratio != 1) {
    y = conv_bn_relu6(b, p + ".conv." + std::to_string(i++), y, hidden, 1, 1, 1);
  }
  y = conv_bn_relu6(b, p + ".conv." + std::to_string(i++), y, hidden, 3, stride, hidden);
  y = b.conv2d(p + ".conv." + std::to_string(i++), y, oup, Conv2dSpec::square(1, 1, 0, false));
  y = b.batch_norm2d(p + ".conv." + std::to_string(i++), y);
  if (stride == 1 && inp == oup) y = b.add(p + ".add", x, y);
  b.release_holds(scope);
  return y;
}

Graph build_mobilenet_v2(const ModelSpec& spec, const BuildConfig& cfg) {
  SpecReader r(spec);
  int64_t classes = r.get_int("classes", 1000);
  int64_t size = r.get_int("image", 224);
  r.reject_unused();
  GraphBuilder b(spec.name, cfg.dtype);
  b.set_dim("batch", cfg.batch);
  TensorId x = b.input("input", {cfg.batch, 3, size, size}, cfg.dtype);
  // t (expand ratio), c (output channels), n (repeats), s (first stride)
  const std::array<std::array<int64_t, 4>, 7> setting = {{
      {1, 16, 1, 1},
      {6, 24, 2, 2},
      {6, 32, 3, 2},
      {6, 64, 4, 2},
      {6, 96, 3, 1},
      {6, 160, 3, 2},
      {6, 320, 1, 1},
  }};
  int64_t in = 32;
  int index = 0;  // index in the `features` Sequential
  x = conv_bn_relu6(b, "features." + std::to_string(index++), x, in, 3, 2, 1);
  for (const auto& [t, c, n, s] : setting) {
    for (int64_t i = 0; i < n; ++i) {
      x = inverted_residual(b, "features." + std::to_string(index++), x, in, c, i == 0 ? s : 1, t);
      in = c;
    }
  }
  x = conv_bn_relu6(b, "features." + std::to_string(index++), x, 1280, 1, 1, 1);
  x = b.adaptive_avg_pool2d("adaptive_avg_pool2d", x, 1, 1);
  x = b.flatten("flatten", x, 1);
  // x = self.classifier(x): the caller's x (the pooled features) lives until the Sequential
  // returns, past the dropout (found by capturing the torchvision module, python/tests).
  size_t classifier_scope = b.open_scope();
  b.hold(x);
  x = b.dropout("classifier.0", x, 0.2 * cfg.dropout_scale);
  x = b.linear("classifier.1", x, classes);
  b.release_holds(classifier_scope);
  b.mark_output(x);
  b.begin_loss();
  b.set_loss(add_loss(b, x, LossKind::CrossEntropy, cfg));
  return b.finish();
}

}  // namespace

void register_mobilenet(std::vector<ZooEntry>& out) {
  out.push_back({"mobilenet_v2", "torchvision mobilenet_v2 (224x224, 1000 classes)", "vision",
                 false, build_mobilenet_v2});
}

}  // namespace headroom
