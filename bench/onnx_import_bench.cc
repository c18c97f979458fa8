// ONNX import speed: the stripped torchvision resnet18 of tests/data/onnx, and a synthetic chain
// of N nodes (Relu, then Add of the running value and the chain input, alternating) to see how
// import time grows with the node count. Target: under 2 s for 100k nodes.
#include <benchmark/benchmark.h>
#include <onnx/onnx_pb.h>

#include "frontends/onnx/onnx_import.h"

namespace headroom {
namespace {

void BM_ImportResnet18(benchmark::State& state) {
  const std::string path =
      std::string(HEADROOM_SOURCE_DIR) + "/tests/data/onnx/resnet18_training.onnx";
  OnnxImportOptions o;
  o.batch = 32;
  for (auto _ : state) {
    Result<Graph> g = import_onnx(path, o);
    if (!g.ok()) state.SkipWithError(g.error().c_str());
    benchmark::DoNotOptimize(g);
  }
}
BENCHMARK(BM_ImportResnet18)->Unit(benchmark::kMillisecond);

// The stripped BERT-base and GPT-2 training exports (thousands of nodes): target well under 100 ms.
void import_file(benchmark::State& state, const char* file) {
  const std::string path = std::string(HEADROOM_SOURCE_DIR) + "/tests/data/onnx/" + file;
  OnnxImportOptions o;
  o.batch = 8;
  for (auto _ : state) {
    Result<Graph> g = import_onnx(path, o);
    if (!g.ok()) state.SkipWithError(g.error().c_str());
    benchmark::DoNotOptimize(g);
  }
}
void BM_ImportBertBase(benchmark::State& s) { import_file(s, "bert_base_training.onnx"); }
BENCHMARK(BM_ImportBertBase)->Unit(benchmark::kMillisecond);
void BM_ImportGpt2(benchmark::State& s) { import_file(s, "gpt2_training.onnx"); }
BENCHMARK(BM_ImportGpt2)->Unit(benchmark::kMillisecond);

// adds_only: every node is Add(running value, input), so with in-place inference each writes
// the previous one's storage and the storage chain is as long as the graph.
std::string chain_model(int64_t nodes, bool adds_only = false) {
  onnx::ModelProto m;
  m.set_ir_version(7);
  auto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  auto* in = g->add_input();
  in->set_name("x");
  auto* t = in->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  t->mutable_shape()->add_dim()->set_dim_param("batch");
  t->mutable_shape()->add_dim()->set_dim_value(64);
  std::string prev = "x";
  for (int64_t i = 0; i < nodes; ++i) {
    onnx::NodeProto* n = g->add_node();
    std::string out = "t" + std::to_string(i);
    n->set_name("n" + std::to_string(i));
    if (i % 2 == 0 && !adds_only) {
      n->set_op_type("Relu");
      n->add_input(prev);
    } else {
      n->set_op_type("Add");
      n->add_input(prev);
      n->add_input("x");
    }
    n->add_output(out);
    prev = out;
  }
  g->add_output()->set_name(prev);
  g->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::FLOAT);
  return m.SerializeAsString();
}

void BM_ImportChain(benchmark::State& state) {
  const std::string bytes = chain_model(state.range(0));
  OnnxImportOptions o;
  o.batch = 8;
  for (auto _ : state) {
    Result<Graph> g = import_onnx_bytes(bytes, o, "chain.onnx");
    if (!g.ok()) state.SkipWithError(g.error().c_str());
    benchmark::DoNotOptimize(g);
  }
  state.SetComplexityN(state.range(0));
}
BENCHMARK(BM_ImportChain)
    ->RangeMultiplier(10)
    ->Range(1000, 100000)
    ->Complexity()
    ->Unit(benchmark::kMillisecond);

// A chain of Adds with in-place inference: every Add writes its input's storage, so the storage
// chain grows with the graph (issue 18: quadratic before storage_writable's memo, 20k
// nodes 4.7 s). Must stay linear: 10k and 100k nodes.
void BM_ImportChainInPlace(benchmark::State& state) {
  const std::string bytes = chain_model(state.range(0), /*adds_only=*/true);
  OnnxImportOptions o;
  o.batch = 8;
  o.infer_inplace = true;
  for (auto _ : state) {
    Result<Graph> g = import_onnx_bytes(bytes, o, "chain.onnx");
    if (!g.ok()) state.SkipWithError(g.error().c_str());
    benchmark::DoNotOptimize(g);
  }
  state.SetComplexityN(state.range(0));
}
BENCHMARK(BM_ImportChainInPlace)
    ->Arg(10000)
    ->Arg(100000)
    ->Complexity(benchmark::oN)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace headroom
