#include "plan/chain_simulate.h"

namespace headroom {

RematOp lower_chain_op(ChainOp op) {
  switch (op.kind) {
    case ChainOpKind::Fck: return {RematOpKind::Fck, op.stage};
    case ChainOpKind::Fn: return {RematOpKind::Fn, op.stage};
    case ChainOpKind::Fall: return {RematOpKind::Fall, op.stage};
    case ChainOpKind::Loss: return {RematOpKind::Loss, 0};
    case ChainOpKind::B: return {RematOpKind::B, op.stage};
  }
  HEADROOM_CHECK(false, "unknown chain op kind");
}

std::vector<RematOp> lower_chain_schedule(const std::vector<ChainOp>& schedule) {
  std::vector<RematOp> ops;
  ops.reserve(schedule.size());
  for (ChainOp op : schedule) ops.push_back(lower_chain_op(op));
  return ops;
}

Result<ChainSimResult> simulate_chain(const Chain& chain, const std::vector<ChainOp>& schedule) {
  return simulate_remat(graph_of_chain(chain), lower_chain_schedule(schedule));
}

Result<ChainSimResult> simulate_chain(const Chain& chain,
                                      const std::vector<std::string>& schedule) {
  std::vector<ChainOp> ops;
  ops.reserve(schedule.size());
  for (const std::string& token : schedule) {
    try {
      ops.push_back(parse_op_token(token));
    } catch (const InputError& e) {
      return Result<ChainSimResult>::failure(e.what());
    }
  }
  return simulate_chain(chain, ops);
}

int64_t store_all_peak(const Chain& chain) { return remat_store_all_peak(graph_of_chain(chain)); }

}  // namespace headroom
