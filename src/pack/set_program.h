// The program of a resident set: what one serving process that holds several inference models runs
// on one caching allocator (one CUDA context, one cuBLAS handle). pack replays it with
// device_memory() (estimate/device_memory.h), the same caching-allocator model estimate uses, so
// a set's total is its own reserved peak, not a sum of per-model numbers.
//
// The program, built from each member's inference program (build_program, as estimate builds it):
//   setup   the first member's setup as it is (its weights and inputs, in its order), then every
//           other member's weights, in set order; a weight that another member's pooled layer
//           serves (pack/sharing.h: a pool keeps one copy, its first member's) is not allocated;
//   runs    each member in set order runs one request: its inputs (the first member's are in the
//           setup), its inference steps, then every buffer of that request still live (inputs,
//           outputs) is freed; weights and the cuBLAS handle's workspace stay;
//   cuBLAS  a workspace that a member's program never frees (the handle's, PyTorch's
//           getCurrentCUDABlasHandle workspace, one per handle and stream) is allocated once, by the
//           first member that uses cuBLAS; later members reuse it.
// Invariants: a set of one member is that member's program with its leftover request buffers freed
// at the end (so its reserved peak is estimate's); the program passes validate_program.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "pack/layers.h"
#include "pack/sharing.h"
#include "schedule/program.h"

namespace headroom {

struct SetMember {
  const Program* program = nullptr;  // inference program (no transfers, no host state)
  std::string label;                 // prefixes the step labels
  std::set<std::string> borrowed;    // weight names another member's pooled copy serves
};

Program resident_set_program(const std::vector<SetMember>& members);

// borrowed[i] for each model of `subset` (its position in subset): the weight names of its layers
// that are in a pool (shared_pools over the same subset) and are not the pool's first member.
std::vector<std::set<std::string>> borrowed_weights(const std::vector<ModelLayers>& layers,
                                                    const std::vector<SharedPool>& pools,
                                                    const std::vector<int32_t>& subset);

}  // namespace headroom
