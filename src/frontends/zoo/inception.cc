// torchvision 0.14 inception_v3 (transform_input=False), 299x299 input, 1000 classes.
// Parameter: aux (default true) builds InceptionAux ("AuxLogits").
//
// Python references that shape memory:
//  - BasicConv2d is conv(bias=False) -> BatchNorm2d(eps=0.001) -> F.relu(inplace=True); its input
//    stays referenced by the caller until the module returns.
//  - Each Inception block's input stays referenced (the parent's `x`, the block's `forward(x)`)
//    until the block's torch.cat(outputs, 1) returns; the branch outputs are held by the
//    `outputs` list until that cat.
//  - In training the aux head runs right after Mixed_6e and the model returns (logits, aux); the
//    reference loss is CE(logits, y) + 0.4 * CE(aux, y). In eval (BuildConfig::inference) the aux
//    head does not run, but its parameters still exist.
#include "frontends/zoo/losses.h"
#include "frontends/zoo/registry.h"

namespace headroom {
namespace {

// A bias-free convolution with a kh x kw kernel.
Conv2dSpec kernel(int64_t kh, int64_t kw, int64_t stride = 1, int64_t ph = 0, int64_t pw = 0) {
  Conv2dSpec s;
  s.kernel_h = kh;
  s.kernel_w = kw;
  s.stride = stride;
  s.padding_h = ph;
  s.padding_w = pw;
  s.bias = false;
  return s;
}

TensorId basic_conv(GraphBuilder& b, const std::string& p, TensorId x, int64_t out,
                    const Conv2dSpec& s) {
  size_t scope = b.open_scope();
  b.hold(x);
  TensorId y = b.conv2d(p + ".conv", x, out, s);
  y = b.batch_norm2d(p + ".bn", y);
  y = b.relu(p + ".relu", y, true);
  b.release_holds(scope);
  return y;
}

// The parameters and buffers of a BasicConv2d that exists but is not called (the aux head in eval).
void declare_basic_conv(GraphBuilder& b, const std::string& p, int64_t in, int64_t out, int64_t k) {
  b.parameter(p + ".conv.weight", {out, in, k, k});
  b.parameter(p + ".bn.weight", {out});
  b.parameter(p + ".bn.bias", {out});
  b.buffer(p + ".bn.running_mean", {out}, DType::F32);
  b.buffer(p + ".bn.running_var", {out}, DType::F32);
  b.buffer(p + ".bn.num_batches_tracked", {}, DType::I64);
}

const Pool2dSpec kAvg3{3, 1, 1, false};  // F.avg_pool2d(x, kernel_size=3, stride=1, padding=1)
const Pool2dSpec kMax3{3, 2, 0, false};  // F.max_pool2d(x, kernel_size=3, stride=2)

TensorId inception_a(GraphBuilder& b, const std::string& p, TensorId x, int64_t pool_features) {
  size_t scope = b.open_scope();
  b.hold(x);
  TensorId b1 = basic_conv(b, p + ".branch1x1", x, 64, kernel(1, 1));
  TensorId b5 = basic_conv(b, p + ".branch5x5_1", x, 48, kernel(1, 1));
  b5 = basic_conv(b, p + ".branch5x5_2", b5, 64, kernel(5, 5, 1, 2, 2));
  TensorId b3 = basic_conv(b, p + ".branch3x3dbl_1", x, 64, kernel(1, 1));
  b3 = basic_conv(b, p + ".branch3x3dbl_2", b3, 96, kernel(3, 3, 1, 1, 1));
  b3 = basic_conv(b, p + ".branch3x3dbl_3", b3, 96, kernel(3, 3, 1, 1, 1));
  TensorId bp = b.avg_pool2d(p + ".avg_pool2d", x, kAvg3);
  bp = basic_conv(b, p + ".branch_pool", bp, pool_features, kernel(1, 1));
  TensorId out = b.cat(p + ".cat", {b1, b5, b3, bp}, 1);
  b.release_holds(scope);
  return out;
}

TensorId inception_b(GraphBuilder& b, const std::string& p, TensorId x) {
  size_t scope = b.open_scope();
  b.hold(x);
  TensorId b3 = basic_conv(b, p + ".branch3x3", x, 384, kernel(3, 3, 2));
  TensorId d = basic_conv(b, p + ".branch3x3dbl_1", x, 64, kernel(1, 1));
  d = basic_conv(b, p + ".branch3x3dbl_2", d, 96, kernel(3, 3, 1, 1, 1));
  d = basic_conv(b, p + ".branch3x3dbl_3", d, 96, kernel(3, 3, 2));
  TensorId bp = b.max_pool2d(p + ".max_pool2d", x, kMax3);
  TensorId out = b.cat(p + ".cat", {b3, d, bp}, 1);
  b.release_holds(scope);
  return out;
}

TensorId inception_c(GraphBuilder& b, const std::string& p, TensorId x, int64_t c7) {
  size_t scope = b.open_scope();
  b.hold(x);
  TensorId b1 = basic_conv(b, p + ".branch1x1", x, 192, kernel(1, 1));
  TensorId b7 = basic_conv(b, p + ".branch7x7_1", x, c7, kernel(1, 1));
  b7 = basic_conv(b, p + ".branch7x7_2", b7, c7, kernel(1, 7, 1, 0, 3));
  b7 = basic_conv(b, p + ".branch7x7_3", b7, 192, kernel(7, 1, 1, 3, 0));
  TensorId d = basic_conv(b, p + ".branch7x7dbl_1", x, c7, kernel(1, 1));
  d = basic_conv(b, p + ".branch7x7dbl_2", d, c7, kernel(7, 1, 1, 3, 0));
  d = basic_conv(b, p + ".branch7x7dbl_3", d, c7, kernel(1, 7, 1, 0, 3));
  d = basic_conv(b, p + ".branch7x7dbl_4", d, c7, kernel(7, 1, 1, 3, 0));
  d = basic_conv(b, p + ".branch7x7dbl_5", d, 192, kernel(1, 7, 1, 0, 3));
  TensorId bp = b.avg_pool2d(p + ".avg_pool2d", x, kAvg3);
  bp = basic_conv(b, p + ".branch_pool", bp, 192, kernel(1, 1));
  TensorId out = b.cat(p + ".cat", {b1, b7, d, bp}, 1);
  b.release_holds(scope);
  return out;
}

TensorId inception_d(GraphBuilder& b, const std::string& p, TensorId x) {
  size_t scope = b.open_scope();
  b.hold(x);
  TensorId b3 = basic_conv(b, p + ".branch3x3_1", x, 192, kernel(1, 1));
  b3 = basic_conv(b, p + ".branch3x3_2", b3, 320, kernel(3, 3, 2));
  TensorId b7 = basic_conv(b, p + ".branch7x7x3_1", x, 192, kernel(1, 1));
  b7 = basic_conv(b, p + ".branch7x7x3_2", b7, 192, kernel(1, 7, 1, 0, 3));
  b7 = basic_conv(b, p + ".branch7x7x3_3", b7, 192, kernel(7, 1, 1, 3, 0));
  b7 = basic_conv(b, p + ".branch7x7x3_4", b7, 192, kernel(3, 3, 2));
  TensorId bp = b.max_pool2d(p + ".max_pool2d", x, kMax3);
  TensorId out = b.cat(p + ".cat", {b3, b7, bp}, 1);
  b.release_holds(scope);
  return out;
}

TensorId inception_e(GraphBuilder& b, const std::string& p, TensorId x) {
  size_t scope = b.open_scope();
  b.hold(x);
  TensorId b1 = basic_conv(b, p + ".branch1x1", x, 320, kernel(1, 1));
  // branch3x3 = [branch3x3_2a(t), branch3x3_2b(t)]; branch3x3 = torch.cat(branch3x3, 1)
  TensorId t = basic_conv(b, p + ".branch3x3_1", x, 384, kernel(1, 1));
  TensorId t2a = basic_conv(b, p + ".branch3x3_2a", t, 384, kernel(1, 3, 1, 0, 1));
  TensorId t2b = basic_conv(b, p + ".branch3x3_2b", t, 384, kernel(3, 1, 1, 1, 0));
  TensorId b3 = b.cat(p + ".cat_3x3", {t2a, t2b}, 1);
  TensorId d = basic_conv(b, p + ".branch3x3dbl_1", x, 448, kernel(1, 1));
  d = basic_conv(b, p + ".branch3x3dbl_2", d, 384, kernel(3, 3, 1, 1, 1));
  TensorId d3a = basic_conv(b, p + ".branch3x3dbl_3a", d, 384, kernel(1, 3, 1, 0, 1));
  TensorId d3b = basic_conv(b, p + ".branch3x3dbl_3b", d, 384, kernel(3, 1, 1, 1, 0));
  TensorId dbl = b.cat(p + ".cat_3x3dbl", {d3a, d3b}, 1);
  TensorId bp = b.avg_pool2d(p + ".avg_pool2d", x, kAvg3);
  bp = basic_conv(b, p + ".branch_pool", bp, 192, kernel(1, 1));
  TensorId out = b.cat(p + ".cat", {b1, b3, dbl, bp}, 1);
  b.release_holds(scope);
  return out;
}

TensorId inception_aux(GraphBuilder& b, const std::string& p, TensorId x, int64_t classes) {
  TensorId y = b.avg_pool2d(p + ".avg_pool2d", x, {5, 3, 0, false});
  y = basic_conv(b, p + ".conv0", y, 128, kernel(1, 1));
  y = basic_conv(b, p + ".conv1", y, 768, kernel(5, 5));
  y = b.adaptive_avg_pool2d(p + ".adaptive_avg_pool2d", y, 1, 1);
  y = b.flatten(p + ".flatten", y, 1);
  return b.linear(p + ".fc", y, classes);
}

Graph build_inception_v3(const ModelSpec& spec, const BuildConfig& cfg) {
  SpecReader r(spec);
  bool aux_logits = r.get_bool("aux", true);
  int64_t classes = r.get_int("classes", 1000);
  int64_t size = r.get_int("image", 299, 75);
  r.reject_unused();
  GraphBuilder b(spec.name, cfg.dtype);
  b.set_dim("batch", cfg.batch);
  TensorId x = b.input("input", {cfg.batch, 3, size, size}, cfg.dtype);
  x = basic_conv(b, "Conv2d_1a_3x3", x, 32, kernel(3, 3, 2));
  x = basic_conv(b, "Conv2d_2a_3x3", x, 32, kernel(3, 3));
  x = basic_conv(b, "Conv2d_2b_3x3", x, 64, kernel(3, 3, 1, 1, 1));
  x = b.max_pool2d("maxpool1", x, kMax3);
  x = basic_conv(b, "Conv2d_3b_1x1", x, 80, kernel(1, 1));
  x = basic_conv(b, "Conv2d_4a_3x3", x, 192, kernel(3, 3));
  x = b.max_pool2d("maxpool2", x, kMax3);
  x = inception_a(b, "Mixed_5b", x, 32);
  x = inception_a(b, "Mixed_5c", x, 64);
  x = inception_a(b, "Mixed_5d", x, 64);
  x = inception_b(b, "Mixed_6a", x);
  x = inception_c(b, "Mixed_6b", x, 128);
  x = inception_c(b, "Mixed_6c", x, 160);
  x = inception_c(b, "Mixed_6d", x, 160);
  x = inception_c(b, "Mixed_6e", x, 192);
  TensorId aux = kNone;
  if (aux_logits && !cfg.inference) {
    aux = inception_aux(b, "AuxLogits", x, classes);
  } else if (aux_logits) {
    declare_basic_conv(b, "AuxLogits.conv0", 768, 128, 1);
    declare_basic_conv(b, "AuxLogits.conv1", 128, 768, 5);
    b.parameter("AuxLogits.fc.weight", {classes, 768});
    b.parameter("AuxLogits.fc.bias", {classes});
  }
  x = inception_d(b, "Mixed_7a", x);
  x = inception_e(b, "Mixed_7b", x);
  x = inception_e(b, "Mixed_7c", x);
  x = b.adaptive_avg_pool2d("avgpool", x, 1, 1);
  x = b.dropout("dropout", x, 0.5 * cfg.dropout_scale);
  x = b.flatten("flatten", x, 1);
  x = b.linear("fc", x, classes);
  b.mark_output(x);
  if (aux != kNone) b.mark_output(aux);
  b.begin_loss();
  if (aux == kNone) {
    b.set_loss(add_loss(b, x, LossKind::CrossEntropy, cfg));
    return b.finish();
  }
  // loss = criterion(logits, y) + 0.4 * criterion(aux_logits, y), evaluated left to right.
  TensorId main_loss = kNone, aux_loss = kNone;
  if (cfg.loss == LossKind::Default || cfg.loss == LossKind::CrossEntropy) {
    TensorId target = b.target("loss.target", {cfg.batch}, DType::I64);
    main_loss = b.cross_entropy("loss", x, target);
    aux_loss = b.cross_entropy("aux_loss", aux, target);
  } else {
    main_loss = add_loss(b, x, LossKind::CrossEntropy, cfg, "loss");
    aux_loss = add_loss(b, aux, LossKind::CrossEntropy, cfg, "aux_loss");
  }
  TensorId weighted = b.mul_scalar("aux_loss.mul", aux_loss, 0.4);
  b.set_loss(b.add("loss.add", main_loss, weighted));
  return b.finish();
}

}  // namespace

void register_inception(std::vector<ZooEntry>& out) {
  out.push_back({"inception_v3",
                 "torchvision inception_v3 (299x299, 1000 classes); param aux=true|false", "vision",
                 false, build_inception_v3});
}

}  // namespace headroom
