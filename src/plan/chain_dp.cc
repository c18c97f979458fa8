// Stages of this file: the slot arrays (Rotor's fw, bw, cw, cbw, ftmp, btmp, extended with the
// zeros of index L+1), the table fill (segments by decreasing start s, then increasing end t;
// memory in the inner loop), the reconstruction, and solve_chain's verification by simulation.
#include "plan/chain_dp.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <variant>

#include "plan/chain_simulate.h"
#include "report/format.h"
#include "util/checked.h"

namespace headroom {
namespace {

using Time = float;
constexpr Time kInf = std::numeric_limits<Time>::infinity();

// The chain as the DP reads it, indices as in Rotor's arrays (docs/chain-solver.md):
//   cw[i]   = x_i, i = 0..L+1 (x_{L+1} = 0: there is no δ_{L+1})
//   cbw[i]  = x̄_i, i = 1..L+1 (x̄_{L+1} = 0)
//   ftmp[i] = forward transient, i = 0..L (ftmp_L = 0); btmp[L] = ltmp
//   fb[i]   = f_i + b_i (f_L = 0, b_L = ℓ)
// Sizes are clamped to memory + 1: a single term that large already fails every test, and the
// sums stay far from int32 overflow.
struct SlotArrays {
  int L = 0;
  std::vector<int32_t> cw, cbw, ftmp, btmp;
  std::vector<double> fw_prefix;  // Σ_{k<i} f_k, i = 0..L
  std::vector<Time> fb;

  SlotArrays(const Chain& c, int memory) : L(c.length()) {
    const int64_t clamp = int64_t{memory} + 1;
    auto slot = [&](int64_t v) { return static_cast<int32_t>(std::min(v, clamp)); };
    const auto n = static_cast<size_t>(L);
    cw.resize(n + 2, 0);
    cbw.resize(n + 2, 0);
    ftmp.resize(n + 1, 0);
    btmp.resize(n + 1, 0);
    fw_prefix.resize(n + 1, 0);
    fb.resize(n + 1, 0);
    for (size_t i = 0; i <= n; ++i) cw[i] = slot(c.x_bytes[i]);
    for (size_t i = 0; i < n; ++i) {
      cbw[i + 1] = slot(c.xbar_bytes[i]);
      ftmp[i] = slot(c.fwd_tmp_bytes[i]);
      btmp[i] = slot(c.bwd_tmp_bytes[i]);
      fw_prefix[i + 1] = fw_prefix[i] + c.fwd_ms[i];
      fb[i] = static_cast<Time>(c.fwd_ms[i] + c.bwd_ms[i]);
    }
    btmp[n] = slot(c.loss_tmp_bytes);
    fb[n] = static_cast<Time>(c.loss_ms);
  }
  // F(s, j) = f_s + ... + f_{j-1}: the forwards from a_s to a_j.
  Time forwards(int s, int j) const {
    return static_cast<Time>(fw_prefix[static_cast<size_t>(j)] - fw_prefix[static_cast<size_t>(s)]);
  }
  int32_t x(int i) const { return cw[static_cast<size_t>(i)]; }
  int32_t xbar(int i) const { return cbw[static_cast<size_t>(i)]; }
  // Memory of Fall_s with δ_{t+1} live, and of B_s: the tests of the chain option (and, for
  // s == t, of the single stage).
  int32_t chain_need(int s, int t) const {
    const auto i = static_cast<size_t>(s);
    return std::max(x(t + 1) + cbw[i + 1] + ftmp[i], cbw[i + 1] + cw[i + 1] + cw[i] + btmp[i]);
  }
  // Memory of Fck_s (k == s) or Fn_k (k > s) in the first sweep of segment [s, t].
  int32_t sweep_need(int s, int k, int t) const {
    const auto i = static_cast<size_t>(k);
    return k == s ? x(t + 1) + cw[i + 1] + ftmp[i] : x(t + 1) + cw[i] + cw[i + 1] + ftmp[i];
  }
};

// C(s, t, m) for 0 <= s <= t <= L and 0 <= m <= memory, rows of memory + 1 floats, segments in a
// triangle. Per segment: lo = the smallest m with a finite value, cap = min(memory + 1,
// the memory of storing everything in the segment), lb = the value from cap on (no recompute).
class Table {
 public:
  Table(int L, int memory)
      : n_(L + 1), width_(memory + 1),
        rows_(static_cast<size_t>(n_) * static_cast<size_t>(n_ + 1) / 2),
        values_(rows_ * static_cast<size_t>(width_)), lo_(rows_), cap_(rows_), lb_(rows_) {}

  size_t row(int s, int t) const {
    const auto ss = static_cast<size_t>(s);
    return ss * static_cast<size_t>(n_) - ss * (ss - 1) / 2 + static_cast<size_t>(t - s);
  }
  Time* values(int s, int t) { return &values_[row(s, t) * static_cast<size_t>(width_)]; }
  const Time* values(int s, int t) const { return &values_[row(s, t) * static_cast<size_t>(width_)]; }
  Time at(int s, int t, int m) const { return m < 0 ? kInf : values(s, t)[m]; }
  int32_t& lo(int s, int t) { return lo_[row(s, t)]; }
  int32_t& cap(int s, int t) { return cap_[row(s, t)]; }
  Time& lb(int s, int t) { return lb_[row(s, t)]; }
  int width() const { return width_; }

 private:
  int n_;
  int width_;
  size_t rows_;
  std::vector<Time> values_;
  std::vector<int32_t> lo_, cap_;
  std::vector<Time> lb_;
};

// out[k] = min(out[k], (f + a[k]) + b[k]) for k < count. The same expression, in the same order,
// is evaluated by the reconstruction.
inline Time leaf_value(Time f, Time a, Time b) { return (f + a) + b; }

void relax(Time* __restrict out, const Time* __restrict a, const Time* __restrict b, Time f, int count) {
#if defined(__GNUC__)
#pragma GCC ivdep
#endif
  for (int k = 0; k < count; ++k) {
    const Time v = leaf_value(f, a[k], b[k]);
    out[k] = v < out[k] ? v : out[k];
  }
}

}
long long g_elems=0, g_calls=0, g_triples=0, g_improve=0, g_window=0;
namespace {
// The smallest k in [lo, hi) with row[k] <= v, or hi; row is nonincreasing on [lo, hi).
inline int first_at_most(const Time* row, int lo, int hi, Time v) {
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (row[mid] <= v) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

void fill_table(const SlotArrays& c, Table& tab) {
  const int L = c.L;
  const int width = tab.width();
  for (int t = 0; t <= L; ++t) {
    for (int s = t; s >= 0; --s) {
      Time* out = tab.values(s, t);
      if (s == t) {
        // One stage: Fall_s then B_s with δ_{s+1} live (or the loss alone, s == L).
        const int32_t need = c.chain_need(s, s);
        const Time v = c.fb[static_cast<size_t>(s)];
        const int lo = std::min<int32_t>(need, width);
        std::fill(out, out + lo, kInf);
        std::fill(out + lo, out + width, v);
        tab.lo(s, t) = lo;
        tab.cap(s, t) = lo;
        tab.lb(s, t) = v;
        continue;
      }
      // Chain option: Fall_s, then [s+1, t] beside x̄_{s+1}, then B_s.
      const int32_t xb = c.xbar(s + 1);
      const int32_t need = c.chain_need(s, t);
      const int cap = static_cast<int>(std::min<int64_t>(width, std::max<int64_t>(need, int64_t{xb} + tab.cap(s + 1, t))));
      const Time lb = c.fb[static_cast<size_t>(s)] + tab.lb(s + 1, t);
      tab.cap(s, t) = cap;
      tab.lb(s, t) = lb;
      std::fill(out + cap, out + width, lb);
      const int chain_lo = std::min(cap, static_cast<int>(std::max<int64_t>(need, int64_t{xb} + tab.lo(s + 1, t))));
      std::fill(out, out + chain_lo, kInf);
      {
        const Time* sub = tab.values(s + 1, t) - xb;
        const Time fb = c.fb[static_cast<size_t>(s)];
        for (int m = chain_lo; m < cap; ++m) out[m] = fb + sub[m];
      }
      // Leaf options: Fck_s, Fn_{s+1} ... Fn_{j-1}, then [j, t] beside x_j, then [s, j-1]
      // with δ_j. A leaf costs at least F(s, j) + lb; where the row is already that low, skip.
      int hi = cap;  // out[m] <= threshold for every m in [hi, cap)
      int32_t sweep = c.sweep_need(s, s, t);
      for (int j = s + 1; j <= t; ++j) {
        if (j > s + 1) sweep = std::max(sweep, c.sweep_need(s, j - 1, t));
        if (j + 6 <= t && hi > 0) {
          __builtin_prefetch(tab.values(j + 6, t) + std::max(0, hi - 1 - c.x(j + 6)));
          __builtin_prefetch(tab.values(s, j + 5) + hi - 1);
        }
        const Time f = c.forwards(s, j);
        const Time threshold = f + lb;
        while (hi > 0 && out[hi - 1] <= threshold) --hi;
        const int32_t xj = c.x(j);
        const int64_t lo = std::max<int64_t>({sweep, int64_t{xj} + tab.lo(j, t), tab.lo(s, j - 1)});
        ++g_triples;
        if (lo >= hi) continue;
        const Time* a = tab.values(j, t) - xj;
        const Time* b = tab.values(s, j - 1);
        // Candidates are nonincreasing in m: below top, a candidate is at least its value at
        // top - 1, so rows already that low cannot improve.
        int top = hi;
        for (int round = 0; round < 8 && top > lo; ++round) {
          const Time floor_value = leaf_value(f, a[top - 1], b[top - 1]);
          const int next = first_at_most(out, static_cast<int>(lo), top, floor_value);
          if (next == top) break;
          top = next;
        }
        if (lo >= top) continue;
        ++g_calls; g_elems += top - lo;
        for (int m = lo; m < top; ++m) if (leaf_value(f, a[m], b[m]) < out[m]) ++g_improve;
        relax(out + lo, a + lo, b + lo, f, top - static_cast<int>(lo));
      }
      int lo = 0;
      while (lo < cap && out[lo] == kInf) ++lo;
      tab.lo(s, t) = lo;
      g_window += cap - lo;
    }
  }
}

// The choice at (s, t, m), by Rotor's rule: the best leaf (smallest j among equals) when it is
// no worse than the chain option.
struct Choice {
  Time value = kInf;
  int leaf = 0;  // 0: chain option; j > s: leaf at j
};

Choice choose(const SlotArrays& c, const Table& tab, int s, int t, int m) {
  Choice chain;
  if (m >= c.chain_need(s, t)) chain.value = c.fb[static_cast<size_t>(s)] + tab.at(s + 1, t, m - c.xbar(s + 1));
  Choice leaf;
  int32_t sweep = c.sweep_need(s, s, t);
  for (int j = s + 1; j <= t; ++j) {
    if (j > s + 1) sweep = std::max(sweep, c.sweep_need(s, j - 1, t));
    if (m < sweep) break;  // sweep only grows with j
    const Time v = leaf_value(c.forwards(s, j), tab.at(j, t, m - c.x(j)), tab.at(s, j - 1, m));
    if (v < leaf.value) leaf = {v, j};
  }
  return leaf.value <= chain.value && leaf.value < kInf ? leaf : chain;
}

std::vector<ChainOp> reconstruct(const SlotArrays& c, const Table& tab, int memory) {
  struct Segment { int s, t, m; };
  using Task = std::variant<ChainOp, Segment>;
  std::vector<ChainOp> ops;
  std::vector<Task> stack{Segment{0, c.L, memory}};
  while (!stack.empty()) {
    Task task = stack.back();
    stack.pop_back();
    if (const ChainOp* op = std::get_if<ChainOp>(&task)) {
      ops.push_back(*op);
      continue;
    }
    const auto [s, t, m] = std::get<Segment>(task);
    HEADROOM_CHECK(tab.at(s, t, m) < kInf, "reconstruction only visits feasible segments");
    if (s == t) {
      if (s == c.L) {
        ops.push_back({ChainOpKind::Loss, 0});
      } else {
        ops.push_back({ChainOpKind::Fall, s});
        ops.push_back({ChainOpKind::B, s});
      }
      continue;
    }
    const Choice ch = choose(c, tab, s, t, m);
    HEADROOM_CHECK(ch.value < kInf, "a feasible segment has a feasible choice");
    if (ch.leaf == 0) {
      ops.push_back({ChainOpKind::Fall, s});
      stack.push_back(ChainOp{ChainOpKind::B, s});
      stack.push_back(Segment{s + 1, t, m - c.xbar(s + 1)});
    } else {
      const int j = ch.leaf;
      ops.push_back({ChainOpKind::Fck, s});
      for (int k = s + 1; k < j; ++k) ops.push_back({ChainOpKind::Fn, k});
      stack.push_back(Segment{s, j - 1, m});
      stack.push_back(Segment{j, t, m - c.x(j)});
    }
  }
  return ops;
}

std::string ms_text(double v) {
  std::ostringstream os;
  os.precision(6);
  os << v;
  return os.str();
}

}  // namespace

Chain discretize_chain(const Chain& chain, int64_t unit) {
  HEADROOM_CHECK(unit >= 1, "a slot holds at least one byte");
  auto slots = [unit](int64_t v) { return v / unit + (v % unit != 0 ? 1 : 0); };
  Chain out = chain;
  for (int64_t& v : out.x_bytes) v = slots(v);
  for (int64_t& v : out.xbar_bytes) v = slots(v);
  for (int64_t& v : out.fwd_tmp_bytes) v = slots(v);
  for (int64_t& v : out.bwd_tmp_bytes) v = slots(v);
  out.loss_tmp_bytes = slots(out.loss_tmp_bytes);
  return out;
}

int64_t chain_dp_table_bytes(int stages, int memory) {
  const int64_t n = int64_t{stages} + 1;
  return n * (n + 1) / 2 * (int64_t{memory} + 1) * static_cast<int64_t>(sizeof(Time));
}

ChainDpResult solve_chain_dp(const Chain& slot_chain, int memory) {
  ChainDpResult r;
  const int64_t top = int64_t{memory} - slot_chain.x(0);  // x_0 is live throughout
  if (top < 0) return r;
  HEADROOM_CHECK(chain_dp_table_bytes(slot_chain.length(), static_cast<int>(top)) <= kMaxChainTableBytes,
                 "the caller bounds the table");
  const SlotArrays c(slot_chain, static_cast<int>(top));
  Table tab(c.L, static_cast<int>(top));
  fill_table(c, tab);
  const Time best = tab.at(0, c.L, static_cast<int>(top));
  if (!(best < kInf)) return r;
  r.feasible = true;
  r.makespan_ms = best;
  r.schedule = reconstruct(c, tab, static_cast<int>(top));
  return r;
}

Result<ChainPlan> solve_chain(const Chain& chain, int64_t budget, int slots) {
  return capture_input_errors([&]() -> ChainPlan {
    validate_chain(chain);
    if (budget < 0) throw InputError("budget is " + std::to_string(budget) + " bytes, it cannot be negative");
    if (slots < 1) throw InputError("slots is " + std::to_string(slots) + ", at least 1 is needed");
    if (budget < slots) {
      throw InputError("budget of " + std::to_string(budget) + " bytes is smaller than " + std::to_string(slots) +
                       " slots: a slot would hold 0 bytes");
    }
    if (chain_dp_table_bytes(chain.length(), slots) > kMaxChainTableBytes) {
      throw InputError("a chain of " + std::to_string(chain.length()) + " stages at " + std::to_string(slots) +
                       " slots needs a " + human_bytes(chain_dp_table_bytes(chain.length(), slots)) +
                       " solver table (limit " + human_bytes(kMaxChainTableBytes) + "); use fewer slots");
    }
    ChainPlan plan;
    plan.budget_bytes = budget;
    plan.slots = slots;
    plan.unit_bytes = budget / slots;
    plan.no_checkpoint_makespan_ms = no_checkpoint_makespan_ms(chain);
    plan.store_all_bytes = store_all_peak(chain);
    const Chain slot_chain = discretize_chain(chain, plan.unit_bytes);
    ChainDpResult dp = solve_chain_dp(slot_chain, slots);
    if (!dp.feasible) return plan;

    // The independent simulator re-runs the schedule: within the slots and the bytes, and with
    // the table's makespan (float table: equal up to its rounding).
    Result<ChainSimResult> in_slots = simulate_chain(slot_chain, dp.schedule);
    HEADROOM_CHECK(in_slots.ok(), "the solver's schedule is valid: " + (in_slots.ok() ? "" : in_slots.error()));
    HEADROOM_CHECK(in_slots.value().peak <= slots, "the solver's schedule fits its slots");
    const double sim_ms = in_slots.value().makespan_ms;
    HEADROOM_CHECK(std::abs(sim_ms - dp.makespan_ms) <= 1e-4 * std::max(1.0, sim_ms),
                   "the schedule's makespan is the table's (" + ms_text(sim_ms) + " vs " + ms_text(dp.makespan_ms) + ")");
    Result<ChainSimResult> in_bytes = simulate_chain(chain, dp.schedule);
    HEADROOM_CHECK(in_bytes.ok() && in_bytes.value().peak <= budget, "slots fit implies bytes fit");

    plan.feasible = true;
    plan.makespan_ms = sim_ms;
    plan.peak_bytes = in_bytes.value().peak;
    plan.schedule.reserve(dp.schedule.size());
    for (ChainOp op : dp.schedule) plan.schedule.push_back(op_token(op));
    return plan;
  });
}

std::string chain_plan_json(const ChainPlan& p) {
  nlohmann::ordered_json j;
  j["feasible"] = p.feasible;
  j["budget_bytes"] = p.budget_bytes;
  j["slots"] = p.slots;
  j["makespan_ms"] = p.feasible ? nlohmann::ordered_json(p.makespan_ms) : nlohmann::ordered_json(nullptr);
  j["no_checkpoint_makespan_ms"] = p.no_checkpoint_makespan_ms;
  j["peak_bytes"] = p.feasible ? nlohmann::ordered_json(p.peak_bytes) : nlohmann::ordered_json(nullptr);
  j["schedule"] = p.schedule;
  return j.dump(2) + "\n";
}

std::string chain_plan_text(const ChainPlan& p) {
  std::ostringstream os;
  os << "budget " << human_bytes(p.budget_bytes) << " (" << with_commas(p.budget_bytes) << " bytes), " << p.slots
     << " slots of " << with_commas(p.unit_bytes) << " bytes\n";
  os << "store everything needs " << human_bytes(p.store_all_bytes) << " (" << with_commas(p.store_all_bytes)
     << " bytes); no-checkpoint makespan " << ms_text(p.no_checkpoint_makespan_ms) << " ms\n";
  if (!p.feasible) {
    os << "infeasible: no persistent schedule fits the budget at this slot count\n";
    return os.str();
  }
  const double overhead = p.makespan_ms - p.no_checkpoint_makespan_ms;
  os << "makespan " << ms_text(p.makespan_ms) << " ms (+" << ms_text(overhead) << " ms recomputed";
  if (p.no_checkpoint_makespan_ms > 0) os << ", +" << ms_text(100.0 * overhead / p.no_checkpoint_makespan_ms) << "%";
  os << ")\n";
  os << "peak " << human_bytes(p.peak_bytes) << " (" << with_commas(p.peak_bytes) << " bytes) of "
     << human_bytes(p.budget_bytes) << "\n";
  os << "schedule (" << p.schedule.size() << " ops):";
  for (size_t k = 0; k < p.schedule.size(); ++k) os << (k % 16 == 0 ? "\n  " : " ") << p.schedule[k];
  os << "\n";
  return os.str();
}

}  // namespace headroom
