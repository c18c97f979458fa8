// The communication Megatron tensor parallelism adds to a training step: the all-reduces of
// activations among the T ranks of a tensor-parallel group (Shoeybi et al. 2019, section 3:
// the conjugate f/g operators). Per micro-batch and transformer layer, the row-parallel attention
// output and second MLP projections all-reduce their outputs in the forward (2) and the
// column-parallel QKV and first MLP projections all-reduce their input gradients in the backward
// (2); the vocab-parallel embedding all-reduces its output (1, forward) and the column-parallel
// output layer its input gradient (1, backward). Each moves a [batch, seq, hidden] tensor of the
// activation dtype. These all-reduces sit on the critical path (the next op needs their result),
// so none of their time is hidden behind compute.
//
// With sequence parallelism (Korthikanti et al. 2022, section 4.2.2) each all-reduce becomes a
// reduce-scatter and an all-gather (the g and g-bar operators; Megatron's mappings.py
// reduce_scatter_to_sequence_parallel_region and gather_from_sequence_parallel_region): the
// same bytes, as the paper says ("the communication bandwidth used for tensor parallelism and
// tensor together with sequence parallelism are the same"), in twice the calls. The backward's
// re-gather of the shard a column-parallel linear saved (layers.py,
// LinearWithGradAccumulationAndAsyncCommunication.backward) runs asynchronously under the input
// gradient's GEMM and is not counted.
//
// Invariants: T = 1 communicates nothing; the sizes come from the rank's graph dims (batch, seq,
// hidden, layers: megatron_split.h's set_transformer_dims), so a graph without them is a caller
// error; the tensor-parallel group is within one machine (T <= GPUs per node), on its fastest link.
#pragma once

#include <cstdint>

#include "ir/graph.h"
#include "plan/collectives.h"

namespace headroom {

// All-reduces of one step of `micro_batches` micro-batches on the rank's graph `g` (its batch is
// the micro-batch); `activation_bytes` is the size of one activation element.
StepCommunication tensor_parallel_communication(const Graph& g, int64_t tensor_parallel, int64_t micro_batches,
                                                int64_t activation_bytes, const Interconnect& link, bool sequence_parallel = false);

}  // namespace headroom
