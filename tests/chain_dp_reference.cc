// The chain DP as it was before issue #17's speed work (commit 0b2751b, src/plan/chain_dp.cc):
// the table fill, verbatim, kept out of the shipped library as the oracle that the fast fill must
// equal bit for bit (makespan and schedule) on random chains, and as the "old" side of
// bench/chain_dp_bench.cc's growth comparison.
#include "chain_dp_reference.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <system_error>
#include <thread>
#include <variant>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace headroom::testing {
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
      : n_(L + 1),
        width_(memory + 1),
        rows_(static_cast<size_t>(n_) * static_cast<size_t>(n_ + 1) / 2),
        values_(new Time[rows_ * static_cast<size_t>(width_)]),
        lo_(rows_),
        cap_(rows_),
        lb_(rows_) {}

  size_t row(int s, int t) const {
    const auto ss = static_cast<size_t>(s);
    return ss * static_cast<size_t>(n_) - ss * (ss - 1) / 2 + static_cast<size_t>(t - s);
  }
  Time* values(int s, int t) { return &values_[row(s, t) * static_cast<size_t>(width_)]; }
  const Time* values(int s, int t) const {
    return &values_[row(s, t) * static_cast<size_t>(width_)];
  }
  Time at(int s, int t, int m) const { return m < 0 ? kInf : values(s, t)[m]; }
  int32_t& lo(int s, int t) { return lo_[row(s, t)]; }
  int32_t& cap(int s, int t) { return cap_[row(s, t)]; }
  Time& lb(int s, int t) { return lb_[row(s, t)]; }
  int width() const { return width_; }

 private:
  int n_;
  int width_;
  size_t rows_;
  std::unique_ptr<Time[]> values_;  // every row is written in full before it is read
  std::vector<int32_t> lo_, cap_;
  std::vector<Time> lb_;
};

// A leaf's value, F(s, j) + C(j, t, m - x_j) + C(s, j - 1, m), in this order of additions
// everywhere (table fill and reconstruction), so the reconstruction finds the table's values.
inline Time leaf_value(Time f, Time a, Time b) { return (f + a) + b; }

// relax: out[k] = min(out[k], leaf_value(f, a[k], b[k])) for k < count, by SSE2 or AVX2 (picked
// once at run time) or scalar code. All compute the same float operations (minps is
// v < o ? v : o), so the table does not depend on the instruction set.
void relax_portable(Time* __restrict out, const Time* __restrict a, const Time* __restrict b,
                    Time f, int count) {
  int k = 0;
#if defined(__SSE2__)
  static_assert(sizeof(Time) == sizeof(float));
  // min(v, o) as minps computes it: v < o ? v : o, the scalar expression below.
  const __m128 fv = _mm_set1_ps(f);
  for (; k + 4 <= count; k += 4) {
    const __m128 v = _mm_add_ps(_mm_add_ps(fv, _mm_loadu_ps(a + k)), _mm_loadu_ps(b + k));
    _mm_storeu_ps(out + k, _mm_min_ps(v, _mm_loadu_ps(out + k)));
  }
#endif
  for (; k < count; ++k) {
    const Time v = leaf_value(f, a[k], b[k]);
    out[k] = v < out[k] ? v : out[k];
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HEADROOM_CHAIN_AVX2 1
__attribute__((target("avx2"))) void relax_avx2(Time* __restrict out, const Time* __restrict a,
                                                const Time* __restrict b, Time f, int count) {
  int k = 0;
  const __m256 fv = _mm256_set1_ps(f);
  for (; k + 8 <= count; k += 8) {
    const __m256 v =
        _mm256_add_ps(_mm256_add_ps(fv, _mm256_loadu_ps(a + k)), _mm256_loadu_ps(b + k));
    _mm256_storeu_ps(out + k, _mm256_min_ps(v, _mm256_loadu_ps(out + k)));
  }
  for (; k < count; ++k) {
    const Time v = leaf_value(f, a[k], b[k]);
    out[k] = v < out[k] ? v : out[k];
  }
}
#endif

using RelaxFn = void (*)(Time*, const Time*, const Time*, Time, int);

RelaxFn pick_relax() {
#ifdef HEADROOM_CHAIN_AVX2
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) return relax_avx2;
#endif
  return relax_portable;
}

void relax(Time* out, const Time* a, const Time* b, Time f, int count) {
  static const RelaxFn fn = pick_relax();
  fn(out, a, b, f, count);
}

// The table is filled in blocks of kBlock columns t, and for one block, s runs from the block's
// last column down to 0. At each s, all the block's rows (s, t) are computed together:
//   1. each row starts from its chain option (or is the single stage, s == t);
//   2. the leaves j <= t0 (the block's first column), j outer and t inner: their row
//      (s, j - 1) is in an earlier block, final, and read once for all the block's columns;
//   3. t ascending, the leaves j > t0, whose rows (s, j - 1) were finished in this step at an
//      earlier t; then the row is final.
// The block's rows (j, t) are also kept in `recent_`, ordered by j then t, so steps 1-3 read
// them sequentially. Every input is final when read: (s + 1, t) and (j, t) have a larger s,
// (s, j - 1) is in an earlier block or at an earlier t. The order changes which leaves the
// threshold skips, never the minimum.
constexpr int kBlock = 16;

class BlockFiller {
 public:
  BlockFiller(const SlotArrays& c, Table& tab)
      : c_(c),
        tab_(tab),
        width_(tab.width()),
        recent_(static_cast<size_t>(c.L + 1) * kBlock * static_cast<size_t>(width_)) {}

  // Block b (columns b * kBlock ...). progress[b] is the smallest s whose rows block b has
  // finished; row s of block b needs block b - 1 past s (and so every earlier block).
  // The lane that first sees the deadline pass sets `stop` and marks every block abandoned (-1,
  // below every row), those not started included, so that no lane waits for a row that will not
  // come; a lane that sees `stop` marks its own block again (it may have stored a row since) and
  // returns.
  void fill_block(int b, std::vector<std::atomic<int>>& progress, const Deadline& deadline,
                  std::atomic<bool>& stop) {
    t0_ = b * kBlock;
    const int t1 = std::min(c_.L + 1, t0_ + kBlock);
    auto& mine = progress[static_cast<size_t>(b)];
    for (int s = t1 - 1; s >= 0; --s) {
      if (b > 0 && s < t0_) {
        for (int p = progress[static_cast<size_t>(b - 1)].load(std::memory_order_acquire); p > s;
             p = progress[static_cast<size_t>(b - 1)].load(std::memory_order_acquire)) {
          progress[static_cast<size_t>(b - 1)].wait(p, std::memory_order_acquire);
        }
      }
      bool expected = false;
      if (deadline && std::chrono::steady_clock::now() > *deadline &&
          stop.compare_exchange_strong(expected, true)) {
        for (std::atomic<int>& p : progress) {
          p.store(-1, std::memory_order_release);
          p.notify_all();
        }
      }
      if (stop.load()) {
        mine.store(-1, std::memory_order_release);
        mine.notify_all();
        return;
      }
      fill_rows(s, t1);
      mine.store(s, std::memory_order_release);
      mine.notify_all();
    }
  }

 private:
  // One row (s, t) being computed: out[m] for m < cap is the best so far, nonincreasing in m,
  // and out[m] <= F(s, j) + lb for every m in [hi, cap), j the last leaf applied.
  struct Row {
    int t = 0;
    Time* out = nullptr;
    Time lb = 0;
    int cap = 0;
    int hi = 0;
    int32_t x_after = 0;  // x_{t+1}: δ_{t+1} is live during the whole segment
  };

  Time* recent(int j, int t) {
    return recent_.data() + (static_cast<size_t>(j) * kBlock + static_cast<size_t>(t - t0_)) *
                                static_cast<size_t>(width_);
  }

  void fill_rows(int s, int t1) {
    rows_.clear();
    for (int t = std::max(s, t0_); t < t1; ++t) {
      if (s == t)
        single_stage(s);
      else
        rows_.push_back(chain_option(s, t));
    }
    // 2. Leaves whose first part [s, j - 1] ends before the block.
    int32_t sweep = 0;
    int j = s + 1;
    for (; j <= t0_; ++j) {
      sweep = next_sweep(s, j, sweep);
      const Time f = c_.forwards(s, j);
      const Time* b = tab_.values(s, j - 1);
      const int b_lo = tab_.lo(s, j - 1);
      for (Row& r : rows_) leaf(r, j, f, sweep, b, b_lo);
    }
    // 3. Leaves whose first part ends in the block.
    const int j_begin = j;
    const int32_t sweep_begin = sweep;
    for (Row& r : rows_) {
      sweep = sweep_begin;
      for (j = j_begin; j <= r.t; ++j) {
        sweep = next_sweep(s, j, sweep);
        leaf(r, j, c_.forwards(s, j), sweep, tab_.values(s, j - 1), tab_.lo(s, j - 1));
      }
      finish(s, r);
    }
  }

  // The sweep of leaf j, without δ_{t+1}: the max over Fck_s (memory x_{s+1} + ftmp_s) and
  // Fn_{s+1} ... Fn_{j-1} (x_k + x_{k+1} + ftmp_k), from the sweep of leaf j - 1.
  int32_t next_sweep(int s, int j, int32_t sweep) const {
    const auto k = static_cast<size_t>(j - 1);
    const int32_t step =
        j == s + 1 ? c_.cw[k + 1] + c_.ftmp[k] : c_.cw[k] + c_.cw[k + 1] + c_.ftmp[k];
    return std::max(sweep, step);
  }

  // Fall_s then B_s with δ_{s+1} live (or the loss alone, s == L).
  void single_stage(int s) {
    Time* out = tab_.values(s, s);
    const int lo = std::min<int32_t>(c_.chain_need(s, s), width_);
    const Time v = c_.fb[static_cast<size_t>(s)];
    std::fill(out, out + lo, kInf);
    std::fill(out + lo, out + width_, v);
    tab_.lo(s, s) = lo;
    tab_.cap(s, s) = lo;
    tab_.lb(s, s) = v;
    std::copy(out, out + width_, recent(s, s));
  }

  // Fall_s, then [s+1, t] beside x̄_{s+1}, then B_s. From cap on, the segment stores everything
  // and costs lb: no leaf does better, so leaves only look below cap.
  Row chain_option(int s, int t) {
    Row r;
    r.t = t;
    r.out = tab_.values(s, t);
    r.x_after = c_.x(t + 1);
    const int32_t xb = c_.xbar(s + 1);
    const int32_t need = c_.chain_need(s, t);
    r.cap = static_cast<int>(
        std::min<int64_t>(width_, std::max<int64_t>(need, int64_t{xb} + tab_.cap(s + 1, t))));
    r.lb = c_.fb[static_cast<size_t>(s)] + tab_.lb(s + 1, t);
    r.hi = r.cap;
    tab_.cap(s, t) = r.cap;
    tab_.lb(s, t) = r.lb;
    std::fill(r.out + r.cap, r.out + width_, r.lb);
    const int lo =
        std::min(r.cap, static_cast<int>(std::max<int64_t>(need, int64_t{xb} + tab_.lo(s + 1, t))));
    std::fill(r.out, r.out + lo, kInf);
    const Time* sub = recent(s + 1, t) - xb;
    const Time fb = c_.fb[static_cast<size_t>(s)];
    for (int m = lo; m < r.cap; ++m) r.out[m] = fb + sub[m];
    return r;
  }

  // Fck_s, Fn_{s+1} ... Fn_{j-1}, then [j, t] beside x_j, then [s, j-1] with δ_j. A leaf costs
  // at least F(s, j) + lb (both parts at their lower bound), and F grows with j, so hi only
  // moves down; m below lo fails a memory test.
  void leaf(Row& r, int j, Time f, int32_t sweep, const Time* b, int b_lo) {
    const Time threshold = f + r.lb;
    while (r.hi > 0 && r.out[r.hi - 1] <= threshold) --r.hi;
    const int32_t xj = c_.x(j);
    const int lo = static_cast<int>(
        std::max<int64_t>({int64_t{r.x_after} + sweep, int64_t{xj} + tab_.lo(j, r.t), b_lo}));
    if (lo >= r.hi) return;
    // Past hi the leaf is still a valid candidate (only one that cannot win): round the count
    // up to whole vectors, short of cap where the row's constant part starts.
    const int end = std::min(r.cap, lo + ((r.hi - lo + 7) & ~7));
    relax(r.out + lo, recent(j, r.t) - xj + lo, b + lo, f, end - lo);
  }

  void finish(int s, const Row& r) {
    int lo = 0;
    while (lo < r.cap && r.out[lo] == kInf) ++lo;
    tab_.lo(s, r.t) = lo;
    std::copy(r.out, r.out + width_, recent(s, r.t));
  }

  const SlotArrays& c_;
  Table& tab_;
  int width_;
  int t0_ = 0;
  std::vector<Time> recent_;
  std::vector<Row> rows_;
};

// Blocks are dealt round-robin to up to kMaxThreads threads (by default one for small tables,
// else one per hardware thread); block b follows block b - 1 down the rows, and each thread takes
// its blocks in increasing order, so the lowest unfinished block can always proceed. Each row is
// computed by one thread with the same operations in the same order, so the table does not
// depend on the number of threads.
constexpr int kMaxThreads = 4;
constexpr int64_t kThreadedWork = int64_t{1} << 24;  // L^3 * memory below this: one thread

// False when the deadline passed before the table was complete (its values are then not read).
bool fill_table(const SlotArrays& c, Table& tab, int max_threads, const Deadline& deadline) {
  const int blocks = c.L / kBlock + 1;
  std::vector<std::atomic<int>> progress(static_cast<size_t>(blocks));
  for (std::atomic<int>& p : progress) p.store(c.L + 1);
  const int64_t work = int64_t{c.L} * c.L * c.L * tab.width();
  const int wanted =
      max_threads > 0 ? max_threads : static_cast<int>(std::thread::hardware_concurrency());
  const int threads = work < kThreadedWork && max_threads == 0
                          ? 1
                          : std::clamp(wanted, 1, std::min(kMaxThreads, blocks));
  std::vector<BlockFiller> fillers;  // buffers allocated before any thread starts
  for (int k = 0; k < threads; ++k) fillers.emplace_back(c, tab);
  // The number of lanes is fixed once the threads exist (fewer if the system refuses one), and
  // only then does any lane start.
  std::atomic<int> lanes{0};
  std::atomic<bool> stop{false};
  auto run = [&](int lane) {
    lanes.wait(0);
    const int n = lanes.load();
    for (int b = lane; b < blocks && !stop.load(); b += n)
      fillers[static_cast<size_t>(lane)].fill_block(b, progress, deadline, stop);
  };
  std::vector<std::thread> workers;
  try {
    for (int k = 1; k < threads; ++k) workers.emplace_back(run, k);
  } catch (const std::system_error&) {
    // Run with the lanes that exist.
  }
  lanes.store(static_cast<int>(workers.size()) + 1);
  lanes.notify_all();
  run(0);
  for (std::thread& w : workers) w.join();
  return !stop.load();
}

// The choice at (s, t, m), by Rotor's rule: the best leaf (smallest j among equals) when it is
// no worse than the chain option.
struct Choice {
  Time value = kInf;
  int leaf = 0;  // 0: chain option; j > s: leaf at j
};

Choice choose(const SlotArrays& c, const Table& tab, int s, int t, int m) {
  Choice chain;
  if (m >= c.chain_need(s, t))
    chain.value = c.fb[static_cast<size_t>(s)] + tab.at(s + 1, t, m - c.xbar(s + 1));
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
  struct Segment {
    int s, t, m;
  };
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

}  // namespace

ChainDpResult reference_solve_chain_dp(const Chain& slot_chain, int memory, int max_threads,
                             const Deadline& deadline) {
  ChainDpResult r;
  const int64_t top = int64_t{memory} - slot_chain.x(0);  // x_0 is live throughout
  if (top < 0) return r;
  HEADROOM_CHECK(
      headroom::chain_dp_table_bytes(slot_chain.length(), static_cast<int>(top)) <= kMaxChainTableBytes,
      "the caller bounds the table");
  const SlotArrays c(slot_chain, static_cast<int>(top));
  Table tab(c.L, static_cast<int>(top));
  if (!fill_table(c, tab, max_threads, deadline)) {
    r.timed_out = true;
    return r;
  }
  const Time best = tab.at(0, c.L, static_cast<int>(top));
  if (!(best < kInf)) return r;
  r.feasible = true;
  r.makespan_ms = best;
  r.schedule = reconstruct(c, tab, static_cast<int>(top));
  return r;
}

}  // namespace headroom::testing
