// torchvision 0.14 densenet121 (growth 32, blocks 6/12/24/16, 64 initial features, bn_size 4,
// drop_rate 0, memory_efficient=False), 224x224 input, 1000 classes.
//
// Python references that shape memory:
//  - _DenseBlock keeps every layer's output in its `features` list until the block's final
//    torch.cat(features, 1); each _DenseLayer starts with its own torch.cat(prev_features, 1)
//    (a copy even for the first layer's one-tensor list).
//  - _DenseLayer.bn_function keeps `concated_features` until conv1 returns; forward keeps
//    `bottleneck_output` until conv2 returns.
//  - A Sequential member's input (block, transition) stays referenced until the member returns.
//  - DenseNet.forward keeps `features` (the norm5 output that F.relu(inplace=True) overwrites)
//    until it returns, past the pooling and the classifier.
#include <array>

#include "frontends/zoo/losses.h"
#include "frontends/zoo/registry.h"

namespace headroom {
namespace {

constexpr int64_t kGrowth = 32;
constexpr int64_t kBnSize = 4;

TensorId dense_layer(GraphBuilder& b, const std::string& p,
                     const std::vector<TensorId>& prev_features) {
  size_t layer_scope = b.open_scope();
  size_t bn_function = b.open_scope();
  TensorId concated = b.cat(p + ".cat", prev_features, 1);
  b.hold(concated);
  TensorId y = b.batch_norm2d(p + ".norm1", concated);
  y = b.relu(p + ".relu1", y, true);
  TensorId bottleneck =
      b.conv2d(p + ".conv1", y, kBnSize * kGrowth, Conv2dSpec::square(1, 1, 0, false));
  b.release_holds(bn_function);
  b.hold(bottleneck);
  y = b.batch_norm2d(p + ".norm2", bottleneck);
  y = b.relu(p + ".relu2", y, true);
  y = b.conv2d(p + ".conv2", y, kGrowth, Conv2dSpec::square(3, 1, 1, false));
  b.release_holds(layer_scope);
  return y;
}

TensorId dense_block(GraphBuilder& b, const std::string& p, TensorId x, int layers) {
  size_t scope = b.open_scope();
  b.hold(x);
  std::vector<TensorId> features{x};
  for (int i = 0; i < layers; ++i) {
    features.push_back(dense_layer(b, p + ".denselayer" + std::to_string(i + 1), features));
  }
  TensorId out = b.cat(p + ".cat", features, 1);
  b.release_holds(scope);
  return out;
}

TensorId transition(GraphBuilder& b, const std::string& p, TensorId x, int64_t out_features) {
  size_t scope = b.open_scope();
  b.hold(x);
  TensorId y = b.batch_norm2d(p + ".norm", x);
  y = b.relu(p + ".relu", y, true);
  y = b.conv2d(p + ".conv", y, out_features, Conv2dSpec::square(1, 1, 0, false));
  y = b.avg_pool2d(p + ".pool", y, {2, 2, 0, false});
  b.release_holds(scope);
  return y;
}

Graph build_densenet121(const ModelSpec& spec, const BuildConfig& cfg) {
  SpecReader r(spec);
  int64_t classes = r.get_int("classes", 1000);
  int64_t size = r.get_int("image", 224, 29);
  r.reject_unused();
  GraphBuilder b(spec.name, cfg.dtype);
  b.set_dim("batch", cfg.batch);
  TensorId x = b.input("input", {cfg.batch, 3, size, size}, cfg.dtype);
  x = b.conv2d("features.conv0", x, 64, Conv2dSpec::square(7, 2, 3, false));
  x = b.batch_norm2d("features.norm0", x);
  x = b.relu("features.relu0", x, true);
  x = b.max_pool2d("features.pool0", x, {3, 2, 1, false});
  const std::array<int, 4> blocks = {6, 12, 24, 16};
  int64_t num_features = 64;
  for (size_t i = 0; i < blocks.size(); ++i) {
    std::string n = std::to_string(i + 1);
    x = dense_block(b, "features.denseblock" + n, x, blocks[i]);
    num_features += blocks[i] * kGrowth;
    if (i + 1 != blocks.size()) {
      x = transition(b, "features.transition" + n, x, num_features / 2);
      num_features /= 2;
    }
  }
  x = b.batch_norm2d("features.norm5", x);
  size_t scope = b.open_scope();
  b.hold(x);  // `features` lives until forward returns
  TensorId out = b.relu("relu", x, true);
  out = b.adaptive_avg_pool2d("adaptive_avg_pool2d", out, 1, 1);
  out = b.flatten("flatten", out, 1);
  out = b.linear("classifier", out, classes);
  b.release_holds(scope);
  b.mark_output(out);
  b.begin_loss();
  b.set_loss(add_loss(b, out, LossKind::CrossEntropy, cfg));
  return b.finish();
}

}  // namespace

void register_densenet(std::vector<ZooEntry>& out) {
  out.push_back({"densenet121", "torchvision densenet121 (224x224, 1000 classes)", "vision", false,
                 build_densenet121});
}

}  // namespace headroom
