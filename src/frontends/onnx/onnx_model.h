// The ONNX frontend's view of a ModelProto before lowering: reading and parsing, the structural
// checks, symbolic-dimension binding and shape inference, and small accessors (attributes, element
// types, inferred shapes). Internal to src/frontends/onnx; everything throws InputError.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "frontends/onnx/onnx_import.h"
#include "ir/dtype.h"

namespace headroom::onnx_import {

// ---- reading --------------------------------------------------------------------------------
// The file's bytes; InputError when it is missing, not a regular file, unreadable, or larger
// than protobuf's 2 GB message limit.
std::string read_model_file(const std::string& path);
// Parses a ModelProto; InputError when the bytes are not one (truncated, not protobuf, no graph).
onnx::ModelProto parse_model(std::string_view bytes);

// ---- element types --------------------------------------------------------------------------
std::string elem_type_name(int32_t elem);
bool is_float_elem(int32_t elem);
// headroom's dtype of an ONNX element type; InputError naming `what` for types headroom does not
// model (strings, complex, 16-bit and unsigned 32/64-bit integers).
DType dtype_of(int32_t elem, const std::string& what);
int64_t elem_size(int32_t elem);  // bytes; 0 for strings and unknown types

// ---- operator sets ---------------------------------------------------------------------------
// Whether a node's domain is ONNX's standard operator set ("" or "ai.onnx"): the only ops the
// importer and its passes give meaning to.
bool is_default_domain(const std::string& domain);

// ---- attributes -----------------------------------------------------------------------------
// Typed attribute access for one node; a present attribute of the wrong type is an InputError.
class NodeAttrs {
 public:
  explicit NodeAttrs(const onnx::NodeProto& node) : node_(node) {}
  bool has(std::string_view name) const { return find(name) != nullptr; }
  int64_t i(std::string_view name, int64_t fallback) const;
  double f(std::string_view name, double fallback) const;
  std::string s(std::string_view name, const std::string& fallback) const;
  std::optional<std::vector<int64_t>> ints(std::string_view name) const;
  std::optional<std::vector<double>> floats(std::string_view name) const;
  const onnx::TensorProto* t(std::string_view name) const;

 private:
  const onnx::AttributeProto* find(std::string_view name) const;
  const onnx::AttributeProto* typed(std::string_view name,
                                    onnx::AttributeProto::AttributeType type) const;
  const onnx::NodeProto& node_;
};

// "'name' (OpType)" or "#index (OpType)" for messages.
std::string node_label(const onnx::NodeProto& node, size_t index);

// ---- structure ------------------------------------------------------------------------------
struct Structure {
  int64_t opset = 0;  // default-domain opset version
  // Producer node of every node output, and the readers of every tensor name.
  std::unordered_map<std::string, int> producer;
  std::unordered_map<std::string, std::vector<std::pair<int, int>>>
      consumers;                                     // (node, input slot)
  std::unordered_map<std::string, int> initializer;  // name -> index in graph.initializer
  std::vector<std::string> inputs;                   // graph inputs that are not initializers
  std::unordered_map<std::string, int> output_uses;  // graph output name -> times listed
};

// Names become parts of messages (C strings): InputError when a name of the graph holds a NUL byte.
void check_names(const onnx::GraphProto& g);

// Checks that every tensor is defined once (graph input, initializer or one node output), that
// every read names a defined tensor produced by an earlier node (a cycle or an unsorted graph is
// reported as such), that graph inputs and outputs are tensors, and that each default-domain node
// passes its schema's Verify (input/output counts, attribute types).
// An If's branches and a Loop's or Scan's body are left to resolve_control_flow (onnx_control_flow.h); any
// other subgraph is an InputError.
Structure check_structure(const onnx::ModelProto& model);

// An initializer's declared dims: non-negative, with an element and byte count that fit int64;
// inline data, if any, matches them. InputError naming it.
void check_initializer(const onnx::TensorProto& t);

// One node's default-domain schema check (input/output counts, attribute types, tensor
// attributes that hold every value); InputError starting with `label`. Other domains pass.
void check_node_schema(const onnx::NodeProto& node, const std::string& label, int64_t opset);

// ---- symbolic dimensions --------------------------------------------------------------------
struct DimBinding {
  std::map<std::string, int64_t> values;  // symbol -> value, as bound
  std::vector<std::string> batch_symbols;
  // Per graph input (Structure::inputs order): the batch axis, or -1.
  std::vector<int> batch_axis;
  std::vector<std::string> notes;
};

// Whether a symbolic dimension's name marks a batch axis: N, B, bs, or containing "batch"
// (any case). Axis 0 of an input is a batch axis whatever its name.
bool is_batch_symbol(const std::string& symbol);

// Gives every symbolic dimension of the graph inputs a value (see OnnxImportOptions::batch and
// dims) and writes the values into the graph's inputs, outputs and value_info.
DimBinding bind_dims(onnx::ModelProto& model, const Structure& st,
                     const OnnxImportOptions& options);

// ---- shape inference ------------------------------------------------------------------------
struct InferredType {
  int32_t elem = 0;  // 0: unknown
  bool has_shape = false;
  std::vector<int64_t> dims;  // -1 for a dimension inference left unknown
  bool static_shape() const;
};
using TypeTable = std::unordered_map<std::string, InferredType>;

// Runs onnx::shape_inference::InferShapes (data propagation on) on the bound model and collects
// the type of every named tensor (graph inputs, value_info, outputs). InputError when inference
// finds a contradiction between declared and inferred shapes.
TypeTable infer_types(onnx::ModelProto& model);

}  // namespace headroom::onnx_import
