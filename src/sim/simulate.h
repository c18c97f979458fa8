// The heap-simulation driver: replays a Program's events, keeps the exact live bytes per category,
// and finds the peak (the first event at which the live total is largest) overall, per training
// iteration and per phase. An optional HeapAlgorithm sees the same Alloc/Free stream and its
// footprint peak is reported beside the exact one.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "schedule/program.h"
#include "sim/heap_algorithm.h"

namespace headroom {

struct PeakPoint {
  int64_t bytes = 0;
  int32_t step = -1;   // index into Program::steps
  int32_t event = -1;  // index into Program::events (the allocation that reached the peak)
};

struct IterationPeaks {
  int32_t iteration = 0;
  PeakPoint peak;
  std::map<Phase, PeakPoint> by_phase;
};

struct SimResult {
  PeakPoint peak;                       // over the whole program
  CategoryBytes at_peak{};              // live bytes per category at the peak
  std::vector<IterationPeaks> iterations;  // training iterations 1..n (empty for inference)
  int64_t footprint_peak = 0;           // the HeapAlgorithm's largest footprint
  int64_t end_bytes = 0;                // live at the end of the program
};

// The largest sum of all buffer sizes of one program. Every live total the driver and the
// allocator models form (with their rounding, under 2^62) then fits in int64.
inline constexpr int64_t kMaxProgramBytes = int64_t{1} << 60;

// InputError when the buffers add up to more than kMaxProgramBytes (simulate() checks first).
void check_program_size(const Program& program);

SimResult simulate(const Program& program, HeapAlgorithm* algorithm = nullptr);

// simulate(program).peak.bytes alone (the layout search picks a pipeline's reported stage by it
// and reads no more; tests/simulate_test.cc checks the two agree).
int64_t live_peak_bytes(const Program& program);

// The buffers live just after event `event` (inclusive), in allocation order.
std::vector<BufferId> live_after(const Program& program, int32_t event);

}  // namespace headroom
