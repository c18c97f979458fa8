// The activations torch.onnx decomposes (frontends/onnx/onnx_patterns.h), on the exporter's own
// output (tests/data/onnx/gen_activations.py: Linear(8, 16) -> activation -> Linear(16, 4), torch
// 1.13, training mode, opset 13): each becomes the one call eager PyTorch makes, with the peak of
// that model written call for call with GraphBuilder; the node-by-node spelling keeps more.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "estimate/estimate.h"
#include "frontends/onnx/onnx_import.h"
#include "frontends/zoo/losses.h"
#include "ir/builder.h"
#include "sgd_cuda_peak.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::sgd_cuda_peak;

const std::string kDir = std::string(HEADROOM_SOURCE_DIR) + "/tests/data/onnx/";
constexpr int64_t kBatch = 64;  // [64, 16] fp32 activations: 4096 bytes, a multiple of 512

using Activation = std::function<TensorId(GraphBuilder&, TensorId)>;

int count_kind(const Graph& g, OpKind k) {
  int n = 0;
  for (const Op& op : g.ops) n += op.kind == k && op.stage == OpStage::Model;
  return n;
}

int model_ops(const Graph& g) {
  int n = 0;
  for (const Op& op : g.ops) n += op.stage == OpStage::Model;
  return n;
}

// The exported module written with GraphBuilder, `act` between the two linears.
Graph mlp(const Activation& act) {
  GraphBuilder b("ref");
  TensorId x = b.input("input", {kBatch, 8}, DType::F32);
  TensorId w1 = b.parameter("fc1.weight", {16, 8}), b1 = b.parameter("fc1.bias", {16});
  TensorId w2 = b.parameter("fc2.weight", {4, 16}), b2 = b.parameter("fc2.bias", {4});
  TensorId out = b.linear_with("fc2", act(b, b.linear_with("fc1", x, w1, b1)), w2, b2);
  b.mark_output(out);
  b.begin_loss();
  b.set_loss(add_loss(b, out, LossKind::CrossEntropy, BuildConfig{}));
  return b.finish();
}

Graph imported(const std::string& file) {
  OnnxImportOptions o;
  o.batch = kBatch;
  Result<Graph> g = import_onnx(kDir + file, o);
  EXPECT_TRUE(g.ok()) << g.error();
  return g.ok() ? g.value() : Graph{};
}

// The peak of the forward pass of the first training iteration: every tensor autograd keeps is
// live at its end, together with the loss's.
int64_t forward_peak(const Graph& g) {
  EstimateOptions o;
  o.mode = RunMode::Training;
  o.optimizer = OptimizerKind::Sgd;
  o.device = "cuda";
  SimResult r = simulate(build_program(g, schedule_options(o)));
  return r.iterations.at(0).by_phase.at(Phase::Forward).bytes;
}

void expect_same_peaks(const Graph& g, const Graph& ref, const std::string& what) {
  for (RunMode mode : {RunMode::Training, RunMode::Inference}) {
    EXPECT_EQ(sgd_cuda_peak(g, mode), sgd_cuda_peak(ref, mode)) << what << " mode " << static_cast<int>(mode);
  }
}

TEST(OnnxActivationPatterns, TanhGelu) {
  Activation fused = [](GraphBuilder& b, TensorId x) { return b.gelu("act", x, true); };
  // Hugging Face's NewGELUActivation (GPT-2) is Python code: eager runs its calls one by one and
  // keeps their intermediates, so its export (with Pow) stays node by node.
  Graph hf = imported("act_new_gelu.onnx");
  EXPECT_EQ(count_kind(hf, OpKind::Gelu), 0);
  EXPECT_EQ(count_kind(hf, OpKind::PowScalar), 1);
  EXPECT_EQ(count_kind(hf, OpKind::Tanh), 1);
  for (const char* file : {"act_gelu_tanh.onnx"}) {
    Graph g = imported(file);
    ASSERT_EQ(count_kind(g, OpKind::Gelu), 1) << file;
    for (const Op& op : g.ops) {
      if (op.kind == OpKind::Gelu) {
        EXPECT_TRUE(op.attrs.approximate_tanh) << file;
      }
    }
    EXPECT_EQ(model_ops(g), 3) << file;  // linear, gelu, linear
    expect_same_peaks(g, mlp(fused), file);
  }
  // Node by node, as the importer would lower the nine nodes of torch's nn.GELU(approximate=
  // "tanh") export: autograd keeps x*x (read by the next Mul), tanh's output (tanh_backward),
  // 1 + tanh (read by Mul(x, .)) on top of x, which gelu alone keeps.
  Activation nodes = [](GraphBuilder& b, TensorId x) {
    TensorId cube = b.mul("cube", x, b.mul("sq", x, x));
    TensorId inner = b.add("inner", x, b.mul_scalar("c", cube, 0.044715));
    TensorId t = b.tanh("tanh", b.mul_scalar("s", inner, std::sqrt(2.0 / 3.141592653589793)));
    return b.mul_scalar("half", b.mul("m", x, b.add_scalar("one", t, 1.0)), 0.5);
  };
  const int64_t kTensor = kBatch * 16 * 4;
  // The forward peak of the node-by-node chain lies inside the chain (the kept tensors plus the
  // chain's transients), the single call's at the loss, so the difference is not the kept bytes
  // alone: it is at least those three kept [64, 16] fp32 tensors, 3 x 4096 bytes.
  EXPECT_GE(forward_peak(mlp(nodes)) - forward_peak(mlp(fused)), 3 * kTensor);
}

TEST(OnnxActivationPatterns, Silu) {
  Activation fused = [](GraphBuilder& b, TensorId x) { return b.silu("act", x); };
  Graph g = imported("act_silu.onnx");
  EXPECT_EQ(count_kind(g, OpKind::Silu), 1);
  EXPECT_EQ(count_kind(g, OpKind::Sigmoid), 0);
  EXPECT_EQ(model_ops(g), 3);
  expect_same_peaks(g, mlp(fused), "silu");
  // Sigmoid then Mul: autograd keeps sigmoid's output (sigmoid_backward and mul's backward read
  // it) beside x, which silu alone keeps: at the end of the forward pass (its peak in both), one
  // [64, 16] fp32 tensor, 64 x 16 x 4 = 4096 bytes, more.
  Activation nodes = [](GraphBuilder& b, TensorId x) { return b.mul("m", x, b.sigmoid("s", x)); };
  EXPECT_EQ(forward_peak(mlp(nodes)) - forward_peak(mlp(fused)), kBatch * 16 * 4);
}

// HardSwish and Mish have no op kind: one Opaque op that keeps x and allocates its output, as
// hardswish_backward(grad, self) and mish_backward(grad, self) read self.
void expect_one_opaque_gate(const std::string& file) {
  Activation fused = [](GraphBuilder& b, TensorId x) {
    return b.opaque("act", {x}, {{b.shape(x), DType::F32}})[0];
  };
  Graph g = imported(file);
  EXPECT_EQ(count_kind(g, OpKind::Opaque), 1) << file;
  EXPECT_EQ(model_ops(g), 3) << file;
  expect_same_peaks(g, mlp(fused), file);
}

TEST(OnnxActivationPatterns, HardSwishAndMish) {
  expect_one_opaque_gate("act_hardswish.onnx");
  expect_one_opaque_gate("act_mish.onnx");
  // HardSigmoid (Opaque, keeps x) then Mul: autograd also keeps HardSigmoid's output for the
  // Mul's backward: 4096 bytes more.
  Activation fused = [](GraphBuilder& b, TensorId x) {
    return b.opaque("act", {x}, {{b.shape(x), DType::F32}})[0];
  };
  Activation nodes = [](GraphBuilder& b, TensorId x) {
    return b.mul("m", x, b.opaque("hs", {x}, {{b.shape(x), DType::F32}})[0]);
  };
  EXPECT_EQ(forward_peak(mlp(nodes)) - forward_peak(mlp(fused)), kBatch * 16 * 4);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
