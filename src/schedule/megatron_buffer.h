// Megatron-LM's contiguous parameter and gradient buffer of one DistributedDataParallel module
// (megatron/core/distributed/param_and_grad_buffer.py _ParamAndGradBuffer; the padding rules are
// megatron/core/optimizer/param_layout.py pad_param_start / pad_bucket_end), and which of its
// elements one data-parallel rank's distributed optimizer owns (megatron/core/optimizer/
// distrib_optimizer.py _build_model_gbuf_range: rank r owns [r E / dp, (r + 1) E / dp)).
//
//   order    the parameters in reverse module order (params[::-1]: the order their gradients
//            become ready in the backward);
//   buckets  one: Megatron's default --overlap-grad-reduce off sets bucket_size to None
//            (distributed_data_parallel.py), so the whole buffer is one bucket;
//   padding  with the distributed optimizer each parameter starts at a multiple of 64 elements
//            and the bucket ends at a multiple of lcm(dp, 128) (pad_buckets_for_high_nccl_busbw
//            off, the default); without it nothing is padded (_compute_default_per_buffer_param_layout).
//
// Invariants: elements >= the sum of the numels; elements % dp == 0 under the distributed
// optimizer; starts are increasing and parameters do not overlap.
#pragma once

#include <cstdint>
#include <vector>

namespace headroom {

struct MegatronBufferLayout {
  int64_t elements = 0;        // the buffer's elements, padding included
  std::vector<int64_t> start;  // per parameter, in the order given: its first element
};

// `numels`: the parameters in buffer order (already reversed). Throws InputError on overflow.
MegatronBufferLayout megatron_buffer_layout(const std::vector<int64_t>& numels, int data_parallel, bool distributed_optimizer);

// The elements of each parameter (same order) inside rank `rank`'s 1/dp range of the buffer:
// the shard of it the distributed optimizer keeps an fp32 main copy and Adam states of
// (padding belongs to no parameter and gets neither).
std::vector<int64_t> megatron_rank_pieces(const MegatronBufferLayout& layout, const std::vector<int64_t>& numels, int data_parallel, int rank);

// The data-parallel rank whose ranges, over the buffers of every model chunk it holds, cover the
// most parameter elements (the least padding; the lowest such rank): the rank whose optimizer
// states are largest, which an estimate of the layout must fit.
int megatron_most_loaded_rank(const std::vector<MegatronBufferLayout>& layouts, const std::vector<std::vector<int64_t>>& numels, int data_parallel);

}  // namespace headroom
