// Built-in model names with parameters: "NAME" or "NAME:key=value,key=value".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "ir/dtype.h"

namespace headroom {

struct ModelSpec {
  std::string name;
  std::map<std::string, std::string> params;
};

// InputError on a malformed spec ("resnet50:", "mlp:layers", "mlp:a=1,a=2").
ModelSpec parse_model_spec(const std::string& text);

enum class LossKind : uint8_t { Default, CrossEntropy, NextToken, Mse };

// What every builder needs besides its own parameters.
struct BuildConfig {
  int64_t batch = 1;
  std::optional<int64_t> seq;   // sequence length for sequence models (their default otherwise)
  DType dtype = DType::F32;     // activation and weight storage dtype of the model
  LossKind loss = LossKind::Default;
  double dropout_scale = 1.0;   // 0 turns every dropout into identity
  // The graph is for an inference run: module.eval() under torch.no_grad(). Most graphs do not
  // depend on it (the schedule applies eval semantics per op), but some Python forwards branch on
  // it: inception_v3 skips its aux head in eval, nn.MultiheadAttention takes its fused fast path
  // (torch._native_multi_head_attention) under eval + no_grad.
  bool inference = false;
  // Megatron tensor parallelism: the graph of one of `tensor_parallel` ranks (column-parallel
  // QKV and fc1, row-parallel projections, vocab-parallel embedding). Builders that have no
  // split reject values above 1 (ZooEntry::tensor_parallel).
  int64_t tensor_parallel = 1;
};

// Reads the spec's parameters with defaults; every key read is recorded, so that
// `reject_unused` can name a parameter the model does not know.
class SpecReader {
 public:
  explicit SpecReader(const ModelSpec& spec) : spec_(spec) {}
  int64_t get_int(const std::string& key, int64_t fallback, int64_t min_value = 1);
  bool get_bool(const std::string& key, bool fallback);
  std::string get_string(const std::string& key, const std::string& fallback);
  bool has(const std::string& key) const { return spec_.params.count(key) > 0; }
  void reject_unused() const;

 private:
  const ModelSpec& spec_;
  std::set<std::string> used_;
};

}  // namespace headroom
