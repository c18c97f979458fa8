// Test helper: small ONNX models written with the protobuf API (no Python), e.g.
//
//   OnnxModel m;
//   m.input("x", {"batch", 3, 8, 8});
//   m.initializer("conv.weight", {4, 3, 3, 3});
//   m.node("Conv", {"x", "conv.weight"}, {"y"}).ints("pads", {1, 1, 1, 1});
//   m.output("y");
//   Result<Graph> g = import_onnx_bytes(m.bytes(), options);
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <variant>
#include <vector>

#include "frontends/onnx/onnx_import.h"

namespace headroom::testing {

// Import options at a batch, everything else the default.
inline OnnxImportOptions batch_options(int64_t batch) {
  OnnxImportOptions o;
  o.batch = batch;
  return o;
}

using Dim = std::variant<int64_t, std::string>;  // a size or a symbolic name
using onnx::TensorProto;

class OnnxNode {
 public:
  explicit OnnxNode(onnx::NodeProto* n) : n_(n) {}
  OnnxNode& i(const std::string& name, int64_t v) {
    auto* a = attr(name, onnx::AttributeProto::INT);
    a->set_i(v);
    return *this;
  }
  OnnxNode& f(const std::string& name, float v) {
    attr(name, onnx::AttributeProto::FLOAT)->set_f(v);
    return *this;
  }
  OnnxNode& s(const std::string& name, const std::string& v) {
    attr(name, onnx::AttributeProto::STRING)->set_s(v);
    return *this;
  }
  OnnxNode& ints(const std::string& name, const std::vector<int64_t>& v) {
    auto* a = attr(name, onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
    return *this;
  }
  OnnxNode& tensor(const std::string& name, const TensorProto& t) {
    *attr(name, onnx::AttributeProto::TENSOR)->mutable_t() = t;
    return *this;
  }
  // A subgraph attribute (If's then_branch / else_branch).
  OnnxNode& graph(const std::string& name, const onnx::GraphProto& g) {
    *attr(name, onnx::AttributeProto::GRAPH)->mutable_g() = g;
    return *this;
  }
  onnx::NodeProto& proto() { return *n_; }

 private:
  onnx::AttributeProto* attr(const std::string& name, onnx::AttributeProto::AttributeType type) {
    onnx::AttributeProto* a = n_->add_attribute();
    a->set_name(name);
    a->set_type(type);
    return a;
  }
  onnx::NodeProto* n_;
};

enum class Weights { Inline, ExternalMissing, Absent };

class OnnxModel {
 public:
  explicit OnnxModel(int64_t opset = 13) {
    model_.set_ir_version(7);
    model_.set_producer_name("headroom-test");
    auto* o = model_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    model_.mutable_graph()->set_name("test");
  }

  static void set_dims(onnx::TypeProto* type, int32_t elem, const std::vector<Dim>& dims,
                       bool with_shape = true) {
    auto* t = type->mutable_tensor_type();
    t->set_elem_type(elem);
    if (!with_shape) return;
    auto* shape = t->mutable_shape();
    for (const Dim& d : dims) {
      auto* dim = shape->add_dim();
      if (std::holds_alternative<int64_t>(d))
        dim->set_dim_value(std::get<int64_t>(d));
      else
        dim->set_dim_param(std::get<std::string>(d));
    }
  }
  OnnxModel& input(const std::string& name, const std::vector<Dim>& dims,
                   int32_t elem = TensorProto::FLOAT) {
    auto* v = model_.mutable_graph()->add_input();
    v->set_name(name);
    set_dims(v->mutable_type(), elem, dims);
    return *this;
  }
  OnnxModel& input_without_shape(const std::string& name) {
    auto* v = model_.mutable_graph()->add_input();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(TensorProto::FLOAT);
    return *this;
  }
  OnnxModel& output(const std::string& name, int32_t elem = TensorProto::FLOAT) {
    auto* v = model_.mutable_graph()->add_output();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
    return *this;
  }
  OnnxModel& value_info(const std::string& name, const std::vector<Dim>& dims,
                        int32_t elem = TensorProto::FLOAT) {
    auto* v = model_.mutable_graph()->add_value_info();
    v->set_name(name);
    set_dims(v->mutable_type(), elem, dims);
    return *this;
  }
  // A weight; Inline stores zeros, ExternalMissing points at a file that does not exist.
  OnnxModel& initializer(const std::string& name, const std::vector<int64_t>& dims,
                         Weights w = Weights::Inline, int32_t elem = TensorProto::FLOAT) {
    TensorProto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(elem);
    int64_t n = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      // Dims meant to overflow (OnnxBadInput.OverflowingDims) come without inline data: wrap
      // without undefined behaviour and never use n then.
      n = static_cast<int64_t>(static_cast<uint64_t>(n) * static_cast<uint64_t>(d));
    }
    if (w == Weights::Inline) {
      t->set_raw_data(
          std::string(static_cast<size_t>(n) * (elem == TensorProto::INT64 ? 8 : 4), '\0'));
    } else if (w == Weights::ExternalMissing) {
      t->set_data_location(TensorProto::EXTERNAL);
      auto* e = t->add_external_data();
      e->set_key("location");
      e->set_value("missing_weights.bin");
    }
    return *this;
  }
  OnnxModel& int64_initializer(const std::string& name, const std::vector<int64_t>& values) {
    TensorProto* t = model_.mutable_graph()->add_initializer();
    *t = int64s(values);
    t->set_name(name);
    return *this;
  }
  static TensorProto int64s(const std::vector<int64_t>& values, bool scalar = false) {
    TensorProto t;
    t.set_data_type(TensorProto::INT64);
    if (!scalar) t.add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t.add_int64_data(v);
    return t;
  }
  static TensorProto float_scalar(float v) {
    TensorProto t;
    t.set_data_type(TensorProto::FLOAT);
    t.add_float_data(v);
    return t;
  }
  // A Constant node producing `name`.
  OnnxModel& constant(const std::string& name, const TensorProto& value) {
    node("Constant", {}, {name}).tensor("value", value);
    return *this;
  }
  OnnxNode node(const std::string& op, const std::vector<std::string>& inputs,
                const std::vector<std::string>& outputs, const std::string& name = "") {
    onnx::NodeProto* n = model_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + "_" + std::to_string(model_.graph().node_size()) : name);
    for (const std::string& i : inputs) n->add_input(i);
    for (const std::string& o : outputs) n->add_output(o);
    return OnnxNode(n);
  }
  std::string bytes() const { return model_.SerializeAsString(); }
  void save(const std::string& path) const {
    std::ofstream out(path, std::ios::binary);
    out << bytes();
  }
  onnx::ModelProto& proto() { return model_; }

 private:
  onnx::ModelProto model_;
};

}  // namespace headroom::testing
