// libFuzzer target for the text a user types into options and the small formats read beside a
// model: the first byte picks the parser, the rest is its text. Every parser either accepts the
// text or throws one InputError line (a Result's error for the watch-sample readers); nothing else
// may escape, and nothing may crash.
//
// Surfaces: positive integers (--batch, --gpus ...), --margin, fractions (--activation-budget),
// --lora, ONNX --loss expressions, zoo model specs (built when small), memory sizes
// (--gpu-memory), bandwidths (--interconnect), watch intervals, --checkpoint ranges (resolved on a
// two-layer GPT-2 and checked by validate_plan), and `watch` sample files (CSV and JSON lines).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "estimate/estimate.h"
#include "frontends/onnx_losses.h"
#include "frontends/zoo/registry.h"
#include "fuzz_util.h"
#include "measure/watch.h"
#include "measure/watch_samples.h"
#include "options/run_args.h"
#include "plan/collectives.h"
#include "schedule/memory_plan.h"
#include "sim/device_catalog.h"
#include "util/error.h"

namespace {

// A spec is built only when every numeric parameter is at most this, so one iteration stays short
// (resnet50 with no parameters builds in about a millisecond).
constexpr int64_t kMaxSpecValue = 64;

bool small_spec(const headroom::ModelSpec& spec) {
  for (const auto& [key, value] : spec.params) {
    char* end = nullptr;
    const long long v = std::strtoll(value.c_str(), &end, 10);
    if (end != value.c_str() && v > kMaxSpecValue) return false;
  }
  return true;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t at = text.find(sep, start);
    parts.push_back(text.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return parts;
    start = at + 1;
  }
}

const headroom::Graph& checkpoint_graph() {
  static const headroom::Graph g = [] {
    headroom::BuildConfig c;
    c.batch = 1;
    c.seq = 8;
    return headroom::build_model("gpt2:layers=2,hidden=64,heads=2,vocab=128", c);
  }();
  return g;
}

void parse(uint8_t which, const std::string& text) {
  switch (which % 12) {
    case 0: (void)headroom::parse_positive("--batch", text); break;
    case 1: (void)headroom::parse_margin(text); break;
    case 2: (void)headroom::parse_fraction("--activation-budget", text); break;
    case 3: (void)headroom::parse_lora(text); break;
    case 4: (void)headroom::parse_onnx_loss_spec(text); break;
    case 5: {
      headroom::ModelSpec spec = headroom::parse_model_spec(text);
      if (!small_spec(spec)) break;
      headroom::BuildConfig c;
      c.batch = 1;
      if (headroom::find_model(spec.name).takes_sequence) c.seq = 8;
      (void)headroom::build_model(text, c).parameter_count();
      break;
    }
    case 6: (void)headroom::parse_memory_size(text); break;
    case 7: (void)headroom::parse_bandwidth("--interconnect", text); break;
    case 8: (void)headroom::parse_interval_ms(text); break;
    case 9: {
      headroom::MemoryPlan plan;
      headroom::add_checkpoint_ranges(checkpoint_graph(), split(text, ';'), plan);
      headroom::validate_plan(checkpoint_graph(), plan);
      break;
    }
    case 10:
    case 11: {
      auto r = headroom::parse_watch_samples(text, which % 12 == 10 ? "samples.csv" : "samples.jsonl");
      if (!r.ok()) headroom::fuzz::require_one_line(r.error());
      break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    parse(data[0], text);
  } catch (const headroom::InputError& e) {
    headroom::fuzz::require_one_line(e.what());
  }
  return 0;
}
