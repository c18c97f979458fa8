// A lower bound on what any replay of a program on the caching allocator model reserves, read
// from the program alone (no allocator): fit over many GPUs (estimate/fit_all.h) uses it to know
// that a size cannot fit a GPU without replaying the program on that GPU's allocator.
//
// Why it is a bound: every allocation takes a block of at least round_size(bytes) (a zero-byte
// request takes none), blocks tile the reserved segments, and the reserved peak is recorded after
// each allocation; so at every event the allocated bytes are at least the sum of round_size over
// the live buffers, and the reserved peak at least its largest value, whatever the capacity,
// max_split_size or expandable segments did to the blocks (a replay that runs out of memory goes
// on without a limit, and still allocates every block).
#pragma once

#include <cstdint>

#include "schedule/program.h"

namespace headroom {

// The largest sum, over the program's events, of round_size(bytes) of the buffers live then.
// REQUIRES: check_program_size(program) passed (the sum cannot overflow).
int64_t rounded_live_peak(const Program& program);

}  // namespace headroom
