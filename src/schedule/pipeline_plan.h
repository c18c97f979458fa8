// A memory plan of the model's graph carried over to one pipeline rank's graph
// (schedule/pipeline_split.h): the checkpoint regions that lie in the rank's blocks, with the
// rank graph's op ids. The stage split keeps op names, so a region is found by the names of its
// ops: a region whose ops all belong to the rank is kept (consecutive there, as in the model), one
// none of whose ops the rank runs belongs to another stage and is dropped, and one the split cuts
// (some of its ops on this rank, some on another) is an InputError naming it: a stage cannot
// checkpoint across its p2p boundary. This is how Megatron checkpoints inside a stage
// (--recompute-granularity full --recompute-method uniform --recompute-num-layers 1: each of the
// stage's layers in its own tensor_parallel.checkpoint, megatron/core/transformer/
// transformer_block.py _checkpointed_forward; --recompute-granularity selective: each layer's
// core attention), with --checkpoint blocks and --checkpoint attention respectively.
//
// Invariants: the result's regions are the model plan's regions restricted to the rank, in the
// same order and nesting, with the same checkpoint implementation; offloading and workspace
// choices are not carried (their callers refuse them with pipelines).
#pragma once

#include "ir/graph.h"
#include "schedule/memory_plan.h"

namespace headroom {

MemoryPlan plan_for_rank(const Graph& model, const Graph& rank, const MemoryPlan& plan);

}  // namespace headroom
