#include "plan/remat_simulate.h"
#include "util/index.h"

namespace headroom {
namespace {

std::string range_error(const char* what, int i, int n, const char* unit) {
  return std::string(what) + " " + std::to_string(i) + " is out of range (the graph has " +
         std::to_string(n) + " " + unit + ")";
}

}  // namespace

RematState RematState::initial(const RematGraph& g) {
  const size_t n = at(g.length()) + 1;
  RematState s;
  s.plain.assign(n, 0);
  s.bar.assign(n, 0);
  s.delta.assign(n, 0);
  s.plain[0] = 1;
  s.live = g.sizes.x(0);
  s.next_backward = g.length();
  return s;
}

std::string apply_remat_op(const RematGraph& g, const std::vector<std::vector<int>>& consumers,
                           RematOp op, RematState& s, int64_t* in_use, double* time_ms) {
  const int L = g.length();
  const Chain& c = g.sizes;
  auto size_of_live = [&](int k) { return s.plain[at(k)] ? c.x(k) : c.xbar(k); };
  switch (op.kind) {
    case RematOpKind::Fck:
    case RematOpKind::Fn:
    case RematOpKind::Fall: {
      const int i = op.index;
      if (i < 0 || i >= L) return range_error("stage", i, L, "stages");
      for (int k : g.preds[at(i)])
        if (!s.has(k)) return "its input a_" + std::to_string(k) + " is not live";
      if (s.has(i + 1)) return "its output a_" + std::to_string(i + 1) + " is already live";
      const bool hist = op.kind == RematOpKind::Fall;
      const int64_t out = hist ? c.xbar(i + 1) : c.x(i + 1);
      *in_use = s.live + out + c.fwd_tmp_bytes[at(i)];
      *time_ms = c.fwd_ms[at(i)];
      if (op.kind == RematOpKind::Fn) {
        for (int k : g.preds[at(i)]) {
          s.live -= size_of_live(k);
          s.plain[at(k)] = 0;
          s.bar[at(k)] = 0;
        }
      }
      (hist ? s.bar : s.plain)[at(i + 1)] = 1;
      s.live += out;
      return "";
    }
    case RematOpKind::Free: {
      const int k = op.index;
      if (k < 0 || k > L) return range_error("activation", k, L + 1, "activations");
      if (!s.has(k)) return "a_" + std::to_string(k) + " is not live";
      s.live -= size_of_live(k);
      s.plain[at(k)] = 0;
      s.bar[at(k)] = 0;
      *in_use = 0;
      *time_ms = 0;
      return "";
    }
    case RematOpKind::Loss: {
      if (s.next_backward != L) return "the loss runs once, before every backward";
      if (!s.has(L)) return "its input a_" + std::to_string(L) + " is not live";
      *in_use = s.live + c.x(L) + c.loss_tmp_bytes;
      *time_ms = c.loss_ms;
      if (s.plain[at(L)]) {
        s.plain[at(L)] = 0;
        s.live -= c.x(L);
      }
      s.delta[at(L)] = 1;
      s.live += c.x(L);
      s.next_backward = L - 1;
      return "";
    }
    case RematOpKind::B: {
      const int i = op.index;
      if (i < 0 || i >= L) return range_error("stage", i, L, "stages");
      if (s.next_backward != i) {
        if (s.next_backward == L) return "the loss has not run yet";
        if (s.next_backward < 0) return "every backward has already run";
        return "backwards run in order and B" + std::to_string(s.next_backward) + " comes next";
      }
      if (!s.delta[at(i + 1)]) return "δ_" + std::to_string(i + 1) + " is not live";
      if (!s.bar[at(i + 1)])
        return "x̄_" + std::to_string(i + 1) + " (the state saved by stage " + std::to_string(i) +
               ") is not live";
      for (int k : g.preds[at(i)])
        if (!s.has(k)) return "its input a_" + std::to_string(k) + " is not live";
      int64_t fresh = 0;
      for (int k : g.preds[at(i)])
        if (!s.delta[at(k)]) fresh += c.x(k);
      *in_use = s.live + fresh + c.bwd_tmp_bytes[at(i)];
      *time_ms = c.bwd_ms[at(i)];
      s.live -= c.x(i + 1) + c.xbar(i + 1);  // δ_{i+1}, x̄_{i+1}
      s.delta[at(i + 1)] = 0;
      s.bar[at(i + 1)] = 0;
      for (int k : g.preds[at(i)]) {
        // Stages read a_k in increasing order of index and backwards run in decreasing order, so
        // the smallest consumer is the last backward to need a_k.
        if (s.plain[at(k)] && consumers[at(k)].front() == i) {
          s.plain[at(k)] = 0;
          s.live -= c.x(k);
        }
        if (!s.delta[at(k)]) {
          s.delta[at(k)] = 1;
          s.live += c.x(k);
        }
      }
      s.next_backward = i - 1;
      return "";
    }
  }
  return "unknown operation";
}

std::string check_remat_finished(const RematGraph& g, const RematState& s) {
  if (s.next_backward == g.length()) return "the schedule ends before the loss";
  if (s.next_backward >= 0) return "the schedule ends before B" + std::to_string(s.next_backward);
  for (int k = 0; k <= g.length(); ++k) {
    if (s.plain[at(k)]) return "the schedule ends with x_" + std::to_string(k) + " still live";
    if (s.bar[at(k)]) return "the schedule ends with x̄_" + std::to_string(k) + " still live";
  }
  return "";
}

Result<RematSimResult> simulate_remat(const RematGraph& g, const std::vector<RematOp>& schedule) {
  const std::vector<std::vector<int>> consumers = remat_consumers(g);
  RematState s = RematState::initial(g);
  RematSimResult r;
  bool any = false;
  for (size_t k = 0; k < schedule.size(); ++k) {
    int64_t in_use = 0;
    double t = 0;
    std::string why = apply_remat_op(g, consumers, schedule[k], s, &in_use, &t);
    if (!why.empty()) {
      return Result<RematSimResult>::failure("schedule op " + std::to_string(k) + " (" +
                                             remat_op_token(schedule[k]) + "): " + why);
    }
    const RematOpKind kind = schedule[k].kind;
    if (kind == RematOpKind::Free) continue;
    if (!any || in_use > r.peak) {
      r.peak = in_use;
      r.peak_op = static_cast<int>(k);
      any = true;
    }
    r.makespan_ms += t;
    if (kind != RematOpKind::Loss && kind != RematOpKind::B) ++r.forwards;
  }
  std::string why = check_remat_finished(g, s);
  if (!why.empty()) return Result<RematSimResult>::failure("schedule: " + why);
  return r;
}

Result<RematSimResult> simulate_remat(const RematGraph& g, const std::vector<std::string>& schedule) {
  std::vector<RematOp> ops;
  for (const std::string& token : schedule) {
    try {
      ops.push_back(parse_remat_op_token(token));
    } catch (const InputError& e) {
      return Result<RematSimResult>::failure(e.what());
    }
  }
  return simulate_remat(g, ops);
}

std::vector<RematOp> remat_store_all_schedule(int stages) {
  std::vector<RematOp> ops;
  for (int i = 0; i < stages; ++i) ops.push_back({RematOpKind::Fall, i});
  ops.push_back({RematOpKind::Loss, 0});
  for (int i = stages - 1; i >= 0; --i) ops.push_back({RematOpKind::B, i});
  return ops;
}

int64_t remat_store_all_peak(const RematGraph& g) {
  Result<RematSimResult> r = simulate_remat(g, remat_store_all_schedule(g.length()));
  HEADROOM_CHECK(r.ok(), "the store-everything schedule is valid on every graph");
  return r.value().peak;
}

}  // namespace headroom
