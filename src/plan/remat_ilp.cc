// The integer program of remat_ilp.h: variables, constraints, CBC, and the decoding of the
// solution into an op list. docs/ilp.md writes the same formulation out in symbols; the names
// below follow it (R, S, FREE, U; stage s ends with the backward of stage i_s = L - s).
#include "plan/remat_ilp.h"
#include "util/index.h"

#include <coin/Cbc_C_Interface.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "plan/cbc_deadline.h"
#include "plan/milp_form.h"
#include "plan/remat_simulate.h"

namespace headroom {
namespace {

// The program's variables (column indices, -1 where fixed at 0) and the graph's constants.
struct RematProgram {
  int L = 0;
  std::vector<std::vector<int>> Rp, Rh;            // [s][j]: forward j in stage s (plain, history)
  std::vector<std::vector<int>> Sp, Sh;            // [s][a]: a_a kept into stage s (a = 1..L)
  std::vector<std::vector<std::vector<int>>> Fp, Fh;  // [s][j][n]: a_{preds[j][n]} freed after j
  std::vector<std::vector<int>> U;                 // [s][j]: memory after forward j's output
  std::vector<int> jmax;                           // last forward of stage s
  std::vector<int64_t> base;                       // δ's and x_0 live in stage s (constant)
  std::vector<int64_t> fresh;                      // δ's the backward of stage s creates
  std::vector<int> min_consumer;                   // per activation (L for a_L: the loss)
  Form form;
};

int backward_of(int L, int s) { return L - s; }  // i_s; L means the loss

bool backward_reads(const RematGraph& g, int s, int a) {
  const int i = backward_of(g.length(), s);
  if (i == g.length()) return a == g.length();
  if (a == i + 1) return true;
  const std::vector<int>& p = g.preds[at(i)];
  return std::binary_search(p.begin(), p.end(), a);
}

RematProgram build(const RematGraph& g, int64_t memory, bool persistent) {
  const Chain& c = g.sizes;
  const int L = g.length();
  const std::vector<std::vector<int>> consumers = remat_consumers(g);
  RematProgram P;
  P.L = L;
  Form& f = P.form;
  const auto S_count = at(L) + 1;
  P.min_consumer.assign(S_count, L);
  std::vector<int> max_consumer(S_count, L);
  for (int a = 0; a < L; ++a) {
    P.min_consumer[at(a)] = consumers[at(a)].front();
    max_consumer[at(a)] = consumers[at(a)].back();
  }
  P.Rp.resize(S_count);
  P.Rh.resize(S_count);
  P.Sp.assign(S_count, std::vector<int>(S_count, -1));
  P.Sh.assign(S_count, std::vector<int>(S_count, -1));
  P.Fp.resize(S_count);
  P.Fh.resize(S_count);
  P.U.resize(S_count);
  P.jmax.resize(S_count);
  P.base.resize(S_count);
  P.fresh.resize(S_count);
  for (int s = 0; s <= L; ++s) {
    const int i = backward_of(L, s);
    P.jmax[at(s)] = std::min(i, L - 1);
    // Gradients live during the forwards of stage s: δ_k was created by an earlier backward (the
    // loss for k = L, else B of k's largest consumer) and not yet consumed by B_{k-1}.
    int64_t base = 0;
    for (int k = 0; k <= L && s > 0; ++k)
      if (max_consumer[at(k)] > i && (k == 0 || k - 1 <= i)) base += c.x(k);
    if (P.min_consumer[0] <= i) base += c.x(0);  // x_0 until its last backward
    P.base[at(s)] = base;
    int64_t fresh = 0;
    if (i == L) {
      fresh = c.x(L);
    } else {
      for (int k : g.preds[at(i)])
        if (max_consumer[at(k)] == i) fresh += c.x(k);
    }
    P.fresh[at(s)] = fresh;
  }
  // Columns.
  for (int s = 0; s <= L; ++s) {
    const int i = backward_of(L, s);
    for (int j = 0; j <= P.jmax[at(s)]; ++j) {
      P.Rp[at(s)].push_back(f.binary(c.fwd_ms[at(j)]));
      P.Rh[at(s)].push_back(f.binary(c.fwd_ms[at(j)]));
    }
    if (s > 0) {
      for (int a = 1; a <= L; ++a) {
        if (a - 1 <= i) P.Sh[at(s)][at(a)] = f.binary();        // x̄_a until B_{a-1}
        if (P.min_consumer[at(a)] <= i) P.Sp[at(s)][at(a)] = f.binary();  // x_a until its readers' B
      }
    }
  }
  for (int s = 0; s <= L; ++s) {
    P.Fp[at(s)].resize(at(P.jmax[at(s)]) + 1);
    P.Fh[at(s)].resize(at(P.jmax[at(s)]) + 1);
    for (int j = 0; j <= P.jmax[at(s)]; ++j) {
      for (int a : g.preds[at(j)]) {
        // x_0 is never freed before its last backward; nothing the backward reads is freed.
        const bool fixed = a == 0 || backward_reads(g, s, a);
        P.Fp[at(s)][at(j)].push_back(fixed ? -1 : f.binary());
        P.Fh[at(s)][at(j)].push_back(fixed || persistent ? -1 : f.binary());
      }
    }
    for (int j = 0; j <= P.jmax[at(s)]; ++j) P.U[at(s)].push_back(f.col(0, 1e30, 0, false));
  }
  auto R = [&](int s, int j, Expr& e, double coef) {
    if (j > P.jmax[at(s)]) return;
    e.add(P.Rp[at(s)][at(j)], coef).add(P.Rh[at(s)][at(j)], coef);
  };
  // "a_a is present in stage s": kept from stage s-1 or computed in s (either form).
  auto present = [&](int s, int a, Expr& e, double coef) {
    R(s, a - 1, e, coef);
    e.add(P.Sp[at(s)][at(a)], coef).add(P.Sh[at(s)][at(a)], coef);
  };
  auto next_S = [&](int s, int a, bool plain) {
    if (s == L) return -1;
    return (plain ? P.Sp : P.Sh)[at(s) + 1][at(a)];
  };

  for (int s = 0; s <= L; ++s) {
    const int i = backward_of(L, s);
    const int jm = P.jmax[at(s)];
    // One copy of an activation per stage: kept in one form, or computed once in one form.
    for (int a = 1; a <= L; ++a) {
      Expr e;
      present(s, a, e, 1);
      f.row(e, 'L', 1);
    }
    // Kept into s+1 only what is present in s, in the same form.
    if (s < L) {
      for (int a = 1; a <= L; ++a) {
        for (bool plain : {true, false}) {
          const int next = next_S(s, a, plain);
          if (next < 0) continue;
          Expr e;
          e.add(next, 1).add((plain ? P.Sp : P.Sh)[at(s)][at(a)], -1);
          if (a - 1 <= jm) e.add((plain ? P.Rp : P.Rh)[at(s)][at(a - 1)], -1);
          f.row(e, 'L', 0);
          if (persistent) {
            // x̄_a stays until B_{a-1}; a plain x_a kept across a backward stays until the last
            // backward that reads it.
            Expr keep;
            keep.add(next, 1).add((plain ? P.Sp : P.Sh)[at(s)][at(a)], -1);
            if (!plain && a - 1 <= jm) keep.add(P.Rh[at(s)][at(a - 1)], -1);
            f.row(keep, 'G', 0);
          }
        }
      }
    }
    // A forward needs its inputs present (a_0 always is while a reader may run).
    for (int j = 0; j <= jm; ++j) {
      for (int a : g.preds[at(j)]) {
        if (a == 0) continue;
        Expr e;
        R(s, j, e, 1);
        present(s, a, e, -1);
        f.row(e, 'L', 0);
      }
    }
    // The backward (or the loss) needs its inputs.
    if (i == L) {
      Expr e;
      R(s, L - 1, e, 1);
      f.row(e, 'G', 1);
    } else {
      Expr xbar;
      xbar.add(P.Rh[at(s)][at(i)], 1).add(P.Sh[at(s)][at(i + 1)], 1);
      f.row(xbar, 'G', 1);
      for (int a : g.preds[at(i)]) {
        if (a == 0) continue;
        Expr e;
        present(s, a, e, 1);
        f.row(e, 'G', 1);
      }
    }
    // Nothing is computed or kept in vain: an activation present in stage s is read by a later
    // forward of the stage, by its backward, or kept into s+1 (in the same form). This removes
    // only schedules with a useless op (never faster) and tightens the relaxation.
    for (int a = 1; a <= L; ++a) {
      for (bool plain : {true, false}) {
        const bool read_back = i == L ? a == L : (!plain && a == i + 1) || [&] {
          const std::vector<int>& p = g.preds[at(i)];
          return std::binary_search(p.begin(), p.end(), a);
        }();
        if (read_back) continue;
        const int next = next_S(s, a, plain);
        auto use = [&](int first_reader, Expr& e) {
          e.add(next, -1);
          if (a == L) return;  // only the loss reads a_L
          for (int j : consumers[at(a)])
            if (j >= first_reader && j <= jm) R(s, j, e, -1);
        };
        if (a - 1 <= jm) {
          Expr e;
          e.add((plain ? P.Rp : P.Rh)[at(s)][at(a - 1)], 1);
          use(a, e);
          f.row(e, 'L', 0);
        }
        const int kept = (plain ? P.Sp : P.Sh)[at(s)][at(a)];
        if (kept >= 0) {
          Expr e;
          e.add(kept, 1);
          use(0, e);
          f.row(e, 'L', 0);
        }
      }
    }
    // Persistent: a plain input read by a forward with history is a checkpoint (the chain
    // model's Fall never frees its input): it is kept into s+1 whenever a_a lives on after this
    // stage's backward (if not, the backward reads it and frees it).
    if (persistent) {
      for (int j = 0; j <= jm; ++j) {
        for (int a : g.preds[at(j)]) {
          const int next = next_S(s, a, true);
          if (a == 0 || next < 0) continue;
          Expr e;  // Sp[s+1][a] >= Rh[s][j] + Rp[s][a-1] + Sp[s][a] - 1
          e.add(next, 1).add(P.Rh[at(s)][at(j)], -1).add(P.Rp[at(s)][at(a - 1)], -1).add(
              P.Sp[at(s)][at(a)], -1);
          f.row(e, 'G', -1);
        }
      }
    }
    // FREE[s][a][j] = 1 only if a is present in that form, j runs, no later forward of the stage
    // reads a, and a is not kept into s+1.
    for (int j = 0; j <= jm; ++j) {
      const std::vector<int>& p = g.preds[at(j)];
      for (size_t n = 0; n < p.size(); ++n) {
        const int a = p[n];
        for (bool plain : {true, false}) {
          const int fr = (plain ? P.Fp : P.Fh)[at(s)][at(j)][n];
          if (fr < 0) continue;
          Expr runs;
          runs.add(fr, 1);
          R(s, j, runs, -1);
          f.row(runs, 'L', 0);
          Expr here;
          here.add(fr, 1).add((plain ? P.Sp : P.Sh)[at(s)][at(a)], -1).add(
              (plain ? P.Rp : P.Rh)[at(s)][at(a - 1)], -1);
          f.row(here, 'L', 0);
          const int next = next_S(s, a, plain);
          if (next >= 0) {
            Expr kept;
            kept.add(fr, 1).add(next, 1);
            f.row(kept, 'L', 1);
          }
          for (int later : consumers[at(a)]) {
            if (later <= j || later > jm) continue;
            Expr e;
            e.add(fr, 1);
            R(s, later, e, 1);
            f.row(e, 'L', 1);
          }
          if (persistent && plain) {
            Expr e;  // a plain activation kept into the stage stays
            e.add(fr, 1).add(P.Sp[at(s)][at(a)], 1);
            f.row(e, 'L', 1);
          }
        }
      }
    }
    // Memory. U[s][j]: live activations and δ's right after forward j's output exists, before the
    // frees that follow j. In use during forward j: U + ftmp_j; during the backward: the live
    // set after the last frees, plus the new δ's and the transient.
    auto frees_after = [&](int j, Expr& e) {
      const std::vector<int>& p = g.preds[at(j)];
      for (size_t n = 0; n < p.size(); ++n) {
        e.add(P.Fp[at(s)][at(j)][n], static_cast<double>(c.x(p[n])));
        // x_0 has no history form (xbar(0) would read before xbar_bytes) and is never freed.
        if (p[n] >= 1) e.add(P.Fh[at(s)][at(j)][n], static_cast<double>(c.xbar(p[n])));
      }
    };
    for (int j = 0; j <= jm; ++j) {
      Expr e;  // U[s][j] - (previous) - output = 0
      e.add(P.U[at(s)][at(j)], 1);
      if (j == 0) {
        e.plus(-static_cast<double>(P.base[at(s)]));
        for (int a = 1; a <= L; ++a) {
          e.add(P.Sp[at(s)][at(a)], -static_cast<double>(c.x(a)));
          e.add(P.Sh[at(s)][at(a)], -static_cast<double>(c.xbar(a)));
        }
      } else {
        e.add(P.U[at(s)][at(j - 1)], -1);
        Expr fr;
        frees_after(j - 1, fr);
        for (auto [col, v] : fr.terms) e.add(col, v);
      }
      e.add(P.Rp[at(s)][at(j)], -static_cast<double>(c.x(j + 1)));
      e.add(P.Rh[at(s)][at(j)], -static_cast<double>(c.xbar(j + 1)));
      f.row(e, 'E', 0);
      Expr m;
      m.add(P.U[at(s)][at(j)], 1);
      R(s, j, m, static_cast<double>(c.fwd_tmp_bytes[at(j)]));
      f.row(m, 'L', static_cast<double>(memory));
    }
    Expr back;
    back.add(P.U[at(s)][at(jm)], 1);
    Expr fr;
    frees_after(jm, fr);
    for (auto [col, v] : fr.terms) back.add(col, -v);
    const int64_t tmp = i == L ? c.loss_tmp_bytes : c.bwd_tmp_bytes[at(i)];
    back.plus(static_cast<double>(P.fresh[at(s)] + tmp));
    f.row(back, 'L', static_cast<double>(memory));
  }
  return P;
}

// Reads the solution back as stages (which forwards, in which form; what is kept) and writes the
// op list, freeing every activation right after its last use in its stage unless it is kept.
std::vector<RematOp> decode(const RematGraph& g, const RematProgram& P, const double* x) {
  const int L = g.length();
  auto on = [&](int col) { return col >= 0 && x[col] > 0.5; };
  std::vector<RematOp> ops;
  std::vector<uint8_t> live(at(L) + 1, 0);  // activations live (either form), x_0 included
  live[0] = 1;
  for (int s = 0; s <= L; ++s) {
    const int i = backward_of(L, s);
    const int jm = P.jmax[at(s)];
    std::vector<int> run;  // forwards of the stage, increasing
    std::vector<uint8_t> hist(at(L) + 1, 0);
    for (int j = 0; j <= jm; ++j) {
      if (on(P.Rp[at(s)][at(j)])) run.push_back(j);
      if (on(P.Rh[at(s)][at(j)])) {
        run.push_back(j);
        hist[at(j)] = 1;
      }
    }
    // Kept into the next stage (x_0: until its last backward, which frees it).
    std::vector<uint8_t> kept(at(L) + 1, 0);
    if (s < L) {
      for (int a = 1; a <= L; ++a)
        kept[at(a)] = on(P.Sp[at(s) + 1][at(a)]) || on(P.Sh[at(s) + 1][at(a)]);
      kept[0] = P.min_consumer[0] <= backward_of(L, s + 1);
    }
    // last[a]: position (in run; run.size() = the backward) of a's last use in the stage, -1: none.
    std::vector<int> last(at(L) + 1, -1);
    for (size_t n = 0; n < run.size(); ++n)
      for (int a : g.preds[at(run[n])]) last[at(a)] = static_cast<int>(n);
    for (int a = 0; a <= L; ++a)
      if (backward_reads(g, s, a) || (a == 0 && i < L && P.min_consumer[0] <= i))
        last[at(a)] = static_cast<int>(run.size());
    // Present at the start but never used here and not kept: dropped before the stage's ops.
    for (int a = 0; a <= L; ++a) {
      if (live[at(a)] && last[at(a)] < 0 && !kept[at(a)]) {
        ops.push_back({RematOpKind::Free, a});
        live[at(a)] = 0;
      }
    }
    for (size_t n = 0; n < run.size(); ++n) {
      const int j = run[n];
      std::vector<int> drop;
      for (int a : g.preds[at(j)])
        if (last[at(a)] == static_cast<int>(n) && !kept[at(a)]) drop.push_back(a);
      const bool all_inputs = drop.size() == g.preds[at(j)].size();
      if (hist[at(j)]) ops.push_back({RematOpKind::Fall, j});
      else ops.push_back({all_inputs ? RematOpKind::Fn : RematOpKind::Fck, j});
      live[at(j) + 1] = 1;
      if (hist[at(j)] || !all_inputs)
        for (int a : drop) ops.push_back({RematOpKind::Free, a});
      for (int a : drop) live[at(a)] = 0;
      // An output nobody reads here and nobody keeps (a useless recomputation): dropped at once.
      if (last[at(j) + 1] < 0 && !kept[at(j) + 1]) {
        ops.push_back({RematOpKind::Free, j + 1});
        live[at(j) + 1] = 0;
      }
    }
    // The backward, with what it frees itself (the simulator's rules), then the other drops.
    if (i == L) {
      ops.push_back({RematOpKind::Loss, 0});
      if (!hist[at(L - 1)] && !on(P.Sh[at(s)][at(L)])) live[at(L)] = 0;  // a plain x_L
    } else {
      ops.push_back({RematOpKind::B, i});
      live[at(i) + 1] = 0;
      for (int a : g.preds[at(i)]) {
        const bool plain = a == 0 || !(on(P.Sh[at(s)][at(a)]) || (a - 1 <= jm && hist[at(a - 1)]));
        if (plain && P.min_consumer[at(a)] == i) live[at(a)] = 0;
      }
    }
    for (int a = 0; a <= L; ++a) {
      if (live[at(a)] && !kept[at(a)]) {
        ops.push_back({RematOpKind::Free, a});
        live[at(a)] = 0;
      }
    }
  }
  return ops;
}


// The program's binaries of a schedule (the inverse of decode), for a MIP start: R from the
// forwards of each stage, S from what is live when a stage's first op runs, FREE where the
// schedule frees an input right after a forward. Returns false when the schedule is not in the
// program's space (forwards out of order within a stage, a backward op out of place).
bool encode(const RematGraph& g, const RematProgram& P, const std::vector<RematOp>& ops,
            std::vector<int>* cols, std::vector<double>* vals) {
  const int L = g.length();
  const auto consumers = remat_consumers(g);
  RematState st = RematState::initial(g);
  std::vector<double> x(P.form.obj.size(), 0.0);
  int s = 0, last = -1, prev_forward = -1;
  bool stage_open = false;
  auto set = [&](int col) {
    if (col < 0) return false;
    x[at(col)] = 1;
    return true;
  };
  for (RematOp op : ops) {
    if (op.kind != RematOpKind::Free && !stage_open) {
      stage_open = true;
      if (s > 0) {
        for (int a = 1; a <= L; ++a) {
          if (st.plain[at(a)] && !set(P.Sp[at(s)][at(a)])) return false;
          if (st.bar[at(a)] && !set(P.Sh[at(s)][at(a)])) return false;
        }
      }
    }
    int64_t in_use = 0;
    double t = 0;
    RematState before = st;
    if (!apply_remat_op(g, consumers, op, st, &in_use, &t).empty()) return false;
    switch (op.kind) {
      case RematOpKind::Fck:
      case RematOpKind::Fn:
      case RematOpKind::Fall: {
        const int j = op.index;
        if (j <= last || j > P.jmax[at(s)]) return false;
        last = prev_forward = j;
        if (!set((op.kind == RematOpKind::Fall ? P.Rh : P.Rp)[at(s)][at(j)])) return false;
        if (op.kind == RematOpKind::Fn) {
          const std::vector<int>& p = g.preds[at(j)];
          for (size_t n = 0; n < p.size(); ++n)
            if (!set((before.plain[at(p[n])] ? P.Fp : P.Fh)[at(s)][at(j)][n])) return false;
        }
        break;
      }
      case RematOpKind::Free: {
        if (!stage_open || prev_forward < 0) break;  // a drop between stages: S says it
        const std::vector<int>& p = g.preds[at(prev_forward)];
        const auto it = std::find(p.begin(), p.end(), op.index);
        if (it == p.end()) return false;
        const size_t n = static_cast<size_t>(it - p.begin());
        if (!set((before.plain[at(op.index)] ? P.Fp : P.Fh)[at(s)][at(prev_forward)][n])) return false;
        break;
      }
      case RematOpKind::Loss:
      case RematOpKind::B:
        if (backward_of(L, s) != (op.kind == RematOpKind::Loss ? L : op.index)) return false;
        ++s;
        last = prev_forward = -1;
        stage_open = false;
        break;
    }
    if (op.kind != RematOpKind::Free && op.kind != RematOpKind::Fck && op.kind != RematOpKind::Fn &&
        op.kind != RematOpKind::Fall)
      prev_forward = -1;
  }
  for (size_t k = 0; k < x.size(); ++k) {
    if (!P.form.integer[k]) continue;
    cols->push_back(static_cast<int>(k));
    vals->push_back(x[k]);
  }
  return true;
}

}  // namespace

// A schedule in every program's space (when memory allows): each backward recomputes, from the
// input, exactly the forwards it needs, freeing every activation after its last reader.
std::vector<RematOp> remat_sweep_schedule(const RematGraph& g) {
  const int L = g.length();
  std::vector<RematOp> ops;
  auto run_stage = [&](std::vector<uint8_t> need, std::vector<uint8_t> hist, int backward) {
    // need[j]: forward j runs; readers decide the frees (a_0 stays until its last backward).
    std::vector<int> last(at(L) + 1, -1);
    for (int j = 0; j < L; ++j)
      if (need[at(j)]) for (int a : g.preds[at(j)]) last[at(a)] = j;
    if (backward == L) last[at(L)] = L;
    else {
      last[at(backward) + 1] = L;
      for (int a : g.preds[at(backward)]) last[at(a)] = L;
    }
    for (int j = 0; j < L; ++j) {
      if (!need[at(j)]) continue;
      ops.push_back({hist[at(j)] ? RematOpKind::Fall : RematOpKind::Fck, j});
      for (int a : g.preds[at(j)])
        if (a != 0 && last[at(a)] == j) ops.push_back({RematOpKind::Free, a});
    }
  };
  std::vector<uint8_t> all(at(L), 1), none(at(L), 0);
  run_stage(all, none, L);
  ops.push_back({RematOpKind::Loss, 0});
  const auto consumers = remat_consumers(g);
  for (int i = L - 1; i >= 0; --i) {
    // Drop what the previous backward left (its own frees are the simulator's).
    RematState st = RematState::initial(g);
    for (RematOp op : ops) {
      int64_t u = 0;
      double t = 0;
      HEADROOM_CHECK(apply_remat_op(g, consumers, op, st, &u, &t).empty(), "sweep is valid");
    }
    for (int a = 1; a <= L; ++a)
      if (st.has(a)) ops.push_back({RematOpKind::Free, a});
    std::vector<uint8_t> need(at(L), 0), hist(at(L), 0);
    need[at(i)] = hist[at(i)] = 1;
    for (int a : g.preds[at(i)])
      if (a > 0) need[at(a - 1)] = 1;
    for (int j = i - 1; j >= 0; --j)
      if (need[at(j)])
        for (int a : g.preds[at(j)])
          if (a > 0) need[at(a - 1)] = 1;
    run_stage(need, hist, i);
    ops.push_back({RematOpKind::B, i});
  }
  return ops;
}

namespace {
}  // namespace

std::string remat_status_name(RematIlpStatus status) {
  switch (status) {
    case RematIlpStatus::Optimal: return "optimal";
    case RematIlpStatus::Feasible: return "time limit (feasible)";
    case RematIlpStatus::Infeasible: return "infeasible";
    case RematIlpStatus::NoSolution: return "no solution found";
  }
  return "unknown";
}

RematIlpResult solve_remat_ilp(const RematGraph& g, int64_t memory, const RematIlpOptions& options,
                               const std::vector<RematOp>& initial) {
  const auto start = std::chrono::steady_clock::now();
  RematProgram P = build(g, memory, options.persistent);
  const Form& f = P.form;
  RematIlpResult out;
  out.variables = static_cast<int>(f.obj.size());
  out.constraints = f.rows();
  const double constant = no_checkpoint_makespan_ms(g.sizes) -
                          [&] {
                            double fw = 0;
                            for (double v : g.sizes.fwd_ms) fw += v;
                            return fw;
                          }();
  auto finish = [&] {
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
  };
  if (f.constant_rows_violated) {
    out.status = RematIlpStatus::Infeasible;
    return finish();
  }
  std::unique_ptr<Cbc_Model, void (*)(Cbc_Model*)> model(Cbc_newModel(), Cbc_deleteModel);
  Cbc_Model* m = model.get();
  load_form_into_cbc(f, m);
  Cbc_setLogLevel(m, 0);
  Cbc_setParameter(m, "log", "0");
  Cbc_setParameter(m, "slog", "0");
  // CBC 2.10's preprocessing crashes in CglPreProcess::postProcess when the time limit stops it
  // with an incumbent, and it overruns the limit on large programs: it is off.
  Cbc_setParameter(m, "preprocess", "off");
  Cbc_setParameter(m, "timeMode", "elapsed");  // the limit is wall time, not CPU time
  // The limit covers the whole call: what building the program took is spent already.
  const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double left = std::max(0.01, options.time_limit_s - spent);
  Cbc_setMaximumSeconds(m, left);
  Cbc_setAllowableGap(m, 1e-7);
  Cbc_setAllowableFractionGap(m, options.stop_gap_pct / 100);
  if (options.cutoff_ms > 0) Cbc_setCutoff(m, options.cutoff_ms - constant - 1e-6);
  // A first incumbent: the caller's schedule, else the sweep (each backward recomputes from the
  // input), whichever is first to fit the memory, the program's space and the cutoff.
  std::vector<RematOp> started;
  for (const std::vector<RematOp>& start_ops : {initial, remat_sweep_schedule(g)}) {
    std::vector<int> cols;
    std::vector<double> vals;
    if (start_ops.empty()) continue;
    Result<RematSimResult> fits = simulate_remat(g, start_ops);
    if (fits.ok() && fits.value().peak <= memory &&
        (options.cutoff_ms <= 0 || fits.value().makespan_ms < options.cutoff_ms) &&
        encode(g, P, start_ops, &cols, &vals)) {
      Cbc_setMIPStartI(m, static_cast<int>(cols.size()), cols.data(), vals.data());
      out.start_ms = fits.value().makespan_ms;
      started = start_ops;
      break;
    }
  }
  // CBC stops itself at `left` in branch and bound; the deadline (a little later, so that it can)
  // also stops its root LP.
  const CbcOutcome cbc = solve_cbc_with_deadline(m, static_cast<int>(f.obj.size()),
                                                 left + kDeadlineGraceS);
  const double* best = cbc.has_solution ? cbc.solution.data() : nullptr;
  // Without a schedule, a search that ended by itself (not by the clock) is a proof that none
  // exists (faster than the cutoff, when one is set).
  if (best == nullptr && cbc.finished && (cbc.proven_infeasible || cbc.proven_optimal)) {
    out.status = RematIlpStatus::Infeasible;
    return finish();
  }
  if (best == nullptr && !started.empty()) {
    // Stopped (in the root, under load) before CBC recorded the start: the start stands, checked
    // by the simulator above.
    out.status = RematIlpStatus::Feasible;
    out.objective_ms = out.start_ms;
    // Killed at the deadline, CBC left no bound: the LP relaxation's is unknown, so the bound is
    // the trivial one (no recomputation at all).
    const double bound = cbc.finished ? cbc.best_possible + constant : no_checkpoint_makespan_ms(g.sizes);
    out.bound_ms = std::min(out.objective_ms, bound);
    out.gap_pct = out.objective_ms > 0 ? 100.0 * (out.objective_ms - out.bound_ms) / out.objective_ms : 0;
    out.schedule = started;
    return finish();
  }
  if (best == nullptr) {
    out.status = RematIlpStatus::NoSolution;
    out.bound_ms = cbc.finished ? cbc.best_possible + constant : no_checkpoint_makespan_ms(g.sizes);
    return finish();
  }
  out.status = cbc.proven_optimal ? RematIlpStatus::Optimal : RematIlpStatus::Feasible;
  out.objective_ms = cbc.objective + constant;
  out.bound_ms = out.status == RematIlpStatus::Optimal
                     ? out.objective_ms
                     : std::min(out.objective_ms, cbc.best_possible + constant);
  out.gap_pct = out.objective_ms > 0 ? 100.0 * (out.objective_ms - out.bound_ms) / out.objective_ms : 0;
  out.schedule = decode(g, P, best);
  return finish();
}

}  // namespace headroom
