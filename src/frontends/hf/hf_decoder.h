// hf_decoder: the decoder-only Hugging Face families (llama, mistral, mixtral, qwen2, gemma,
// gemma2, phi3, gpt_neox, falcon) as a Graph, one PyTorch call at a time in the order their
// modeling_*.py forward runs (transformers v4.46), with a DynamicCache when the graph is a window
// of generate()'s loop (BuildConfig::generation).
//
// Parameters are declared in each module's __init__ order with state_dict names, so
// parameter_count() equals the published checkpoint's. Forwards:
//  - one forward (--mode infer / train): model(input_ids) with use_cache=False, all logits;
//    training adds the loss (ForCausalLMLoss: logits.float(), shift, cross-entropy);
//  - generation: the forwards of the window, each followed by generate()'s greedy step
//    (next_token_logits = logits[:, -1, :].clone().float(), argmax, torch.cat onto input_ids)
//    or, with beams, _beam_search's step (log_softmax, topk over [B, K x vocab], the scorer's
//    tensors, input_ids gathered by beam_idx, DynamicCache.reorder_cache by index_select), with
//    num_logits_to_keep=1 as generate() passes it; the cache of forward i is held until
//    forward i + 1 replaces it (torch.cat allocates the longer cache, then the old one goes), or
//    is a StaticCache preallocated before the prefill and written in place (index_copy_).
// Limits: attention masks are the causal masks of input_ids without padding (no attention_mask
// argument); MoE routing is balanced (each expert gets tokens * k / experts tokens).
#pragma once

#include <string>

#include "frontends/hf/hf_config.h"
#include "frontends/zoo/model_spec.h"
#include "ir/graph.h"

namespace headroom {

// InputError when the sequence is longer than max_position_embeddings or the window is invalid.
Graph build_hf_decoder(const HfDecoderConfig& c, const std::string& model_name, const BuildConfig& cfg);

// The attention transformers uses by default for a family (sdpa for every family here).
AttentionKind default_attention(const HfDecoderConfig& c);

}  // namespace headroom
