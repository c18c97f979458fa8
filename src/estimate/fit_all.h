// fit over many GPUs at once (`fit --gpu all`): the answer of fit() for each GPU, byte for byte,
// from one batch (or sequence) sweep shared by all of them.
//
// Why sharing is exact: the program of a size depends on the GPU only through the cuBLAS
// workspace (32 MiB per handle on Hopper and later, 8,519,680 bytes before:
// cublas_workspace_for) and the staging of its CUDA reductions, which the SM counts size
// (training/cuda_reduce.h). A program built for one GPU is another's, but for buffer sizes, when
// the other borrows staging for the same reductions it records (Program::cuda_reductions): its
// staging buffers (Buffer::reduction) and, for a GPU with another workspace, its workspace
// buffers are resized. So each distinct program is built once, and each version of it (its
// workspace and staging sizes) simulated once. The
// caching allocator depends on the GPU only through its capacity, and only when a new segment
// would pass it: a replay without a limit whose reserved peak is within a GPU's allocator budget
// never came near that limit, so the limited replay makes the same calls and ends in the same
// state. Such GPUs read the unlimited replay; the others (and expandable segments, whose address
// range is sized from the capacity) replay the program with their own limit. Replays are shared
// only between GPUs with the same allocator settings, once per (version of a program: its
// workspace and staging sizes; settings, limit).
//
// Work is done only where fit()'s search needs it: a size asked only "does it fit?" is built
// (estimate_program.h) and replayed, but its exact peak is simulated only when a report prints
// that size's point; and a GPU whose budget the unlimited replay passes needs no replay of its
// own when the largest segment the program can ask for is within its margin (fit_all.cc says why).
//
// Invariants: the GPUs are searched in order with fit()'s search (fit_search), so every field of
// each FitResult, `evaluations` included, is the one fit() gives; the first error (in GPU order)
// is fit()'s error for that GPU.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "estimate/fit.h"

namespace headroom {

// Called before each GPU's search: its index, the number of GPUs, its name.
using FitProgress = std::function<void(size_t index, size_t count, const std::string& gpu)>;

// What one fit_all call simulated (tests pin it against the loop over fit(), which builds,
// simulates and replays once for each of its `evaluations`).
struct FitAllWork {
  int programs = 0;     // programs built (graph and interpreter; generation: both windows, once)
  int resized = 0;      // programs reused with another cuBLAS workspace, not built again
  int shared = 0;       // programs reused with the same workspace on other SM counts
  int exact_peaks = 0;  // exact-heap simulations (the peak a report prints)
  int replays = 0;      // caching-allocator replays
};

// fit(options with estimate.gpu = g) for each g in gpus, in order. options.estimate.gpu is not
// read. `work`, when given, receives what was simulated.
Result<std::vector<FitResult>> fit_all(const FitOptions& options, const std::vector<GpuOptions>& gpus,
                                       const FitProgress& progress = {}, FitAllWork* work = nullptr);

}  // namespace headroom
