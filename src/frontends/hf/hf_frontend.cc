#include "frontends/hf/hf_frontend.h"

#include "frontends/hf/hf_decoder.h"
#include "frontends/hf/hf_t5.h"
#include "frontends/zoo/registry.h"
#include "util/checked.h"
#include "util/error.h"

namespace headroom {

HfLoader hf_graph_loader(const std::string& path) { return hf_graph_loader(read_hf_config(path)); }

HfLoader hf_graph_loader(HfModel m) {
  HfLoader l;
  l.torch_dtype = m.torch_dtype;
  if (m.zoo_spec.empty() && m.family != HfFamily::T5) {
    l.kv_values_per_token = checked_mul(checked_mul(checked_mul(2, m.decoder.layers, "KV cache per token"), m.decoder.kv_heads, "KV cache per token"),
                                        m.decoder.head_dim, "KV cache per token");
  }
  l.load = [m = std::move(m)](const BuildConfig& cfg) -> Graph {
    if (!m.zoo_spec.empty()) {
      if (cfg.generation) throw InputError(m.path + ": --mode generate needs a decoder-only model (not " + m.zoo_spec.substr(0, m.zoo_spec.find(':')) + ")");
      if (cfg.weights != WeightFormat::Default) throw InputError("--weights applies to the decoder families (llama, mistral, ...), not " + m.zoo_spec.substr(0, m.zoo_spec.find(':')));
      if (cfg.lora) throw InputError("--lora applies to the decoder families (llama, mistral, ...), not " + m.zoo_spec.substr(0, m.zoo_spec.find(':')));
      if (cfg.attention != AttentionKind::Default) throw InputError("--attention applies to the decoder families (llama, mistral, ...), not " + m.zoo_spec.substr(0, m.zoo_spec.find(':')));
      Graph g = build_model(m.zoo_spec, cfg);
      g.model = m.path;
      return g;
    }
    if (m.family == HfFamily::T5) {
      if (cfg.tensor_parallel > 1) throw InputError("--tensor-parallel: " + m.path + " is a t5 model, which has no Megatron split in headroom (decoder-only configs and gpt2 do)");
      return build_hf_t5(m.t5, m.path, cfg);
    }
    return build_hf_decoder(m.decoder, m.path, cfg);
  };
  return l;
}

}  // namespace headroom
