// hf_t5: T5ForConditionalGeneration (transformers v4.46 modeling_t5.py) from a t5 config.json:
// the shared embedding, an encoder and a decoder stack of T5Blocks (relative position bias in
// each stack's first block, RMS-style T5LayerNorm, ReLU or gated-GELU feed-forward), the lm_head
// (tied to the shared embedding unless tie_word_embeddings is false, then the output is scaled by
// d_model ** -0.5 first). One forward on input_ids [B, S] with decoder inputs of the same length
// (training: labels [B, S], _shift_right, CrossEntropyLoss), or, with BuildConfig::generation,
// forwards first..last of generate()'s greedy loop: the encoder once in forward 0, then the
// decoder on one token per forward with an EncoderDecoderCache (self-attention keys/values
// grown by torch.cat, cross-attention keys/values projected once and kept). Beam search and a
// StaticCache are InputErrors for T5.
#pragma once

#include <cstdint>
#include <string>

#include "frontends/zoo/model_spec.h"
#include "ir/graph.h"

namespace headroom {

struct T5Config {
  int64_t d_model = 0, d_kv = 0, d_ff = 0, layers = 0, decoder_layers = 0, heads = 0, vocab = 0;
  int64_t buckets = 32;
  bool gated = false;  // feed_forward_proj "gated-gelu" (T5 v1.1, flan-t5): wi_0, wi_1
  bool tie_embeddings = true;
  double dropout = 0.1;
};

Graph build_hf_t5(const T5Config& c, const std::string& model_name, const BuildConfig& cfg);

}  // namespace headroom
