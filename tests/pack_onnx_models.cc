#include "pack_onnx_models.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "frontends/onnx/onnx_import.h"
#include "frontends/onnx/onnx_weights.h"

namespace headroom::testing {

namespace fs = std::filesystem;
using onnx::TensorProto;

// Deterministic values, different for each seed.
std::vector<float> values(size_t n, int seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((static_cast<int>(i) * 37 + seed * 11) % 101) / 50.0f - 1.0f;
  return v;
}

std::string le_bytes(const std::vector<float>& v) {
  std::string s(v.size() * 4, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u = 0;
    std::memcpy(&u, &v[i], 4);
    for (int b = 0; b < 4; ++b) s[i * 4 + static_cast<size_t>(b)] = static_cast<char>(u >> (8 * b));
  }
  return s;
}

TensorProto* find_initializer(OnnxModel& m, const std::string& name) {
  for (TensorProto& t : *m.proto().mutable_graph()->mutable_initializer()) {
    if (t.name() == name) return &t;
  }
  ADD_FAILURE() << "no initializer " << name;
  return nullptr;
}

void set_values(OnnxModel& m, const std::string& name, const std::vector<float>& v, Store how) {
  TensorProto* t = find_initializer(m, name);
  t->clear_raw_data();
  t->clear_float_data();
  if (how == Store::Raw) {
    t->set_raw_data(le_bytes(v));
  } else {
    for (float f : v) t->add_float_data(f);
  }
}

// x[b,3,4,4] -> conv1 (4x3x3x3 + bias, pad 1) -> bn1 -> Relu -> conv2 (4x4x1x1, no bias) -> bn2
// -> GlobalAveragePool -> Flatten -> fc (Gemm, [classes,4] + bias).
// Bytes (fp32): conv1 (108 + 4) x 4 = 448; bn1, bn2 4 x [4] x 4 = 64 each; conv2 16 x 4 = 64;
// fc (4 x classes + classes) x 4 = 20 x classes.
OnnxModel backbone(int64_t classes) {
  OnnxModel m;
  m.input("x", {"batch", 3, 4, 4});
  m.initializer("conv1.weight", {4, 3, 3, 3}).initializer("conv1.bias", {4});
  for (const char* bn : {"bn1", "bn2"}) {
    for (const char* p : {"weight", "bias", "running_mean", "running_var"}) {
      m.initializer(std::string(bn) + "." + p, {4});
    }
  }
  m.initializer("conv2.weight", {4, 4, 1, 1});
  m.initializer("fc.weight", {classes, 4}).initializer("fc.bias", {classes});
  m.node("Conv", {"x", "conv1.weight", "conv1.bias"}, {"c1"}, "conv1").ints("pads", {1, 1, 1, 1});
  m.node("BatchNormalization", {"c1", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var"}, {"b1"},
         "bn1");
  m.node("Relu", {"b1"}, {"r1"});
  m.node("Conv", {"r1", "conv2.weight"}, {"c2"}, "conv2");
  m.node("BatchNormalization", {"c2", "bn2.weight", "bn2.bias", "bn2.running_mean", "bn2.running_var"}, {"b2"},
         "bn2");
  m.node("GlobalAveragePool", {"b2"}, {"p"});
  m.node("Flatten", {"p"}, {"f"});
  m.node("Gemm", {"f", "fc.weight", "fc.bias"}, {"y"}, "fc").i("transB", 1);
  m.output("y");
  // Fresh batch norms (ones, zeros, zeros, ones) in every model: all alike.
  for (const char* bn : {"bn1", "bn2"}) {
    set_values(m, std::string(bn) + ".weight", {1, 1, 1, 1});
    set_values(m, std::string(bn) + ".bias", {0, 0, 0, 0});
    set_values(m, std::string(bn) + ".running_mean", {0, 0, 0, 0});
    set_values(m, std::string(bn) + ".running_var", {1, 1, 1, 1});
  }
  set_values(m, "conv1.weight", values(108, 1));
  set_values(m, "conv1.bias", values(4, 2));
  set_values(m, "conv2.weight", values(16, 3));
  set_values(m, "fc.weight", values(static_cast<size_t>(4 * classes), 4 + static_cast<int>(classes)));
  set_values(m, "fc.bias", values(static_cast<size_t>(classes), 5 + static_cast<int>(classes)));
  return m;
}

// Moves every initializer's bytes into one external data file next to the model.
void externalize(OnnxModel& m, const std::string& dir, const std::string& file) {
  std::ofstream out(dir + "/" + file, std::ios::binary);
  int64_t offset = 0;
  for (TensorProto& t : *m.proto().mutable_graph()->mutable_initializer()) {
    std::string bytes = t.raw_data();
    out << bytes;
    t.clear_raw_data();
    t.set_data_location(TensorProto::EXTERNAL);
    for (auto [k, v] : {std::pair<std::string, std::string>{"location", file}, {"offset", std::to_string(offset)},
                        {"length", std::to_string(bytes.size())}}) {
      auto* e = t.add_external_data();
      e->set_key(k);
      e->set_value(v);
    }
    offset += static_cast<int64_t>(bytes.size());
  }
}

std::string fresh_dir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "headroom_identical_" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The CLI's loader (src/cli/main.cc): import at the batch, then read the weight values.
LoadedModel load_onnx(const std::string& path, int64_t batch) {
  OnnxImportOptions io;
  io.batch = batch;
  io.with_loss = false;
  Result<Graph> g = import_onnx(path, io);
  if (!g.ok()) throw InputError(g.error());
  LoadedModel lm = loaded_from_graph(g.value());
  Result<WeightData> w = read_onnx_weights(path);
  if (!w.ok()) throw InputError(w.error());
  lm.weights = w.value();
  return lm;
}

// Three files: a.onnx (2 classes, raw_data), b.onnx (3 classes; conv1 stored in typed float_data;
// conv2 with one bit of one element flipped), c.onnx (a copy of a, its weights in external data).
Trio write_trio(const std::string& name) {
  Trio t;
  t.dir = fresh_dir(name);
  t.a = t.dir + "/a.onnx";
  t.b = t.dir + "/b.onnx";
  t.c = t.dir + "/c.onnx";
  backbone(2).save(t.a);
  OnnxModel b = backbone(3);
  set_values(b, "conv1.weight", values(108, 1), Store::Typed);
  set_values(b, "conv1.bias", values(4, 2), Store::Typed);
  std::vector<float> w2 = values(16, 3);
  uint32_t u = 0;
  std::memcpy(&u, &w2[5], 4);
  u ^= 1u;  // the lowest mantissa bit of element 5
  std::memcpy(&w2[5], &u, 4);
  set_values(b, "conv2.weight", w2);
  b.save(t.b);
  OnnxModel c = backbone(2);
  externalize(c, t.dir, "c.weights");
  c.save(t.c);
  return t;
}


}  // namespace headroom::testing
