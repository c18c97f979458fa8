// libFuzzer target for Hugging Face config.json (estimate CONFIG): any bytes parse into a model
// or fail with one line. A config that parses into small sizes is also built, as one inference
// forward of 4 tokens and as generate()'s two windows (prefill of 2 and the first decode, then the
// last decode of 3 new tokens), so the family
// builders' own checks (head sizes, rotary fractions, expert counts, windows) are reached.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "frontends/hf/hf_config.h"
#include "frontends/hf/hf_frontend.h"
#include "fuzz_util.h"
#include "util/error.h"

namespace {

// Sizes above these are parsed but not built, to keep one iteration short.
bool small(const headroom::HfModel& m) {
  const headroom::HfDecoderConfig& d = m.decoder;
  if (!m.zoo_spec.empty() || m.family == headroom::HfFamily::T5) return m.zoo_spec.size() < 200;
  return d.layers <= 4 && d.hidden <= 1024 && d.intermediate <= 4096 && d.vocab <= 65536 && d.heads <= 64 &&
         d.experts <= 16;
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
