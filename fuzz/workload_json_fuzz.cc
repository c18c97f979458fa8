// libFuzzer target for workload JSON (pack --workload FILE): any bytes parse into a Workload or
// fail with one line. A workload that parses has its arrivals generated the way pack does
// (Poisson or periodic, from its window, seed and phase) and one swap simulation run on a
// synthetic model per entry with the workload's load model, so every time field reaches the
// nanosecond arithmetic (a phase_ms of 1e308 once looped forever there).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_util.h"
#include "pack/swap_sim.h"
#include "pack/workload.h"
#include "util/error.h"

namespace {

// Fewer requests than pack allows (5M), to keep one iteration short.
constexpr double kMaxFuzzRequests = 20000;

void simulate(const headroom::Workload& w) {
  using namespace headroom;
  SwapConfig c;
  c.window_ns = static_cast<int64_t>(w.window_s * 1e9);
  c.capacity_bytes = w.weights_capacity.value_or(int64_t{1} << 30);
  c.load.bandwidth_bytes_per_s = w.load.bandwidth_bytes_per_s.value_or(12e9);
  if (w.load.fixed_s) c.load.fixed_s = *w.load.fixed_s;
  if (w.load.per_tensor_s) c.load.per_tensor_s = *w.load.per_tensor_s;
  if (w.load.pinned) c.load.pinned = *w.load.pinned;
  if (w.load.pageable_factor) c.load.pageable_factor = *w.load.pageable_factor;
  for (size_t i = 0; i < w.models.size(); ++i) {
    const WorkloadModel& m = w.models[i];
    double expected = m.rate ? *m.rate * w.window_s : m.fps ? *m.fps * w.window_s : 0;
    if (expected > kMaxFuzzRequests) return;
    SwapModel sm;
    sm.name = m.model;
    if (m.rate) sm.arrivals_ns = poisson_arrivals(*m.rate, c.window_ns, w.seed, i);
    if (m.fps) sm.arrivals_ns = periodic_arrivals(*m.fps, c.window_ns, m.phase_s);
    if (m.arrivals_s) {
      if (m.arrivals_s->size() > kMaxFuzzRequests) return;
      for (double t : *m.arrivals_s) {
        int64_t ns = static_cast<int64_t>(t * 1e9);
        if (ns < c.window_ns) sm.arrivals_ns.push_back(ns);
      }
    }
    sm.exec_ns = static_cast<int64_t>(m.exec_s.value_or(0.001) * 1e9);
    sm.deadline_ns = static_cast<int64_t>(m.latency_target_s * 1e9);
    sm.blocks.push_back(static_cast<int32_t>(c.blocks.size()));
    c.blocks.push_back({m.model, std::min<int64_t>(c.capacity_bytes, int64_t{100} << 20), 10});
    c.models.push_back(std::move(sm));
  }
  (void)simulate_swaps(c);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  headroom::Result<headroom::Workload> w = headroom::parse_workload(text, "fuzz.json");
  if (!w.ok()) {
    headroom::fuzz::require_one_line(w.error());
    return 0;
  }
  try {
    simulate(w.value());
  } catch (const headroom::InputError& e) {
    headroom::fuzz::require_one_line(e.what());
  }
  return 0;
}
