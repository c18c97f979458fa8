#include "frontends/zoo/megatron_split.h"

#include "util/checked.h"
#include "util/error.h"

namespace headroom {

int64_t megatron_vocab_rows(int64_t vocab, int64_t t) {
  if (t == 1) return vocab;
  const int64_t multiple = checked_mul(128, t, "the padded vocabulary");
  return checked_mul((checked_add(vocab, multiple - 1, "the padded vocabulary")) / multiple, multiple, "the padded vocabulary") / t;
}

void check_megatron_split(int64_t t, int64_t heads, int64_t kv_heads, int64_t mlp_width, const std::string& model) {
  if (t < 1) throw InputError("--tensor-parallel must be a positive integer");
  const std::string head = "--tensor-parallel " + std::to_string(t) + " must divide the ";
  if (heads % t != 0) {
    throw InputError(head + std::to_string(heads) + " attention heads of " + model + " (Megatron splits whole heads)");
  }
  if (kv_heads % t != 0) {
    throw InputError(head + std::to_string(kv_heads) + " key/value heads of " + model +
                     " (Megatron splits whole query groups)");
  }
  if (mlp_width > 0 && mlp_width % t != 0) {
    throw InputError(head + "MLP width " + std::to_string(mlp_width) + " of " + model + " (column-parallel fc1 splits it)");
  }
}

void set_transformer_dims(GraphBuilder& b, int64_t hidden, int64_t layers) {
  b.set_dim("hidden", hidden);
  b.set_dim("layers", layers);
}

}  // namespace headroom
