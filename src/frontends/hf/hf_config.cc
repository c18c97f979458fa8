#include "frontends/hf/hf_config.h"

#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/file.h"
#include "util/format.h"
#include "util/json_input.h"

namespace headroom {
namespace {

using nlohmann::json;

bool ends_with_json(const std::string& s) {
  return s.size() > 5 && s.compare(s.size() - 5, 5, ".json") == 0;
}

// Reads fields of one config, naming the file and the field in every error.
class Fields {
 public:
  Fields(const json& j, std::string path) : j_(j), path_(std::move(path)) {}

  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }

  int64_t integer(const char* key) const {
    if (!has(key)) throw InputError(path_ + ": missing field '" + key + "'");
    return positive(key, j_.at(key));
  }
  int64_t integer(const char* key, int64_t fallback) const { return has(key) ? integer(key) : fallback; }
  // The first of two spellings (gpt2's n_embd vs hidden_size), else the second.
  int64_t integer_of(const char* key, const char* alias) const { return has(key) ? integer(key) : integer(alias); }

  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_.at(key).is_boolean()) throw InputError(path_ + ": field '" + std::string(key) + "' is not true or false");
    return j_.at(key).get<bool>();
  }
  double number(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    if (!j_.at(key).is_number()) throw InputError(path_ + ": field '" + std::string(key) + "' is not a number");
    return j_.at(key).get<double>();
  }
  std::string text(const char* key) const {
    if (!has(key)) throw InputError(path_ + ": missing field '" + key + "'");
    if (!j_.at(key).is_string()) throw InputError(path_ + ": field '" + std::string(key) + "' is not a string");
    return j_.at(key).get<std::string>();
  }
  const std::string& path() const { return path_; }

 private:
  int64_t positive(const char* key, const json& v) const {
    if (!v.is_number_integer() || v.get<int64_t>() <= 0) {
      throw InputError(path_ + ": field '" + std::string(key) + "' must be a positive integer, got " + json_value_text(v));
    }
    return v.get<int64_t>();
  }

  const json& j_;
  std::string path_;
};

std::optional<DType> torch_dtype(const Fields& f) {
  if (!f.has("torch_dtype")) return std::nullopt;
  std::string t = f.text("torch_dtype");
  if (t == "float32") return DType::F32;
  if (t == "float16") return DType::F16;
  if (t == "bfloat16") return DType::BF16;
  throw InputError(f.path() + ": torch_dtype '" + escape_control(t) + "' is not float32, float16 or bfloat16");
}

// The fields LlamaConfig and its descendants share (configuration_llama.py and the mistral,
// mixtral, qwen2, gemma, gemma2 and phi3 configs).
void read_llama_like(const Fields& f, HfDecoderConfig& c) {
  c.hidden = f.integer("hidden_size");
  c.layers = f.integer("num_hidden_layers");
  c.heads = f.integer("num_attention_heads");
  c.kv_heads = f.integer("num_key_value_heads", c.heads);
  c.intermediate = f.integer("intermediate_size");
  c.vocab = f.integer("vocab_size");
  c.max_positions = f.integer("max_position_embeddings");
  c.head_dim = f.integer("head_dim", 0);
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  c.mlp_bias = f.boolean("mlp_bias", false);
  c.tie_embeddings = f.boolean("tie_word_embeddings", false);
  // rope_scaling (llama3, linear, dynamic, yarn, longrope) changes the frequencies, not the
  // sizes of any tensor: read by nothing here.
}

HfDecoderConfig read_decoder(HfFamily family, const std::string& model_type, const Fields& f) {
  HfDecoderConfig c;
  c.family = family;
  c.model_type = model_type;
  switch (family) {
    case HfFamily::Llama:
    case HfFamily::Mistral:
      read_llama_like(f, c);
      break;
    case HfFamily::Mixtral:
      read_llama_like(f, c);
      c.experts = f.integer("num_local_experts");
      c.experts_per_tok = f.integer("num_experts_per_tok");
      break;
    case HfFamily::Qwen2:
      read_llama_like(f, c);
      c.qkv_bias = true;  // Qwen2Attention: q/k/v_proj bias=True, o_proj bias=False
      c.o_bias = false;
      break;
    case HfFamily::Gemma:
    case HfFamily::Gemma2:
      read_llama_like(f, c);
      c.tie_embeddings = f.boolean("tie_word_embeddings", true);  // GemmaConfig's default
      c.norm = HfNorm::GemmaRms;
      c.gelu = true;
      c.scale_embeddings = true;
      if (family == HfFamily::Gemma2) {
        c.sandwich_norms = true;
        c.final_logit_softcap = f.number("final_logit_softcapping", 0.0);
      }
      break;
    case HfFamily::Phi3:
      read_llama_like(f, c);
      c.qkv = HfQkv::Concatenated;
      c.fused_gate_up = true;
      break;
    case HfFamily::GptNeox: {
      c.hidden = f.integer("hidden_size");
      c.layers = f.integer("num_hidden_layers");
      c.heads = c.kv_heads = f.integer("num_attention_heads");
      c.intermediate = f.integer("intermediate_size");
      c.vocab = f.integer("vocab_size");
      c.max_positions = f.integer("max_position_embeddings");
      c.tie_embeddings = f.boolean("tie_word_embeddings", false);
      c.qkv_bias = c.o_bias = c.mlp_bias = f.boolean("attention_bias", true);
      c.mlp_bias = true;
      c.norm = HfNorm::LayerNorm;
      c.qkv = HfQkv::Interleaved;
      c.gated_mlp = false;
      c.gelu = true;
      c.parallel_residual = f.boolean("use_parallel_residual", true);
      double pct = f.number("rotary_pct", 0.25);
      if (!(pct > 0.0 && pct <= 1.0)) throw InputError(f.path() + ": rotary_pct must be in (0, 1]");
      c.rotary_dim = static_cast<int64_t>(std::floor(static_cast<double>(c.hidden / c.heads) * pct));
      break;
    }
    case HfFamily::Falcon: {
      c.hidden = f.integer("hidden_size");
      c.layers = f.integer_of("num_hidden_layers", "n_layer");
      c.heads = f.integer_of("num_attention_heads", "n_head");
      if (f.boolean("new_decoder_architecture", false)) {
        throw InputError(f.path() + ": falcon's new_decoder_architecture (Falcon-40B/180B) is not supported; Falcon-7B's layout is");
      }
      if (f.boolean("alibi", false)) throw InputError(f.path() + ": falcon with alibi is not supported");
      c.kv_heads = f.boolean("multi_query", true) ? 1 : c.heads;
      c.intermediate = f.integer("ffn_hidden_size", 4 * c.hidden);
      c.vocab = f.integer("vocab_size");
      c.max_positions = f.integer("max_position_embeddings", 2048);  // FalconConfig's default
      c.tie_embeddings = true;  // FalconForCausalLM ties lm_head to word_embeddings
      c.qkv_bias = c.o_bias = c.mlp_bias = f.boolean("bias", false);
      c.norm = HfNorm::LayerNorm;
      c.qkv = HfQkv::Concatenated;
      c.gated_mlp = false;
      c.gelu = true;
      c.parallel_residual = f.boolean("parallel_attn", true);
      c.shared_layernorm = c.parallel_residual;
      break;
    }
    case HfFamily::Gpt2:
    case HfFamily::Bert:
    case HfFamily::T5:
      break;
  }
  if (c.head_dim == 0) {
    if (c.hidden % c.heads != 0) {
      throw InputError(f.path() + ": hidden_size " + std::to_string(c.hidden) + " is not a multiple of num_attention_heads " +
                       std::to_string(c.heads));
    }
    c.head_dim = c.hidden / c.heads;
  }
  if (c.rotary_dim == 0) c.rotary_dim = c.head_dim;
  if (c.heads % c.kv_heads != 0) {
    throw InputError(f.path() + ": num_attention_heads " + std::to_string(c.heads) +
                     " is not a multiple of num_key_value_heads " + std::to_string(c.kv_heads));
  }
  if (c.rotary_dim % 2 != 0) throw InputError(f.path() + ": the rotary size " + std::to_string(c.rotary_dim) + " is odd");
  if (c.experts_per_tok > c.experts) throw InputError(f.path() + ": num_experts_per_tok is larger than num_local_experts");
  return c;
}

struct FamilyName {
  const char* model_type;
  HfFamily family;
};
const FamilyName kFamilies[] = {
    {"llama", HfFamily::Llama},   {"mistral", HfFamily::Mistral}, {"mixtral", HfFamily::Mixtral},
    {"qwen2", HfFamily::Qwen2},   {"gemma", HfFamily::Gemma},     {"gemma2", HfFamily::Gemma2},
    {"phi3", HfFamily::Phi3},     {"gpt_neox", HfFamily::GptNeox}, {"falcon", HfFamily::Falcon},
    {"gpt2", HfFamily::Gpt2},     {"bert", HfFamily::Bert},       {"roberta", HfFamily::Bert},
    {"t5", HfFamily::T5},
};

std::string config_path(const std::string& arg) {
  std::error_code ec;
  if (std::filesystem::is_directory(arg, ec)) return (std::filesystem::path(arg) / "config.json").string();
  return arg;
}

}  // namespace

bool looks_like_hf_config(const std::string& arg) {
  if (ends_with_json(arg)) return true;
  std::error_code ec;
  return std::filesystem::is_directory(arg, ec) && std::filesystem::is_regular_file(std::filesystem::path(arg) / "config.json", ec);
}

HfModel read_hf_config(const std::string& arg) {
  const std::string path = config_path(arg);
  Result<std::string> text = read_input_file(path, "Hugging Face config", kMaxJsonFileBytes);
  if (!text.ok()) throw InputError(text.error());
  return parse_hf_config(text.value(), path);
}

HfModel parse_hf_config(std::string_view text, const std::string& path) {
  json j = parse_json_input(text, path);
  if (!j.is_object()) throw InputError(path + ": not a JSON object");
  Fields f(j, path);
  const std::string model_type = f.text("model_type");
  const FamilyName* fam = nullptr;
  for (const FamilyName& n : kFamilies) {
    if (model_type == n.model_type) fam = &n;
  }
  if (fam == nullptr) {
    std::string known;
    for (const FamilyName& n : kFamilies) known += std::string(known.empty() ? "" : ", ") + n.model_type;
    throw InputError(path + ": model_type '" + escape_control(model_type) + "' is not supported (" + known + ")");
  }
  HfModel m;
  m.path = path;
  m.family = fam->family;
  m.torch_dtype = torch_dtype(f);
  if (m.family == HfFamily::Gpt2) {
    // GPT2LMHeadModel: the zoo's gpt2 builder (transformers' modeling_gpt2, eager attention).
    m.zoo_spec = "gpt2:hidden=" + std::to_string(f.integer_of("n_embd", "hidden_size")) +
                 ",layers=" + std::to_string(f.integer_of("n_layer", "num_hidden_layers")) +
                 ",heads=" + std::to_string(f.integer_of("n_head", "num_attention_heads")) +
                 ",vocab=" + std::to_string(f.integer("vocab_size")) +
                 ",n_positions=" + std::to_string(f.integer("n_positions"));
    return m;
  }
  if (m.family == HfFamily::Bert) {
    // The zoo's bert (BertForSequenceClassification, 2 labels, eager attention).
    const std::string bert = "bert-base:hidden=" + std::to_string(f.integer("hidden_size")) +
                             ",layers=" + std::to_string(f.integer("num_hidden_layers")) +
                             ",heads=" + std::to_string(f.integer("num_attention_heads")) +
                             ",ffn=" + std::to_string(f.integer("intermediate_size")) +
                             ",vocab=" + std::to_string(f.integer("vocab_size")) +
                             ",max_pos=" + std::to_string(f.integer("max_position_embeddings")) +
                             ",type_vocab=" + std::to_string(f.integer("type_vocab_size", 2));
    m.zoo_spec = bert;
    return m;
  }
  if (m.family == HfFamily::T5) {
    // T5Config: num_decoder_layers defaults to num_layers, tie_word_embeddings to true;
    // feed_forward_proj "relu" (T5) or "gated-gelu" (T5 v1.1, flan-t5).
    T5Config& t = m.t5;
    t.d_model = f.integer("d_model");
    t.d_kv = f.integer("d_kv");
    t.d_ff = f.integer("d_ff");
    t.layers = f.integer("num_layers");
    t.decoder_layers = f.integer("num_decoder_layers", t.layers);
    t.heads = f.integer("num_heads");
    t.vocab = f.integer("vocab_size");
    t.buckets = f.integer("relative_attention_num_buckets", 32);
    t.tie_embeddings = f.boolean("tie_word_embeddings", true);
    t.dropout = f.number("dropout_rate", 0.1);
    const std::string proj = f.has("feed_forward_proj") ? f.text("feed_forward_proj") : "relu";
    if (proj == "gated-gelu") t.gated = true;
    else if (proj != "relu") throw InputError(path + ": feed_forward_proj '" + escape_control(proj) + "' is not relu or gated-gelu");
    return m;
  }
  m.decoder = read_decoder(m.family, model_type, f);
  if (m.torch_dtype) {
    m.decoder.dtype = *m.torch_dtype;
    m.decoder.dtype_given = true;
  }
  return m;
}

}  // namespace headroom
