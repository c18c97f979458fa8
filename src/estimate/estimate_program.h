// The program estimate() would simulate, built without simulating it: for callers that replay a
// program on an allocator and need its exact peak only sometimes (fit over many GPUs,
// estimate/fit_all.h), so each size is built once and simulated only when its peak is reported.
//
// Invariant: for the same options, estimate_program(o) is the program estimate(o) simulates, and
// its errors are estimate()'s up to that point (the option checks, the frontend's, the
// scheduler's, --gpu without CUDA, and simulate()'s size check); simulate(program).peak.bytes is
// then estimate(o)'s peak_bytes.
#pragma once

#include "estimate/estimate.h"

namespace headroom {

// REQUIRES: !options.generation and options.parallel.pipeline_parallel <= 1 (those runs choose
// their program by simulating: call estimate()).
Result<Program> estimate_program(const EstimateOptions& options);

}  // namespace headroom
