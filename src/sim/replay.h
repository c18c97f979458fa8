// A program's Alloc/Free stream fed to the caching allocator model and nothing else: what
// simulate(program, &allocator) does for the allocator, without the exact live-byte bookkeeping
// (peaks per iteration and phase, bytes per category) that callers wanting only the allocator's
// stats throw away. device_memory() and fit over many GPUs replay one program per GPU setting
// this way.
//
// Invariant: the allocator sees the same calls in the same order as under simulate() (the steps
// tile the events in order, validate_program), so its stats are the same.
#pragma once

#include "schedule/program.h"
#include "sim/caching_allocator.h"

namespace headroom {

// InputError when the buffers add up to more than kMaxProgramBytes (as simulate()).
void replay_allocations(const Program& program, CachingAllocator& allocator);

}  // namespace headroom
