// torchvision 0.14 AlexNet and VGG-11/16/19 (no batch norm), 224x224 input, 1000 classes.
// Both are nn.Sequential `features` + AdaptiveAvgPool2d + flatten + nn.Sequential `classifier`;
// every module of a Sequential is one call whose input dies when the next call is made, so no
// Python local outlives its last use. ReLUs are inplace=True; the adaptive pool is a call that
// allocates its output even when it does not change the size (7x7 -> 7x7 in VGG at 224).
#include <vector>

#include "frontends/zoo/losses.h"
#include "frontends/zoo/registry.h"

namespace headroom {
namespace {

constexpr int kMaxPool = 0;  // "M" in torchvision's cfgs

// torchvision.models.vgg.cfgs: "A" vgg11, "D" vgg16, "E" vgg19.
// clang-format off
const std::vector<int> kVgg11 = {64, kMaxPool, 128, kMaxPool, 256, 256, kMaxPool, 512, 512, kMaxPool,
                                 512, 512, kMaxPool};
const std::vector<int> kVgg16 = {64, 64, kMaxPool, 128, 128, kMaxPool, 256, 256, 256, kMaxPool,
                                 512, 512, 512, kMaxPool, 512, 512, 512, kMaxPool};
const std::vector<int> kVgg19 = {64, 64, kMaxPool, 128, 128, kMaxPool, 256, 256, 256, 256, kMaxPool,
                                 512, 512, 512, 512, kMaxPool, 512, 512, 512, 512, kMaxPool};
// clang-format on

std::string at(const std::string& seq, int i) { return seq + "." + std::to_string(i); }

Graph build_vgg(const std::vector<int>& layers, const ModelSpec& spec, const BuildConfig& cfg) {
  SpecReader r(spec);
  int64_t classes = r.get_int("classes", 1000);
  int64_t size = r.get_int("image", 224, 32);
  r.reject_unused();
  const double p = 0.5 * cfg.dropout_scale;
  GraphBuilder b(spec.name, cfg.dtype);
  b.set_dim("batch", cfg.batch);
  TensorId x = b.input("input", {cfg.batch, 3, size, size}, cfg.dtype);
  int i = 0;  // index in the features Sequential
  for (int v : layers) {
    if (v == kMaxPool) {
      x = b.max_pool2d(at("features", i++), x, {2, 2, 0, false});
    } else {
      x = b.conv2d(at("features", i++), x, v, Conv2dSpec::square(3, 1, 1, true));
      x = b.relu(at("features", i++), x, true);
    }
  }
  x = b.adaptive_avg_pool2d("avgpool", x, 7, 7);
  x = b.flatten("flatten", x, 1);
  x = b.linear("classifier.0", x, 4096);
  x = b.relu("classifier.1", x, true);
  x = b.dropout("classifier.2", x, p);
  x = b.linear("classifier.3", x, 4096);
  x = b.relu("classifier.4", x, true);
  x = b.dropout("classifier.5", x, p);
  x = b.linear("classifier.6", x, classes);
  b.mark_output(x);
  b.begin_loss();
  b.set_loss(add_loss(b, x, LossKind::CrossEntropy, cfg));
  return b.finish();
}

Graph build_alexnet(const ModelSpec& spec, const BuildConfig& cfg) {
  SpecReader r(spec);
  int64_t classes = r.get_int("classes", 1000);
  int64_t size = r.get_int("image", 224, 63);
  r.reject_unused();
  const double p = 0.5 * cfg.dropout_scale;
  GraphBuilder b(spec.name, cfg.dtype);
  b.set_dim("batch", cfg.batch);
  TensorId x = b.input("input", {cfg.batch, 3, size, size}, cfg.dtype);
  const Pool2dSpec pool{3, 2, 0, false};
  x = b.conv2d("features.0", x, 64, Conv2dSpec::square(11, 4, 2, true));
  x = b.relu("features.1", x, true);
  x = b.max_pool2d("features.2", x, pool);
  x = b.conv2d("features.3", x, 192, Conv2dSpec::square(5, 1, 2, true));
  x = b.relu("features.4", x, true);
  x = b.max_pool2d("features.5", x, pool);
  x = b.conv2d("features.6", x, 384, Conv2dSpec::square(3, 1, 1, true));
  x = b.relu("features.7", x, true);
  x = b.conv2d("features.8", x, 256, Conv2dSpec::square(3, 1, 1, true));
  x = b.relu("features.9", x, true);
  x = b.conv2d("features.10", x, 256, Conv2dSpec::square(3, 1, 1, true));
  x = b.relu("features.11", x, true);
  x = b.max_pool2d("features.12", x, pool);
  x = b.adaptive_avg_pool2d("avgpool", x, 6, 6);
  x = b.flatten("flatten", x, 1);
  x = b.dropout("classifier.0", x, p);
  x = b.linear("classifier.1", x, 4096);
  x = b.relu("classifier.2", x, true);
  x = b.dropout("classifier.3", x, p);
  x = b.linear("classifier.4", x, 4096);
  x = b.relu("classifier.5", x, true);
  x = b.linear("classifier.6", x, classes);
  b.mark_output(x);
  b.begin_loss();
  b.set_loss(add_loss(b, x, LossKind::CrossEntropy, cfg));
  return b.finish();
}

}  // namespace

void register_vgg_alexnet(std::vector<ZooEntry>& out) {
  out.push_back(
      {"alexnet", "torchvision alexnet (224x224, 1000 classes)", "vision", false, build_alexnet});
  const std::pair<const char*, const std::vector<int>*> vggs[] = {
      {"vgg11", &kVgg11}, {"vgg16", &kVgg16}, {"vgg19", &kVgg19}};
  for (const auto& [name, layers] : vggs) {
    const std::vector<int>* l = layers;
    out.push_back(
        {name, std::string("torchvision ") + name + " without batch norm (224x224, 1000 classes)",
         "vision", false,
         [l](const ModelSpec& s, const BuildConfig& c) { return build_vgg(*l, s, c); }});
  }
}

}  // namespace headroom
