// libFuzzer target for Hugging Face config.json (estimate CONFIG): any bytes parse into a model
// or fail with one line. A config that parses into small sizes is also built, as one inference
// forward of 4 tokens and as generate()'s two windows (prefill of 2 and the first decode, then the
// last decode of 3 new tokens), so the family
// builders' own checks (head sizes, rotary fractions, expert counts, windows) are reached.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "frontends/hf/hf_config.h"
#include "frontends/hf/hf_frontend.h"
#include "fuzz_util.h"
#include "util/error.h"

namespace {

// Sizes above these are parsed but not built, to keep one iteration short (an ASan build of a
// 24-layer T5 took over 10 s on a loaded machine: a slow harness, not a hang).
constexpr int64_t kMaxLayers = 4, kMaxWidth = 1024, kMaxFfn = 4096, kMaxVocab = 65536, kMaxHeads = 64;

// gpt2 and bert come as zoo specs: "gpt2:hidden=768,layers=12,...".
bool small_spec(const std::string& spec) {
  size_t at = spec.find(':');
  while (at != std::string::npos) {
    size_t eq = spec.find('=', at), end = spec.find(',', at + 1);
    if (eq == std::string::npos) break;
    const std::string key = spec.substr(at + 1, eq - at - 1);
    const int64_t value = std::strtoll(spec.c_str() + eq + 1, nullptr, 10);
    const int64_t limit = key == "layers" ? kMaxLayers : key == "vocab" ? kMaxVocab : key == "heads" ? kMaxHeads : kMaxWidth;
    if (key != "n_positions" && key != "max_positions" && value > limit) return false;
    at = end;
  }
  return true;
}

bool small(const headroom::HfModel& m) {
  if (!m.zoo_spec.empty()) return small_spec(m.zoo_spec);
  if (m.family == headroom::HfFamily::T5) {
    const headroom::T5Config& t = m.t5;
    return t.layers <= kMaxLayers && t.decoder_layers <= kMaxLayers && t.d_model <= kMaxWidth && t.d_ff <= kMaxFfn &&
           t.vocab <= kMaxVocab && t.heads <= kMaxHeads && t.d_kv <= kMaxWidth;
  }
  const headroom::HfDecoderConfig& d = m.decoder;
  return d.layers <= kMaxLayers && d.hidden <= kMaxWidth && d.intermediate <= kMaxFfn && d.vocab <= kMaxVocab &&
         d.heads <= kMaxHeads && d.experts <= 16;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    headroom::HfModel m = headroom::parse_hf_config(text, "config.json");
    if (!small(m)) return 0;
    headroom::HfLoader loader = headroom::hf_graph_loader(std::move(m));
    headroom::BuildConfig forward;
    forward.batch = 1;
    forward.seq = 4;
    forward.inference = true;
    (void)loader.load(forward).parameter_count();
    headroom::BuildConfig generate = forward;
    generate.seq.reset();
    generate.generation = headroom::GenerationWindow{2, 3, 0, 1};
    (void)loader.load(generate);
    generate.generation = headroom::GenerationWindow{2, 3, 2, 2};
    (void)loader.load(generate);
  } catch (const headroom::InputError& e) {
    headroom::fuzz::require_one_line(e.what());
  }
  return 0;
}
