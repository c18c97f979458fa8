#include "plan/chain_simulate.h"

namespace headroom {
namespace {

std::string act(const char* name, int i) { return std::string(name) + "_" + std::to_string(i); }

}  // namespace

ChainState ChainState::initial(const Chain& chain) {
  const auto n = static_cast<size_t>(chain.length()) + 1;
  ChainState s;
  s.plain.assign(n, 0);
  s.bar.assign(n, 0);
  s.plain[0] = 1;
  s.live = chain.x(0);
  s.next_backward = chain.length();
  return s;
}

std::string apply_chain_op(const Chain& chain, ChainOp op, ChainState& s, int64_t* in_use,
                           double* time_ms) {
  const int L = chain.length();
  const auto at = [](int i) { return static_cast<size_t>(i); };
  switch (op.kind) {
    case ChainOpKind::Fck:
    case ChainOpKind::Fn:
    case ChainOpKind::Fall: {
      const int i = op.stage;
      if (i < 0 || i >= L)
        return "stage " + std::to_string(i) + " is out of range (the chain has " +
               std::to_string(L) + " stages)";
      if (!s.has_activation(i)) return "its input a_" + std::to_string(i) + " is not live";
      if (s.has_activation(i + 1))
        return "its output a_" + std::to_string(i + 1) + " is already live";
      const bool with_history = op.kind == ChainOpKind::Fall;
      const int64_t out = with_history ? chain.xbar(i + 1) : chain.x(i + 1);
      *in_use = s.live + out + chain.fwd_tmp_bytes[at(i)];
      *time_ms = chain.fwd_ms[at(i)];
      if (op.kind == ChainOpKind::Fn) {
        if (s.plain[at(i)]) {
          s.plain[at(i)] = 0;
          s.live -= chain.x(i);
        } else {
          s.bar[at(i)] = 0;
          s.live -= chain.xbar(i);
        }
      }
      (with_history ? s.bar : s.plain)[at(i + 1)] = 1;
      s.live += out;
      return "";
    }
    case ChainOpKind::Loss: {
      if (s.next_backward != L) return "the loss runs once, before every backward";
      if (!s.has_activation(L)) return "its input a_" + std::to_string(L) + " is not live";
      *in_use = s.live + chain.x(L) + chain.loss_tmp_bytes;
      *time_ms = chain.loss_ms;
      if (s.plain[at(L)]) {
        s.plain[at(L)] = 0;
        s.live -= chain.x(L);
      }
      s.delta = L;
      s.live += chain.x(L);
      s.next_backward = L - 1;
      return "";
    }
    case ChainOpKind::B: {
      const int i = op.stage;
      if (i < 0 || i >= L)
        return "stage " + std::to_string(i) + " is out of range (the chain has " +
               std::to_string(L) + " stages)";
      if (s.next_backward != i) {
        if (s.next_backward == L) return "the loss has not run yet";
        if (s.next_backward < 0) return "every backward has already run";
        return "backwards run in order and B" + std::to_string(s.next_backward) + " comes next";
      }
      if (!s.bar[at(i + 1)])
        return act("x̄", i + 1) + " (the state saved by stage " + std::to_string(i) +
               ") is not live";
      if (!s.has_activation(i)) return "its input a_" + std::to_string(i) + " is not live";
      *in_use = s.live + chain.x(i) + chain.bwd_tmp_bytes[at(i)];
      *time_ms = chain.bwd_ms[at(i)];
      s.live -= chain.x(i + 1) + chain.xbar(i + 1);  // δ_{i+1}, x̄_{i+1}
      s.bar[at(i + 1)] = 0;
      if (s.plain[at(i)]) {
        s.plain[at(i)] = 0;
        s.live -= chain.x(i);
      }
      s.delta = i;
      s.live += chain.x(i);
      s.next_backward = i - 1;
      return "";
    }
  }
  return "unknown operation";
}

std::string check_finished(const Chain& chain, const ChainState& s) {
  if (s.next_backward == chain.length()) return "the schedule ends before the loss";
  if (s.next_backward >= 0) return "the schedule ends before B" + std::to_string(s.next_backward);
  for (int i = 0; i <= chain.length(); ++i) {
    if (s.plain[static_cast<size_t>(i)])
      return "the schedule ends with " + act("x", i) + " still live";
    if (s.bar[static_cast<size_t>(i)])
      return "the schedule ends with " + act("x̄", i) + " still live";
  }
  return "";
}

Result<ChainSimResult> simulate_chain(const Chain& chain, const std::vector<ChainOp>& schedule) {
  ChainState s = ChainState::initial(chain);
  ChainSimResult r;
  for (size_t k = 0; k < schedule.size(); ++k) {
    int64_t in_use = 0;
    double t = 0;
    std::string why = apply_chain_op(chain, schedule[k], s, &in_use, &t);
    if (!why.empty()) {
      return Result<ChainSimResult>::failure("schedule op " + std::to_string(k) + " (" +
                                             op_token(schedule[k]) + "): " + why);
    }
    if (k == 0 || in_use > r.peak) {
      r.peak = in_use;
      r.peak_op = static_cast<int>(k);
    }
    r.makespan_ms += t;
    if (schedule[k].kind != ChainOpKind::Loss && schedule[k].kind != ChainOpKind::B) ++r.forwards;
  }
  std::string why = check_finished(chain, s);
  if (!why.empty()) return Result<ChainSimResult>::failure("schedule: " + why);
  return r;
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

std::vector<ChainOp> store_all_schedule(int stages) {
  std::vector<ChainOp> ops;
  for (int i = 0; i < stages; ++i) ops.push_back({ChainOpKind::Fall, i});
  ops.push_back({ChainOpKind::Loss, 0});
  for (int i = stages - 1; i >= 0; --i) ops.push_back({ChainOpKind::B, i});
  return ops;
}

int64_t store_all_peak(const Chain& chain) {
  Result<ChainSimResult> r = simulate_chain(chain, store_all_schedule(chain.length()));
  HEADROOM_CHECK(r.ok(), "the store-everything schedule is valid on every chain");
  return r.value().peak;
}

}  // namespace headroom
