// The torchvision models of the zoo against facts recorded from torch 1.13 + torchvision 0.14 by
// tests/data/vision/gen_vision_reference.py (one text file per model): parameter and buffer totals,
// state_dict names and shapes in named_parameters() order, the order in which the forward first
// uses each parameter (training, and eval under no_grad), output shapes, and how many times the
// forward dispatched each aten op. The graphs are built at the generator's batch size (2).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "frontends/zoo/registry.h"
#include "graph_dsl.h"
#include "schedule/build_program.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

constexpr int64_t kBatch = 2;

struct Reference {
  int64_t parameters = -1, parameter_tensors = -1, buffer_bytes = -1;
  std::vector<int64_t> output_train, output_eval;
  std::map<std::string, int64_t> aten_train, aten_eval;
  std::vector<std::pair<std::string, std::vector<int64_t>>> params;
  std::vector<std::string> use_train, use_eval;
};

Reference load_reference(const std::string& spec) {
  std::string file = spec;
  for (char& c : file) {
    if (c == ':' || c == '=') c = '_';
  }
  std::ifstream in(std::string(HEADROOM_SOURCE_DIR) + "/tests/data/vision/" + file + ".txt");
  EXPECT_TRUE(in.good()) << "no reference file for " << spec;
  Reference r;
  std::string line;
  auto ints = [](std::istringstream& s) {
    std::vector<int64_t> v;
    for (int64_t d; s >> d;) v.push_back(d);
    return v;
  };
  while (std::getline(in, line)) {
    std::istringstream s(line);
    std::string key;
    s >> key;
    if (key.empty() || key[0] == '#') continue;
    if (key == "parameters")
      s >> r.parameters;
    else if (key == "parameter_tensors")
      s >> r.parameter_tensors;
    else if (key == "buffer_bytes")
      s >> r.buffer_bytes;
    else if (key == "output_train")
      r.output_train = ints(s);
    else if (key == "output_eval")
      r.output_eval = ints(s);
    else if (key == "aten_train" || key == "aten_eval") {
      std::string op;
      int64_t n = 0;
      s >> op >> n;
      (key == "aten_train" ? r.aten_train : r.aten_eval)[op] = n;
    } else if (key == "use_train" || key == "use_eval") {
      std::string name;
      s >> name;
      (key == "use_train" ? r.use_train : r.use_eval).push_back(name);
    } else if (key == "param") {
      std::string name;
      s >> name;
      r.params.emplace_back(name, ints(s));
    } else {
      ADD_FAILURE() << spec << ": unknown reference line '" << line << "'";
    }
  }
  return r;
}

Graph build(const std::string& spec, bool inference) {
  BuildConfig cfg;
  cfg.batch = kBatch;
  cfg.inference = inference;
  return build_model(spec, cfg);
}

// Parameters in the order the forward first reads them.
std::vector<std::string> first_use(const Graph& g) {
  std::vector<std::string> order;
  std::set<TensorId> seen;
  for (const Op& op : g.ops) {
    for (TensorId in : op.inputs) {
      if (g.tensor(in).role == TensorRole::Parameter && seen.insert(in).second)
        order.push_back(g.tensor(in).name);
    }
  }
  return order;
}

std::map<OpKind, int64_t> model_op_counts(const Graph& g) {
  std::map<OpKind, int64_t> n;
  for (const Op& op : g.ops) {
    if (op.stage == OpStage::Model) ++n[op.kind];
  }
  return n;
}

int64_t aten(const std::map<std::string, int64_t>& counts, const std::string& op) {
  auto it = counts.find(op);
  return it == counts.end() ? 0 : it->second;
}

// headroom's op kinds against the aten calls of the same forward. One builder call per PyTorch
// call, with these known differences:
//  - AdaptiveAvgPool2d to 1x1 dispatches as `mean`;
//  - autograd's hardtanh_ clones its input (original_self) in training: that clone is part of the
//    Hardtanh rule, not a Contiguous op;
//  - torch._native_multi_head_attention (ViT in eval) is written as its parts: two Linear (qkv,
//    out_proj), two MatMul, a Softmax and two Contiguous (packed q/k/v, merged heads).
void expect_counts_match(const Graph& g, const std::map<std::string, int64_t>& a,
                         const std::string& what) {
  std::map<OpKind, int64_t> n = model_op_counts(g);
  const int64_t mha = aten(a, "_native_multi_head_attention");
  const int64_t autograd_clones = what == "train" ? aten(a, "hardtanh_") : 0;
  const std::vector<std::pair<OpKind, int64_t>> expected = {
      {OpKind::Conv2d, aten(a, "convolution")},
      {OpKind::BatchNorm2d, aten(a, "native_batch_norm")},
      {OpKind::Relu, aten(a, "relu_") + aten(a, "relu")},
      {OpKind::Hardtanh, aten(a, "hardtanh_")},
      {OpKind::MaxPool2d, aten(a, "max_pool2d_with_indices") + aten(a, "max_pool2d")},
      {OpKind::AvgPool2d, aten(a, "avg_pool2d")},
      {OpKind::AdaptiveAvgPool2d, aten(a, "_adaptive_avg_pool2d") + aten(a, "mean")},
      {OpKind::Cat, aten(a, "cat")},
      {OpKind::Linear, aten(a, "addmm") + aten(a, "mm") + 2 * mha},
      {OpKind::MatMul, aten(a, "bmm") + 2 * mha},
      {OpKind::Softmax, aten(a, "_softmax") + mha},
      {OpKind::Gelu, aten(a, "gelu")},
      {OpKind::LayerNorm, aten(a, "native_layer_norm")},
      {OpKind::Add, aten(a, "add")},
      {OpKind::DivScalar, aten(a, "div")},
      {OpKind::Contiguous, aten(a, "clone") - autograd_clones + 2 * mha},
  };
  for (const auto& [kind, count] : expected) {
    EXPECT_EQ(n[kind], count) << what << ": " << op_kind_name(kind) << " ops";
  }
}

class VisionModel : public ::testing::TestWithParam<std::string> {};

TEST_P(VisionModel, ParameterAndBufferTotalsMatchTorchvision) {
  const Reference ref = load_reference(GetParam());
  for (bool inference : {false, true}) {
    Graph g = build(GetParam(), inference);
    int64_t tensors = 0, buffer_bytes = 0;
    for (const Tensor& t : g.tensors) {
      if (t.role == TensorRole::Parameter) ++tensors;
      if (t.role == TensorRole::Buffer) buffer_bytes += t.bytes();
    }
    EXPECT_EQ(g.parameter_count(), ref.parameters) << "inference " << inference;
    EXPECT_EQ(tensors, ref.parameter_tensors) << "inference " << inference;
    EXPECT_EQ(buffer_bytes, ref.buffer_bytes) << "inference " << inference;
  }
}

TEST_P(VisionModel, ParameterNamesAndShapesFollowNamedParameters) {
  const Reference ref = load_reference(GetParam());
  for (bool inference : {false, true}) {
    Graph g = build(GetParam(), inference);
    std::vector<std::pair<std::string, std::vector<int64_t>>> got;
    for (const Tensor& t : g.tensors) {
      if (t.role == TensorRole::Parameter) got.emplace_back(t.name, t.shape);
    }
    ASSERT_EQ(got.size(), ref.params.size()) << "inference " << inference;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i], ref.params[i]) << "parameter " << i << ", inference " << inference;
    }
  }
}

TEST_P(VisionModel, ForwardUsesParametersInTorchvisionOrder) {
  const Reference ref = load_reference(GetParam());
  EXPECT_EQ(first_use(build(GetParam(), false)), ref.use_train);
  EXPECT_EQ(first_use(build(GetParam(), true)), ref.use_eval);
}

TEST_P(VisionModel, OutputShapes) {
  const Reference ref = load_reference(GetParam());
  Graph train = build(GetParam(), false);
  Graph eval = build(GetParam(), true);
  ASSERT_FALSE(train.outputs.empty());
  ASSERT_EQ(eval.outputs.size(), 1u);
  EXPECT_EQ(train.tensor(train.outputs[0]).shape, ref.output_train);
  EXPECT_EQ(eval.tensor(eval.outputs[0]).shape, ref.output_eval);
  EXPECT_NE(train.loss, kNone);
}

TEST_P(VisionModel, OpKindsMatchTheDispatchedAtenCalls) {
  const Reference ref = load_reference(GetParam());
  expect_counts_match(build(GetParam(), false), ref.aten_train, "train");
  expect_counts_match(build(GetParam(), true), ref.aten_eval, "eval");
}

TEST_P(VisionModel, EveryProgramPassesTheOracles) {
  for (RunMode mode : {RunMode::Inference, RunMode::Training}) {
    Graph g = build(GetParam(), mode == RunMode::Inference);
    ScheduleOptions o;
    o.mode = mode;
    EXPECT_EQ(testing::check_oracles(build_program(g, o)), "") << GetParam();
  }
}

INSTANTIATE_TEST_SUITE_P(Torchvision, VisionModel,
                         ::testing::Values("alexnet", "vgg11", "vgg16", "vgg19", "inception_v3",
                                           "inception_v3:aux=false", "mobilenet_v2", "densenet121",
                                           "vit_b_16"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (c == ':' || c == '=') c = '_';
                           }
                           return n;
                         });

std::vector<double> dropout_ps(const Graph& g) {
  std::vector<double> ps;
  for (const Op& op : g.ops) {
    if (op.kind == OpKind::Dropout) ps.push_back(op.attrs.p);
  }
  return ps;
}

TEST(VisionZoo, DropoutCallsFollowTorchvisionAndTurnOff) {
  const std::map<std::string, std::vector<double>> expected = {
      {"alexnet", {0.5, 0.5}},
      {"vgg16", {0.5, 0.5}},
      {"inception_v3", {0.5}},
      {"mobilenet_v2", {0.2}},
      {"densenet121", {}},
      // vit_b_16: encoder dropout, then per layer the block's dropout and the MLP's two; p = 0.0.
      {"vit_b_16", std::vector<double>(1 + 12 * 3, 0.0)},
  };
  for (const auto& [name, ps] : expected) {
    EXPECT_EQ(dropout_ps(build(name, false)), ps) << name;
    BuildConfig off;
    off.batch = kBatch;
    off.dropout_scale = 0.0;
    for (double p : dropout_ps(build_model(name, off))) EXPECT_EQ(p, 0.0) << name;
  }
}

TEST(VisionZoo, InceptionBlockInputsAndBranchesLiveUntilTheCat) {
  Graph g = build("inception_v3", false);
  // Mixed_5b's input is maxpool2's output: referenced by Python until Mixed_5b's cat returns.
  TensorId block_input = kNone;
  for (const Op& op : g.ops) {
    if (op.name == "maxpool2") block_input = op.outputs[0];
  }
  ASSERT_NE(block_input, kNone);
  bool held = false;
  for (const Hold& h : g.holds)
    held = held || (h.tensor == block_input && g.op(h.until).name == "Mixed_5b.cat");
  EXPECT_TRUE(held);
  for (const Op& op : g.ops) {
    if (op.name == "Mixed_5b.cat") {
      EXPECT_EQ(op.inputs.size(), 4u);
    }
  }
}

TEST(VisionZoo, InceptionTrainingLossWeighsTheAuxHead) {
  Graph g = build("inception_v3", false);
  ASSERT_EQ(g.outputs.size(), 2u);  // InceptionOutputs(logits, aux_logits)
  EXPECT_EQ(g.tensor(g.outputs[1]).name, "AuxLogits.fc");
  // loss = CE(logits) + 0.4 * CE(aux), the aux head running right after Mixed_6e.
  std::vector<std::string> loss_ops;
  for (const Op& op : g.ops) {
    if (op.stage == OpStage::Loss) loss_ops.push_back(std::string(op_kind_name(op.kind)));
  }
  const std::vector<std::string> expected = {"log_softmax", "nll_loss",   "log_softmax",
                                             "nll_loss",    "mul_scalar", "add"};
  EXPECT_EQ(loss_ops, expected);
  EXPECT_EQ(g.tensor(g.loss).shape, std::vector<int64_t>{});
  // In eval the aux head does not run and the model returns the logits only.
  Graph eval = build("inception_v3", true);
  for (const Op& op : eval.ops)
    EXPECT_EQ(op.name.rfind("AuxLogits", 0), std::string::npos) << op.name;
}

TEST(VisionZoo, VitAttentionTakesTheFusedPathOnlyInInference) {
  Graph train = build("vit_b_16", false);
  Graph eval = build("vit_b_16", true);
  auto count = [](const Graph& g, const std::string& suffix) {
    int n = 0;
    for (const Op& op : g.ops) {
      n += op.name.size() >= suffix.size() &&
           op.name.compare(op.name.size() - suffix.size(), suffix.size(), suffix) == 0;
    }
    return n;
  };
  // Training: F.multi_head_attention_forward (q / sqrt(head_dim) is its own op).
  EXPECT_EQ(count(train, ".self_attention.q_scaled"), 12);
  EXPECT_EQ(count(train, ".transform_bias_rescale_qkv"), 0);
  // Eval + no_grad: torch._native_multi_head_attention.
  EXPECT_EQ(count(eval, ".self_attention.q_scaled"), 0);
  EXPECT_EQ(count(eval, ".transform_bias_rescale_qkv"), 12);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
