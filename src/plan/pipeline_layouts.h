// The pipeline-parallel families of the layout search (plan --gpus N; plan/layout_search.h):
// which (P, T) shapes are tried, and what a pipeline adds to a stage's step time.
//
//   shapes   P = 2, 4, 8, ... dividing the model's repeated blocks (Megatron's even split,
//            schedule/pipeline_split.h) and N, times T = 1, 2, 4, 8 within a machine, with
//            T * P dividing N; the data-parallel size is N / (T P), with Megatron-LM's own DDP
//            and distributed optimizer over it (--megatron --zero 1, schedule/interpreter_megatron.cc;
//            the families are named "x ZeRO-1"). The schedules are 1F1B and, where the stage's layers divide, the interleaved
//            one with v = 2 and 4 model chunks per rank (pipeline_virtual_stages; Megatron's
//            --num-layers-per-virtual-pipeline-stage L / (P v)).
//   bubble   the pipeline's idle time, (P - 1) / m of the forward-backward compute of the stage
//            (Narayanan et al. 2021, section 2.2.1: bubble time fraction (p - 1) / m; with v
//            model chunks (p - 1) / (v m)); every micro-batch count tried has m >= P.
//   p2p      each micro-batch sends its [b, s, h] activation forward and its gradient backward
//            across each stage boundary: 2 m b s h bytes per step and GPU, in the activation dtype, over
//            NVLink when a pipeline's neighbouring stages share a machine (N / P GPUs apart in
//            Megatron's rank order, tensor-parallel then data-parallel then pipeline), else the
//            network; counted in full (Megatron overlaps part of it).
//
// Invariants: every shape returned has T * P dividing N and P dividing the blocks; times are
// non-negative.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "plan/collectives.h"

namespace headroom {

struct PipelineShape {
  int64_t pipeline_parallel = 2;
  int64_t tensor_parallel = 1;
};

// `blocks`: the model's repeated blocks (0 when it has none: no shape). Shapes that do not
// divide N or the blocks are reported through `rejected` as (family, reason) once per P.
std::vector<PipelineShape> pipeline_shapes(int blocks, int64_t gpus, int gpus_per_node,
                                           std::vector<std::pair<std::string, std::string>>& rejected);

// The interleaved schedule's model chunks per rank tried for P stages of `blocks` blocks: 2 and 4
// where they divide the stage's L / P layers (larger v halves the bubble again but sends v times
// as often and keeps more chunks in flight; the search weighs both).
std::vector<int64_t> pipeline_virtual_stages(int blocks, int64_t stages);

struct PipelineOverhead {
  double bubble_ms = 0;
  int64_t p2p_bytes = 0;  // per GPU per step
  double p2p_ms = 0;
};

// `forward_backward_ms`: the stage's compute for the step's micro-batches (optimizer excluded);
// `activation_bytes`: one micro-batch's [b, s, h] hidden state.
PipelineOverhead pipeline_overhead(double forward_backward_ms, int64_t stages, int64_t virtual_stages, int64_t micro_batches,
                                   int64_t activation_bytes, int64_t gpus, const Interconnect& link);

}  // namespace headroom
