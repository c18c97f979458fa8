// megatron_split: the sizes one rank holds under Megatron-LM tensor parallelism, shared by every
// transformer builder that has a split (the zoo's gpt2 and llama, the Hugging Face decoders), so
// that there is one way to split a model.
//
// Megatron (megatron/core/tensor_parallel/layers.py) makes the QKV and first MLP projections
// column-parallel (outputs and bias split), the attention output and second MLP projections
// row-parallel (inputs split, bias whole, the all-reduce in place), and the token embedding and
// output layer vocab-parallel over the vocabulary padded by _vocab_size_with_padding
// (megatron/training/tokenizer or arguments: make_vocab_size_divisible_by = 128, times T).
//
// Invariants: T >= 1; T = 1 is the unsplit model (no padding: Hugging Face's vocabulary); a rank
// holds whole attention heads and whole key/value groups, so T divides both head counts and the
// MLP width, else InputError.
#pragma once

#include <cstdint>
#include <string>

#include "ir/builder.h"

namespace headroom {

// Rows of the embedding and output layer one of `t` ranks holds: the vocabulary padded to a
// multiple of 128 * t, divided by t; `vocab` itself when t == 1.
int64_t megatron_vocab_rows(int64_t vocab, int64_t t);

// InputError naming the count T does not divide: `heads` query heads, `kv_heads` key/value heads
// (query groups), `mlp_width` the MLP's intermediate size (0: not checked). `model` names the
// model in the message.
void check_megatron_split(int64_t t, int64_t heads, int64_t kv_heads, int64_t mlp_width, const std::string& model);

// Records the residual stream's width and the number of layers as the graph's dims "hidden" and
// "layers" (with "batch" and "seq": the size of the activations a rank's all-reduces move,
// plan/tensor_parallel_comm.h).
void set_transformer_dims(GraphBuilder& b, int64_t hidden, int64_t layers);

}  // namespace headroom
