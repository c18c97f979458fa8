// torchvision 0.14 ResNets (resnet18/34 BasicBlock, resnet50/101/152 Bottleneck), 224x224
// input, 1000 classes. ReLU is inplace=True as in torchvision; `out += identity` is in place.
#include "frontends/zoo/losses.h"
#include "frontends/zoo/registry.h"
#include <array>

namespace headroom {
namespace {

struct ResNetSpec {
  bool bottleneck;
  std::array<int, 4> blocks;
};

TensorId basic_block(GraphBuilder& b, const std::string& p, TensorId x, int64_t planes, int64_t stride,
                     bool downsample) {
  size_t scope = b.open_scope();
  b.hold(x);  // the caller's reference to the block input lasts until the block returns
  TensorId out = b.conv2d(p + ".conv1", x, planes, Conv2dSpec::square(3, stride, 1, false));
  out = b.batch_norm2d(p + ".bn1", out);
  out = b.relu(p + ".relu", out, true);
  out = b.conv2d(p + ".conv2", out, planes, Conv2dSpec::square(3, 1, 1, false));
  out = b.batch_norm2d(p + ".bn2", out);
  TensorId identity = x;
  if (downsample) {
    identity = b.conv2d(p + ".downsample.0", x, planes, Conv2dSpec::square(1, stride, 0, false));
    identity = b.batch_norm2d(p + ".downsample.1", identity);
  }
  out = b.add_(p + ".add", out, identity);
  out = b.relu(p + ".relu", out, true);
  b.release_holds(scope);
  return out;
}

TensorId bottleneck(GraphBuilder& b, const std::string& p, TensorId x, int64_t planes, int64_t stride,
                    bool downsample) {
  size_t scope = b.open_scope();
  b.hold(x);
  int64_t width = planes;
  TensorId out = b.conv2d(p + ".conv1", x, width, Conv2dSpec::square(1, 1, 0, false));
  out = b.batch_norm2d(p + ".bn1", out);
  out = b.relu(p + ".relu", out, true);
  out = b.conv2d(p + ".conv2", out, width, Conv2dSpec::square(3, stride, 1, false));
  out = b.batch_norm2d(p + ".bn2", out);
  out = b.relu(p + ".relu", out, true);
  out = b.conv2d(p + ".conv3", out, planes * 4, Conv2dSpec::square(1, 1, 0, false));
  out = b.batch_norm2d(p + ".bn3", out);
  TensorId identity = x;
  if (downsample) {
    identity = b.conv2d(p + ".downsample.0", x, planes * 4, Conv2dSpec::square(1, stride, 0, false));
    identity = b.batch_norm2d(p + ".downsample.1", identity);
  }
  out = b.add_(p + ".add", out, identity);
  out = b.relu(p + ".relu", out, true);
  b.release_holds(scope);
  return out;
}

Graph build_resnet(const ResNetSpec& rs, const ModelSpec& spec, const BuildConfig& cfg) {
  SpecReader r(spec);
  int64_t classes = r.get_int("classes", 1000);
  int64_t size = r.get_int("image", 224, 32);
  r.reject_unused();
  GraphBuilder b(spec.name, cfg.dtype);
  b.set_dim("batch", cfg.batch);
  TensorId x = b.input("input", {cfg.batch, 3, size, size}, cfg.dtype);
  x = b.conv2d("conv1", x, 64, Conv2dSpec::square(7, 2, 3, false));
  x = b.batch_norm2d("bn1", x);
  x = b.relu("relu", x, true);
  x = b.max_pool2d("maxpool", x, {3, 2, 1, false});
  int64_t in_planes = 64;
  const int64_t expansion = rs.bottleneck ? 4 : 1;
  for (int layer = 0; layer < 4; ++layer) {
    int64_t planes = 64 << layer;
    // x = self.layerN(x): the caller's x (the layer's input) lives until the Sequential returns.
    size_t layer_scope = b.open_scope();
    b.hold(x);
    for (int i = 0; i < rs.blocks[static_cast<size_t>(layer)]; ++i) {
      int64_t stride = (i == 0 && layer > 0) ? 2 : 1;
      bool down = i == 0 && (stride != 1 || in_planes != planes * expansion);
      std::string p = "layer" + std::to_string(layer + 1) + "." + std::to_string(i);
      x = rs.bottleneck ? bottleneck(b, p, x, planes, stride, down) : basic_block(b, p, x, planes, stride, down);
      in_planes = planes * expansion;
    }
    b.release_holds(layer_scope);
  }
  x = b.adaptive_avg_pool2d("avgpool", x, 1, 1);
  x = b.flatten("flatten", x, 1);
  x = b.linear("fc", x, classes);
  b.mark_output(x);
  b.begin_loss();
  b.set_loss(add_loss(b, x, LossKind::CrossEntropy, cfg));
  return b.finish();
}

}  // namespace

void register_resnet(std::vector<ZooEntry>& out) {
  const std::pair<const char*, ResNetSpec> specs[] = {
      {"resnet18", {false, {2, 2, 2, 2}}}, {"resnet34", {false, {3, 4, 6, 3}}},
      {"resnet50", {true, {3, 4, 6, 3}}},  {"resnet101", {true, {3, 4, 23, 3}}},
      {"resnet152", {true, {3, 8, 36, 3}}},
  };
  for (const auto& [name, rs] : specs) {
    ResNetSpec copy = rs;
    out.push_back({name, std::string("torchvision ") + name + " (224x224, 1000 classes)", "vision", false,
                   [copy](const ModelSpec& s, const BuildConfig& c) { return build_resnet(copy, s, c); }});
  }
}

}  // namespace headroom
