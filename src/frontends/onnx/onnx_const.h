// Compile-time tensors of an imported ONNX graph: Constant nodes, small integer initializers and
// everything computed from them and from static shapes (Shape -> Gather -> Concat -> Reshape).
// PyTorch evaluates these in Python or on scalars; they cost no tensor memory, so the importer
// folds them instead of emitting ops.
//
// Values are kept only up to kMaxFoldElements elements; a larger constant (ConstantOfShape of an
// attention mask) keeps its type and shape without data, which is enough to materialize it as a
// tensor when a runtime op reads it.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace headroom::onnx_import {

inline constexpr int64_t kMaxFoldElements = int64_t{1} << 16;

struct ConstTensor {
  int32_t elem = 0;  // ONNX TensorProto::DataType
  std::vector<int64_t> shape;
  bool known = false;          // values below are valid
  std::vector<int64_t> ints;   // integer and bool element types
  std::vector<double> floats;  // floating element types

  bool is_float() const;
  int64_t numel() const;  // checked
  size_t size() const { return is_float() ? floats.size() : ints.size(); }
  double as_double(size_t i) const { return is_float() ? floats[i] : static_cast<double>(ints[i]); }
  // InputError naming `what` when the value is unknown or not integral.
  std::vector<int64_t> int_values(const std::string& what) const;
  // The single value of a one-element tensor, if known.
  std::optional<double> scalar() const;
};

// Reads a TensorProto's declared type and dims, and its values when they are inline and at most
// `max_elements` long. Dims are checked (negative or overflowing: InputError naming `what`);
// inline data whose length contradicts the dims is an InputError; external data is never read.
ConstTensor decode_tensor(const onnx::TensorProto& t, const std::string& what,
                          int64_t max_elements = kMaxFoldElements);

// How many values a tensor holds inline in the field its data type uses (raw_data or the typed
// field); -1 for external data and types without a numeric field (strings, complex).
int64_t inline_value_count(const onnx::TensorProto& t);

// A scalar/vector of int64 for Shape-like results.
ConstTensor int64_tensor(std::vector<int64_t> values, bool as_scalar = false);

// Evaluates `node` on constant inputs (nullptr for an omitted optional input). Returns nothing
// when the op is not one the folder evaluates, or when some input's data is unknown and the op
// needs it. `opset` selects attribute-vs-input forms. Bad attributes are InputErrors.
std::optional<std::vector<ConstTensor>> fold_node(const onnx::NodeProto& node, int64_t opset,
                                                  const std::vector<const ConstTensor*>& inputs);

// Broadcasts two shapes numpy-style; InputError naming `what` when they do not broadcast.
std::vector<int64_t> broadcast(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                               const std::string& what);

// ONNX Reshape's target shape for an input of shape `in`: 0 copies the input's dimension (unless
// allowzero), one -1 is inferred. InputError naming `what` when the sizes do not match.
std::vector<int64_t> reshape_target(const std::vector<int64_t>& in, std::vector<int64_t> shape,
                                    bool allowzero, const std::string& what);

}  // namespace headroom::onnx_import
