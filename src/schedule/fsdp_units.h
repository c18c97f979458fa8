// FSDP's units under transformer_auto_wrap_policy (--fsdp-wrap block): one FlatParameter per
// repeated block of the model (schedule/transformer_blocks.h; GPT-2's transformer.h.N, Llama's
// model.layers.N) and the root unit holding every parameter outside the blocks (the embeddings,
// the final norm, the LM head). torch/distributed/fsdp/flat_param.py (1.13) flattens a unit's
// parameters into one FlatParameter of `elements` values, padded to a multiple of the world
// size (FlatParamHandle._get_shard / _get_sharded_size: ceil(elements / dp) per rank).
//
// Invariants: every parameter (tied ones through the tensor they are tied to) belongs to at most
// one unit: the first unit, in graph order, whose ops read it; unit i < blocks is block i and
// the root unit, when it holds parameters, is last; op_unit[op] is the unit whose module runs
// op (every op of a block's range, the root for other ops reading parameters), -1 otherwise.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace headroom {

struct FsdpUnit {
  std::string name;              // "transformer.h.0", "root"
  OpId first = kNone;            // a block's op range; the root's first and last parameter op
  OpId last = kNone;
  std::vector<TensorId> params;  // the parameters it flattens (storage roots), graph order
  int64_t elements = 0;          // FlatParameter._unpadded_unsharded_size
};

struct FsdpUnits {
  std::vector<FsdpUnit> units;
  std::vector<int> op_unit;  // per op
  int root = -1;             // index of the root unit, -1 when every parameter is in a block
};

// The units of g under block wrapping; no units when g has no repeated blocks.
FsdpUnits fsdp_block_units(const Graph& g);

// Elements of a unit's padded unsharded FlatParameter (_padded_unsharded_size): the multiple of
// `world` at or above `elements`.
int64_t fsdp_padded_elements(int64_t elements, int world);

}  // namespace headroom
