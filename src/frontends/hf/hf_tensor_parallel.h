// hf_tensor_parallel: a Hugging Face decoder config as the model one Megatron tensor-parallel rank
// runs (megatron_split.h): heads / T query heads and kv_heads / T key/value heads per rank (so
// the fused or separate QKV projections are column-parallel and o_proj row-parallel), the MLP
// (every expert's, for Mixtral) intermediate / T wide (gate/up/fc1 column-parallel, down/fc2
// row-parallel), and the vocabulary rows of the vocab-parallel embedding and LM head. The hidden
// size, head size, norms and rotary buffers are those of the whole model (replicated).
//
// The decoder builder then runs the rank's forward with these sizes: one graph builder, no
// second model of a split.
//
// Invariants: T = 1 returns the config unchanged; T must divide heads, kv_heads and the MLP
// width (InputError naming which); the rank's embedding rows follow megatron_vocab_rows.
#pragma once

#include <cstdint>
#include <string>

#include "frontends/hf/hf_config.h"
#include "frontends/zoo/model_spec.h"

namespace headroom {

HfDecoderConfig megatron_rank_config(const HfDecoderConfig& c, int64_t t, const std::string& model);

// InputError when the run's options have no tensor-parallel form here: --lora and --weights
// (adapters and quantized storage are not split) and --mode generate (the sampling step would
// need the all-gathered logits).
void check_tensor_parallel_options(const BuildConfig& cfg, const std::string& model);

}  // namespace headroom
