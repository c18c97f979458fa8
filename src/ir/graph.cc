#include "ir/graph.h"

#include <string>

#include "util/checked.h"
#include "util/error.h"

namespace headroom {

std::string_view tensor_role_name(TensorRole r) {
  switch (r) {
    case TensorRole::Input: return "input";
    case TensorRole::Target: return "target";
    case TensorRole::Parameter: return "parameter";
    case TensorRole::Buffer: return "buffer";
    case TensorRole::Activation: return "activation";
  }
  return "?";
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string r = "[";
  for (size_t i = 0; i < shape.size(); ++i) r += (i ? "," : "") + std::to_string(shape[i]);
  return r + "]";
}

// numel and bytes run for every tensor at every step of the interpreter: the overflow message
// (checked_mul's InputError) is built only when a product overflows.
int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) {
    int64_t r = 0;
    if (__builtin_mul_overflow(n, d, &r)) (void)checked_mul(n, d, "the element count of tensor '" + name + "'");
    n = r;
  }
  return n;
}

int64_t Tensor::bytes() const {
  const int64_t n = numel();
  int64_t r = 0;
  if (__builtin_mul_overflow(n, int64_t{dtype_size(dtype)}, &r)) {
    (void)checked_mul(n, dtype_size(dtype), "the bytes of tensor '" + name + "'");
  }
  return r;
}

TensorId Graph::storage_root(TensorId id) const {
  while (tensor(id).alias_of != kNone) id = tensor(id).alias_of;
  return id;
}

bool Graph::is_weight(TensorId id) const {
  TensorRole r = tensor(id).role;
  return r == TensorRole::Parameter || r == TensorRole::Buffer;
}

int64_t Graph::parameter_count() const {
  int64_t n = 0;
  for (const Tensor& t : tensors) {
    if (t.role == TensorRole::Parameter && t.tied_to == kNone) {
      n = checked_add(n, checked_mul(t.numel(), t.values_per_element, "parameter count"), "parameter count");
    }
  }
  return n;
}

int64_t Graph::trainable_parameter_count() const {
  int64_t n = 0;
  for (const Tensor& t : tensors) {
    if (t.requires_grad() && t.tied_to == kNone) n = checked_add(n, t.numel(), "parameter count");
  }
  return n;
}

int64_t Graph::weights_bytes() const {
  int64_t n = 0;
  for (const Tensor& t : tensors) {
    if (is_weight(t.id) && t.tied_to == kNone) n = checked_add(n, t.bytes(), "weight bytes");
  }
  return n;
}

int64_t Graph::input_bytes() const {
  int64_t n = 0;
  for (TensorId id : inputs) n = checked_add(n, tensor(id).bytes(), "input bytes");
  for (TensorId id : targets) n = checked_add(n, tensor(id).bytes(), "input bytes");
  return n;
}

void Graph::validate() const {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    HEADROOM_CHECK(t.id == static_cast<TensorId>(i), "tensor ids must be dense: " + t.name);
    HEADROOM_CHECK(t.alias_of < t.id, "a view must alias an earlier tensor: " + t.name);
    bool has_producer = t.producer != kNone;
    HEADROOM_CHECK(has_producer == (t.role == TensorRole::Activation),
                   "activations and only activations have a producer: " + t.name);
    for (int64_t d : t.shape) HEADROOM_CHECK(d >= 0, "negative dimension in " + t.name);
  }
  std::vector<bool> ready(tensors.size(), false);
  for (const Tensor& t : tensors) ready[static_cast<size_t>(t.id)] = t.producer == kNone;
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    HEADROOM_CHECK(op.id == static_cast<OpId>(i), "op ids must be dense: " + op.name);
    for (TensorId in : op.inputs) {
      HEADROOM_CHECK(in >= 0 && static_cast<size_t>(in) < tensors.size(), "bad input id in " + op.name);
      HEADROOM_CHECK(ready[static_cast<size_t>(in)],
                     "op '" + op.name + "' reads '" + tensor(in).name + "' before it is produced");
    }
    for (TensorId out : op.outputs) {
      HEADROOM_CHECK(tensor(out).producer == op.id, "output producer mismatch in " + op.name);
      ready[static_cast<size_t>(out)] = true;
    }
  }
}

}  // namespace headroom
