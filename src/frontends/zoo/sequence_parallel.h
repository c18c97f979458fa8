// sequence_parallel: Megatron-LM's sequence parallelism (Korthikanti et al. 2022, "Reducing
// Activation Recomputation in Large Transformer Models", section 4.2.2) in the graph of one
// tensor-parallel rank, shared by the zoo's gpt2 and llama and the Hugging Face decoders.
//
// With it the residual stream between the tensor-parallel regions holds seq / T positions per
// rank: the norms, dropouts and residual adds run on the rank's sequence shard. Megatron-LM
// (megatron/core/tensor_parallel/layers.py, mappings.py):
//  - a column-parallel linear (QKV, fc1 / gate+up, the output layer) all-gathers its input shard
//    into get_global_memory_buffer()'s "mpu" buffer and multiplies the full sequence
//    (LinearWithGradAccumulationAndAsyncCommunication.forward); autograd keeps the shard, and
//    the backward gathers it again (ctx.save_for_backward(input, weight); backward: the same
//    _all_gather_base into the buffer), then reduce-scatters the input gradient into a new shard;
//  - a row-parallel linear's partial output is reduce-scattered into a new shard
//    (reduce_scatter_to_sequence_parallel_region) instead of all-reduced in place;
//  - the embedding output is scattered to the rank's shard and cloned
//    (scatter_to_sequence_parallel_region, clone_scatter_output_in_embedding) before its
//    dropout: a new shard, as the reduce-scatter makes.
// The activations are [batch, seq, ...] here (Hugging Face's layout; Megatron's [seq, batch, ...]
// holds the same bytes), so the sequence axis is 1.
//
// Invariants: off (ranks == 1) every call returns its input unchanged and the graph is the plain
// tensor-parallel one; on, ranks == T > 1 and T divides the sequence length (InputError).
#pragma once

#include <cstdint>
#include <string>

#include "frontends/zoo/model_spec.h"
#include "ir/builder.h"

namespace headroom {

class SequenceParallel {
 public:
  // InputError when cfg asks for sequence parallelism without tensor parallelism (T > 1).
  explicit SequenceParallel(const BuildConfig& cfg);

  bool on() const { return ranks_ > 1; }
  // The input of a column-parallel linear: the full sequence, a view of Megatron's buffer.
  TensorId gather_for_linear(GraphBuilder& b, const std::string& name, TensorId shard) const;
  // A row-parallel linear's partial output, or the embedding's output: the rank's shard.
  TensorId scatter(GraphBuilder& b, const std::string& name, TensorId full) const;

 private:
  int64_t ranks_ = 1;
};

}  // namespace headroom
