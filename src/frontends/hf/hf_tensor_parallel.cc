#include "frontends/hf/hf_tensor_parallel.h"

#include "frontends/zoo/megatron_split.h"
#include "util/error.h"

namespace headroom {

HfDecoderConfig megatron_rank_config(const HfDecoderConfig& c, int64_t t, const std::string& model) {
  check_megatron_split(t, c.heads, c.kv_heads, c.intermediate, model);
  if (t == 1) return c;
  HfDecoderConfig r = c;
  r.heads = c.heads / t;
  r.kv_heads = c.kv_heads / t;
  r.intermediate = c.intermediate / t;
  r.vocab = megatron_vocab_rows(c.vocab, t);
  return r;
}

void check_tensor_parallel_options(const BuildConfig& cfg, const std::string& model) {
  if (cfg.tensor_parallel == 1) return;
  const std::string with = "--tensor-parallel " + std::to_string(cfg.tensor_parallel) + " with ";
  if (cfg.lora) throw InputError(with + "--lora: LoRA adapters have no Megatron split in headroom (" + model + ")");
  if (cfg.weights != WeightFormat::Default) {
    throw InputError(with + "--weights: quantized storage has no Megatron split in headroom (" + model + ")");
  }
  if (cfg.generation) {
    throw InputError(with + "--mode generate: generation under tensor parallelism is not modelled (" + model + ")");
  }
}

}  // namespace headroom
