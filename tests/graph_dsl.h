// Test helpers: build a Program from a short script and check the oracles that every simulated
// program must satisfy (no double free, frees only of live buffers, peak >= live at every step).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schedule/program.h"

namespace headroom::testing {

// Script tokens: "+a:100" allocates buffer a of 100 bytes, "-a" frees it, "|" starts a new step.
Program program_from_script(const std::string& script);

// A script of 300 allocations and frees drawn from `seed` (the same script for the same seed): sizes
// around the caching allocator's boundaries (0, 300 B, 4 KiB, 700 KiB, 3/9/15/33 MiB, plus up to
// 4 KiB), a third of the draws freeing a live buffer.
std::string random_alloc_script(uint64_t seed);

// Runs validate_program and checks that the exact simulator's peak is at least the live bytes
// after every event; returns a description of the first violation, or "" when all hold.
std::string check_oracles(const Program& p);

}  // namespace headroom::testing
