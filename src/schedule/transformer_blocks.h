// The repeated blocks of a model (a transformer's decoder layers, GPT-2's `transformer.h.N`,
// Llama's `model.layers.N`), found from the module paths of its ops: the container whose
// `PREFIX.<i>.` children are the most. Activation checkpointing per block, as Hugging Face's
// gradient_checkpointing_enable() and DeepSpeed's activation checkpointing of Megatron layers
// do it, is one checkpoint segment per block (MemoryPlan's reentrant torch.utils.checkpoint).
//
// Invariants: blocks are disjoint, sorted, inside the model's forward (no loss op), and each
// gives its parameters gradients (checkpoint_gets_gradients); fewer than two blocks: none.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "schedule/memory_plan.h"

namespace headroom {

struct TransformerBlocks {
  std::string container;                    // "transformer.h", "model.layers"; "" without blocks
  std::vector<CheckpointSegment> segments;  // one per block, in order
};

TransformerBlocks transformer_blocks(const Graph& g);

// Megatron-LM's selective activation recomputation (--recompute-granularity selective;
// megatron/core/transformer/attention.py _checkpointed_attention_forward: one
// tensor_parallel.checkpoint around core_attention, i.e. Q K^T, the scaling and mask, softmax,
// attention dropout and the product with V; Korthikanti et al. 2022, section 5): per block, the
// ops from the one named `*.matmul_scores` to the one named `*.matmul_context` (the eager
// attention of the zoo's gpt2 and llama and of Hugging Face configs with --attention eager).
// Empty when some block has no such pair.
std::vector<CheckpointSegment> attention_cores(const Graph& g);

}  // namespace headroom
