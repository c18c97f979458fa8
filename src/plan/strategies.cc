#include "plan/strategies.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "plan/chain_dp.h"
#include "plan/chain_simulate.h"
#include "plan/model_chain.h"
#include "plan/rotor_regions.h"
#include "plan/segment_dp.h"
#include "schedule/checkpoint_region.h"
#include "sim/simulate.h"
#include "util/error.h"

namespace headroom {

bool better(const Evaluation& a, const Evaluation& b) {
  if (a.feasible != b.feasible) return a.feasible;
  if (a.feasible) {
    if (a.time.total_ms != b.time.total_ms) return a.time.total_ms < b.time.total_ms;
    return a.peak_bytes < b.peak_bytes;
  }
  return a.peak_bytes < b.peak_bytes;
}

namespace {

StrategyResult evaluated(std::string name, PlanContext& ctx, Candidate c, std::string note = "") {
  StrategyResult r;
  r.name = std::move(name);
  r.note = std::move(note);
  r.eval = ctx.evaluate(c);
  r.candidate = std::move(c);
  return r;
}

StrategyResult not_applicable(std::string name, std::string why) {
  StrategyResult r;
  r.name = std::move(name);
  r.applicable = false;
  r.note = std::move(why);
  return r;
}

// Segments as op ranges. A segment reading only tensors that need no grad (the model's inputs: the
// first stages) would leave its parameters without gradients in PyTorch, and one starting with an
// in-place op on its input (resnet's stem relu_) could not be re-run, so it starts at the first
// stage from which it can be checkpointed (or is dropped).
std::vector<CheckpointSegment> to_ops(const Graph& g, const std::vector<Stage>& stages, const std::vector<SegmentRange>& ranges) {
  std::vector<CheckpointSegment> out;
  for (const SegmentRange& r : ranges) {
    const OpId last = stages[static_cast<size_t>(r.last)].last;
    int k = r.first;
    while (k <= r.last && !checkpoint_region_problem(g, {stages[static_cast<size_t>(k)].first, last}).empty()) ++k;
    if (k <= r.last) out.push_back({stages[static_cast<size_t>(k)].first, last});
  }
  return out;
}

// Checkpointing on top of an offloading base: an op inside a region records no node in the
// forward, so there is nothing of it to offload (validate_plan rejects such a plan).
void set_checkpoints(Candidate& c, std::vector<CheckpointSegment> regions) {
  c.plan.checkpoints = std::move(regions);
  std::erase_if(c.plan.offload, [&](OpId o) {
    return std::any_of(c.plan.checkpoints.begin(), c.plan.checkpoints.end(), [&](const CheckpointSegment& r) { return r.first <= o && o <= r.last; });
  });
}

// The smallest prefix of `order` (by the monotone-ish memory of applying it) whose candidate
// fits, by bisection; then the result at that prefix. `make(k)` builds the candidate of the first
// k entries.
StrategyResult smallest_fitting_prefix(const std::string& name, PlanContext& ctx, size_t n,
                                       const std::function<Candidate(size_t)>& make, const std::string& what) {
  StrategyResult all = evaluated(name, ctx, make(n), std::to_string(n) + " " + what);
  if (!all.eval.feasible) return all;
  size_t lo = 0, hi = n;  // make(hi) fits; make(lo) is unknown (lo = 0 does not: we plan only when over)
  StrategyResult best = all;
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    StrategyResult r = evaluated(name, ctx, make(mid), std::to_string(mid) + " " + what);
    if (r.eval.feasible) {
      hi = mid;
      if (better(r.eval, best.eval)) best = r;
    } else {
      lo = mid;
    }
  }
  return best;
}

}  // namespace

std::vector<SegmentStage> stage_statistics(PlanContext& ctx, const Candidate& base, const std::vector<Stage>& stages) {
  const Graph& g = ctx.graph(base.micro_batch);
  Program p = ctx.program(base);
  int32_t end_event = -1;
  for (const Step& s : p.steps) {
    if (s.phase == Phase::Forward) end_event = s.end_event;
    if (s.phase == Phase::Backward) break;
  }
  std::vector<int> stage_of(g.ops.size(), -1);
  for (size_t k = 0; k < stages.size(); ++k) {
    for (OpId o = stages[k].first; o <= stages[k].last; ++o) stage_of[static_cast<size_t>(o)] = static_cast<int>(k);
  }
  std::vector<SegmentStage> out(stages.size());
  if (end_event > 0) {
    for (BufferId b : live_after(p, end_event - 1)) {
      const Buffer& buf = p.buffers[static_cast<size_t>(b)];
      if (buf.op == kNone || buf.category != Category::SavedActivations) continue;
      const int k = stage_of[static_cast<size_t>(buf.op)];
      if (k >= 0) out[static_cast<size_t>(k)].kept_bytes += buf.bytes;
    }
  }
  for (size_t k = 0; k < stages.size(); ++k) {
    out[k].boundary_bytes = stages[k].boundary_bytes;
    for (OpId o = stages[k].first; o <= stages[k].last; ++o) out[k].forward_ms += ctx.cost().op_cost(g, g.op(o)).forward_ms;
  }
  return out;
}

namespace {

// Optimal segments on top of `base`: the DP's activation budget is the budget less what the
// base candidate holds besides stage activations; every answer is re-simulated and the DP's
// budget lowered by the overshoot until the plan fits (or the DP runs out of room).
StrategyResult checkpoint_on(const std::string& name, PlanContext& ctx, const std::vector<Stage>& stages,
                             const Candidate& base, const Evaluation& base_eval) {
  if (base_eval.feasible) {
    // Nothing to recompute (the DP's slot rounding could otherwise ask for a segment).
    StrategyResult r;
    r.name = name;
    r.note = "0 segments";
    r.candidate = base;
    r.eval = base_eval;
    return r;
  }
  std::vector<SegmentStage> stats = stage_statistics(ctx, base, stages);
  int64_t kept = 0;
  for (const SegmentStage& s : stats) kept += s.kept_bytes;
  const int64_t other = base_eval.peak_bytes - kept;
  int64_t dp_budget = ctx.budget_bytes() - other;
  StrategyResult best;
  best.name = name;
  best.eval.peak_bytes = -1;
  for (int attempt = 0; attempt < 12 && dp_budget > 0; ++attempt) {
    SegmentPlan sp = solve_segments(stats, dp_budget);
    if (!sp.feasible) break;
    Candidate c = base;
    set_checkpoints(c, to_ops(ctx.graph(0), stages, sp.segments));
    StrategyResult r = evaluated(name, ctx, c, std::to_string(sp.segments.size()) + " segments");
    if (best.eval.peak_bytes < 0 || better(r.eval, best.eval)) best = r;
    if (r.eval.feasible) break;
    dp_budget -= std::max<int64_t>(r.eval.peak_bytes - ctx.budget_bytes(), dp_budget / 100 + 1);
  }
  if (best.eval.peak_bytes < 0) {
    // The DP finds no room at all: report the finest checkpointing as the memory it reaches.
    Candidate c = base;
    std::vector<SegmentRange> each;
    for (int k = 0; k < static_cast<int>(stages.size()); ++k) each.push_back({k, k});
    set_checkpoints(c, to_ops(ctx.graph(0), stages, each));
    best = evaluated(name, ctx, c, "every stage checkpointed");
  }
  return best;
}

// Nested regions as op ranges, each started as to_ops starts a segment; a region that still
// cannot be checkpointed (validate_plan) is dropped, and so is one that the shifted starts made
// a duplicate of, or partially overlapping with, a region kept before it.
std::vector<CheckpointSegment> nested_to_ops(const Graph& g, const std::vector<Stage>& stages, const std::vector<SegmentRange>& regions) {
  std::vector<CheckpointSegment> shifted = to_ops(g, stages, regions);
  sort_checkpoints(shifted);
  std::vector<CheckpointSegment> out;
  for (const CheckpointSegment& r : shifted) {
    if (!checkpoint_region_problem(g, r).empty()) continue;
    bool fits = true;
    for (const CheckpointSegment& k : out) {
      const bool disjoint = k.last < r.first || r.last < k.first;
      fits = fits && !(k == r) && (disjoint || k.contains(r));
    }
    if (fits) out.push_back(r);
  }
  return out;
}

// Rotor's optimal persistent schedule on the model's chain (chain_dp.h, model_chain.h), realised
// as nested checkpoint regions (rotor_regions.h) on top of `base` (a micro-batch, offloaded ops:
// an offloaded op a region takes in is recomputed instead, set_checkpoints) and judged by
// re-simulation like every candidate. The chain counts the stages' activations and their
// gradients in the base's run: the DP gets the budget less what the base holds besides them (its
// peak less the chain's store-all peak), lowered by the overshoot until the re-simulated plan
// fits. No result (peak -1) when the base's micro-batch graph cuts into other stages.
StrategyResult rotor_checkpoint(const std::string& name, PlanContext& ctx, const std::vector<Stage>& stages,
                                const Candidate& base, const Evaluation& base_eval) {
  StrategyResult best;
  best.name = name;
  best.eval.peak_bytes = -1;
  // The stages with the base's boundary bytes (the same cuts: they depend on counts, not sizes).
  std::vector<Stage> own = base.micro_batch == 0 ? stages : chain_stages(ctx.graph(base.micro_batch));
  if (own.size() != stages.size()) return best;
  for (size_t k = 0; k < own.size(); ++k) {
    if (own[k].first != stages[k].first || own[k].last != stages[k].last) return best;
  }
  const Chain chain = model_chain(ctx, own, base);
  int64_t dp_budget = ctx.budget_bytes() - (base_eval.peak_bytes - store_all_peak(chain));
  for (int attempt = 0; attempt < 8 && dp_budget > 0; ++attempt) {
    Result<ChainPlan> cp = solve_chain(chain, dp_budget);
    if (!cp.ok() || !cp.value().feasible) break;
    std::vector<ChainOp> schedule;
    for (const std::string& token : cp.value().schedule) schedule.push_back(parse_op_token(token));
    Candidate c = base;
    set_checkpoints(c, nested_to_ops(ctx.graph(0), own, rotor_regions(schedule)));
    const std::vector<CheckpointSegment>& rs = c.plan.checkpoints;
    size_t inner = 0;  // regions inside another (sorted outer first: the one just before, or one of its enclosers)
    for (size_t i = 0; i < rs.size(); ++i) {
      inner += static_cast<size_t>(std::any_of(rs.begin(), rs.begin() + static_cast<std::ptrdiff_t>(i), [&](const CheckpointSegment& o) { return o.contains(rs[i]); }));
    }
    StrategyResult r = evaluated(name, ctx, c, fmt::format("{} regions, {} nested (Rotor)", rs.size(), inner));
    if (best.eval.peak_bytes < 0 || better(r.eval, best.eval)) best = r;
    if (r.eval.feasible) break;
    dp_budget -= std::max<int64_t>(r.eval.peak_bytes - ctx.budget_bytes(), dp_budget / 100 + 1);
  }
  return best;
}

// The segments on `base` (checkpoint_on), or Rotor's nested regions on it where they re-simulate
// faster (or fit where the segments do not); the note then gives the segments' step time.
StrategyResult segments_or_nested(const std::string& name, PlanContext& ctx, const std::vector<Stage>& stages,
                                  const Candidate& base, const Evaluation& base_eval) {
  StrategyResult segments = checkpoint_on(name, ctx, stages, base, base_eval);
  if (base_eval.feasible) return segments;
  StrategyResult nested = rotor_checkpoint(name, ctx, stages, base, base_eval);
  if (nested.eval.peak_bytes >= 0 && better(nested.eval, segments.eval)) {
    nested.note += segments.eval.feasible ? fmt::format("; single-level segments: {:.1f} ms", segments.eval.time.total_ms)
                                          : "; single-level segments do not fit";
    return nested;
  }
  return segments;
}

// Ops whose nodes keep activations that offloading would move, with the bytes and the compute
// their copies can hide behind (the op's forward for the copy out, the next backward for the
// copy in).
struct OffloadChoice {
  OpId op;
  int64_t bytes;
  double exposed_ms;  // copy time not hidden by compute (estimate)
};

std::vector<OffloadChoice> offload_choices(PlanContext& ctx, const std::vector<OpId>& ops) {
  Candidate all;
  all.plan.offload = ops;
  Program p = ctx.program(all);
  const Graph& g = ctx.graph(0);
  std::vector<int64_t> bytes(g.ops.size(), 0);
  for (const Transfer& t : p.transfers) {
    if (t.to_host && t.op != kNone && p.steps[static_cast<size_t>(t.deadline_step)].iteration == 1) bytes[static_cast<size_t>(t.op)] += t.bytes;
  }
  std::vector<OffloadChoice> out;
  for (OpId o : ops) {
    if (bytes[static_cast<size_t>(o)] == 0) continue;
    OpCost c = ctx.cost().op_cost(g, g.op(o));
    const double copy = ctx.cost().transfer_ms(bytes[static_cast<size_t>(o)]);
    const double exposed = std::max(0.0, copy - c.forward_ms) + std::max(0.0, copy - c.backward_ms);
    out.push_back({o, bytes[static_cast<size_t>(o)], exposed});
  }
  // Hidden copies first (largest first), then by exposed time per byte moved.
  std::stable_sort(out.begin(), out.end(), [](const OffloadChoice& a, const OffloadChoice& b) {
    const double ra = a.exposed_ms / static_cast<double>(a.bytes), rb = b.exposed_ms / static_cast<double>(b.bytes);
    if (ra != rb) return ra < rb;
    return a.bytes > b.bytes;
  });
  return out;
}

std::vector<OpId> model_ops(const Graph& g, const std::function<bool(const Op&)>& pick) {
  std::vector<OpId> out;
  for (const Op& op : g.ops) {
    if (op.stage == OpStage::Model && pick(op)) out.push_back(op.id);
  }
  return out;
}

}  // namespace

namespace {

// ---- When a strategy applies ("" = it does; otherwise why not, shown as its row's note) ----

std::string always(PlanContext&, const std::vector<Stage>&) { return ""; }

std::string training(PlanContext& ctx, const std::vector<Stage>&) {
  return ctx.options().mode == RunMode::Training ? "" : "inference keeps no activations for a backward";
}

std::string training_with_stages(PlanContext& ctx, const std::vector<Stage>& stages) {
  std::string why = training(ctx, stages);
  if (why.empty() && stages.size() < 2) why = "fewer than two stages";
  return why;
}

std::string training_with_stages_and_batch(PlanContext& ctx, const std::vector<Stage>& stages) {
  std::string why = training_with_stages(ctx, stages);
  if (why.empty() && ctx.options().batch < 2) why = "batch 1 cannot be split";
  return why;
}

std::string training_on_cuda(PlanContext& ctx, const std::vector<Stage>& stages) {
  std::string why = training(ctx, stages);
  if (why.empty() && ctx.options().device != "cuda") why = "cuDNN workspaces are a CUDA matter";
  return why;
}

// ---- The searches ---------------------------------------------------------------------------

StrategyResult search_accumulate(const std::string& name, PlanContext& ctx, const std::vector<Stage>&, const Evaluation&) {
  const Graph& g = ctx.graph(0);
  const int64_t batch = ctx.options().batch;
  // Batch norm normalizes over each micro-batch: accumulation keeps the effective batch of the
  // gradient, not the statistics.
  const bool has_bn = std::any_of(g.ops.begin(), g.ops.end(), [](const Op& op) { return op.kind == OpKind::BatchNorm2d && op.attrs.training; });
  const std::string bn_note = has_bn ? "; batch-norm statistics per micro-batch" : "";
  StrategyResult best;
  best.name = name;
  best.eval.peak_bytes = -1;
  for (int64_t m = batch - 1; m >= 1; --m) {
    if (batch % m != 0) continue;
    Candidate c;
    c.micro_batch = m;
    StrategyResult r = evaluated(name, ctx, c, "micro-batch " + std::to_string(m) + " x " + std::to_string(batch / m) + bn_note);
    if (best.eval.peak_bytes < 0 || better(r.eval, best.eval)) best = r;
    if (r.eval.feasible) break;  // the largest fitting micro-batch is the fastest
  }
  if (best.eval.peak_bytes < 0) return not_applicable(name, "batch 1 cannot be split");
  return best;
}

StrategyResult search_accumulate_checkpoint(const std::string& name, PlanContext& ctx, const std::vector<Stage>& stages, const Evaluation&) {
  // Smaller micro-batches cost launches, checkpointing costs recomputation: the optimal
  // segments, or Rotor's nested regions where they re-simulate faster, at each micro-batch that
  // divides the batch (largest first, at most 4, until one fits without segments), fastest wins.
  const int64_t batch = ctx.options().batch;
  StrategyResult best;
  best.eval.peak_bytes = -1;
  int tried = 0;
  for (int64_t m = batch / 2; m >= 1 && tried < 4; --m) {
    if (batch % m != 0) continue;
    ++tried;
    Candidate base;
    base.micro_batch = m;
    StrategyResult r = segments_or_nested(name, ctx, stages, base, ctx.evaluate(base));
    r.note = "micro-batch " + std::to_string(m) + " x " + std::to_string(batch / m) + ", " + r.note;
    if (best.eval.peak_bytes < 0 || better(r.eval, best.eval)) best = r;
    // Fitting without segments: smaller micro-batches only add launches.
    if (r.eval.feasible && r.candidate.plan.checkpoints.empty()) break;
  }
  return best;
}

StrategyResult search_sqrt(const std::string& name, PlanContext& ctx, const std::vector<Stage>& stages, const Evaluation&) {
  std::vector<SegmentRange> seg = sqrt_segments(static_cast<int>(stages.size()));
  Candidate c;
  c.plan.checkpoints = to_ops(ctx.graph(0), stages, seg);
  return evaluated(name, ctx, c, std::to_string(seg.size()) + " of " + std::to_string(stages.size()) + " stages' segments");
}

StrategyResult search_checkpoint(const std::string& name, PlanContext& ctx, const std::vector<Stage>& stages, const Evaluation& baseline) {
  // Never slower than the single-level segments (segments_or_nested).
  return segments_or_nested(name, ctx, stages, Candidate{}, baseline);
}

StrategyResult search_vdnn(const std::string& name, PlanContext& ctx, bool convolutions_only) {
  Candidate c;
  c.plan.offload = model_ops(ctx.graph(0), [&](const Op& op) { return !convolutions_only || is_convolution_kind(op.kind); });
  if (c.plan.offload.empty()) return not_applicable(name, "no convolutions");
  return evaluated(name, ctx, c, std::to_string(c.plan.offload.size()) + " layers offloaded");
}

StrategyResult search_vdnn_all(const std::string& name, PlanContext& ctx, const std::vector<Stage>&, const Evaluation&) {
  return search_vdnn(name, ctx, false);
}

StrategyResult search_vdnn_conv(const std::string& name, PlanContext& ctx, const std::vector<Stage>&, const Evaluation&) {
  return search_vdnn(name, ctx, true);
}

// The layers worth offloading, best first, and the candidate of the first k of them.
struct OffloadOrder {
  std::vector<OffloadChoice> choices;
  Candidate first(size_t k) const {
    Candidate c;
    for (size_t i = 0; i < k; ++i) c.plan.offload.push_back(choices[i].op);
    std::sort(c.plan.offload.begin(), c.plan.offload.end());
    return c;
  }
};

StrategyResult search_offload(const std::string& name, PlanContext& ctx, const std::vector<Stage>&, const Evaluation&) {
  OffloadOrder order{offload_choices(ctx, model_ops(ctx.graph(0), [](const Op&) { return true; }))};
  if (order.choices.empty()) return not_applicable(name, "no saved activations to offload");
  return smallest_fitting_prefix(name, ctx, order.choices.size(), [&](size_t k) { return order.first(k); }, "layers offloaded");
}

StrategyResult search_offload_checkpoint(const std::string& name, PlanContext& ctx, const std::vector<Stage>& stages, const Evaluation&) {
  OffloadOrder order{offload_choices(ctx, model_ops(ctx.graph(0), [](const Op&) { return true; }))};
  if (order.choices.empty()) return not_applicable(name, "no saved activations to offload");
  size_t hidden = 0;
  while (hidden < order.choices.size() && order.choices[hidden].exposed_ms == 0) ++hidden;
  // Copies estimated as hidden one by one still queue on one copy engine; try the hidden set,
  // halves of it and none (= checkpoint alone), each with the segments or Rotor's nested regions
  // over what remains (whichever re-simulates faster), and keep the fastest, so the combination
  // is never worse than either part.
  StrategyResult best;
  best.eval.peak_bytes = -1;
  for (size_t k : {hidden, hidden / 2, hidden / 4, size_t{0}}) {
    Candidate base = order.first(k);
    StrategyResult r = segments_or_nested(name, ctx, stages, base, ctx.evaluate(base));
    r.note = std::to_string(k) + " offloaded layers, " + r.note;
    if (best.eval.peak_bytes < 0 || better(r.eval, best.eval)) best = r;
    if (k == 0) break;
  }
  return best;
}

StrategyResult search_conv(const std::string& name, PlanContext& ctx, const std::vector<Stage>&, const Evaluation&) {
  const Graph& g = ctx.graph(0);
  Program p = ctx.program(Candidate{});
  std::vector<int64_t> ws(g.ops.size(), 0);
  for (const Buffer& b : p.buffers) {
    if (b.category == Category::Workspaces && b.op != kNone && is_convolution_kind(g.op(b.op).kind)) ws[static_cast<size_t>(b.op)] = std::max(ws[static_cast<size_t>(b.op)], b.bytes);
  }
  std::vector<OpId> convs = model_ops(g, [&](const Op& op) { return ws[static_cast<size_t>(op.id)] > 0; });
  if (convs.empty()) return not_applicable(name, "no convolution borrows a workspace");
  std::stable_sort(convs.begin(), convs.end(), [&](OpId a, OpId b) { return ws[static_cast<size_t>(a)] > ws[static_cast<size_t>(b)]; });
  auto make = [&](size_t k) {
    Candidate c;
    c.plan.no_conv_workspace.assign(convs.begin(), convs.begin() + static_cast<std::ptrdiff_t>(k));
    std::sort(c.plan.no_conv_workspace.begin(), c.plan.no_conv_workspace.end());
    return c;
  };
  return smallest_fitting_prefix(name, ctx, convs.size(), make, "convolutions without workspace");
}

}  // namespace

const std::vector<Strategy>& strategy_registry() {
  // One line per strategy, in the order the comparison table lists them.
  static const std::vector<Strategy> registry = {
      {"accumulate", always, search_accumulate},
      {"sqrt", training_with_stages, search_sqrt},
      {"checkpoint", training_with_stages, search_checkpoint},
      {"accumulate+checkpoint", training_with_stages_and_batch, search_accumulate_checkpoint},
      {"offload", training, search_offload},
      {"offload+checkpoint", training_with_stages, search_offload_checkpoint},
      {"vdnn-all", training, search_vdnn_all},
      {"vdnn-conv", training, search_vdnn_conv},
      {"conv", training_on_cuda, search_conv},
  };
  return registry;
}

const std::vector<std::string>& strategy_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Strategy& s : strategy_registry()) out.push_back(s.name);
    return out;
  }();
  return names;
}

StrategyResult run_strategy(const std::string& name, PlanContext& ctx, const std::vector<Stage>& stages,
                            const Evaluation& baseline) {
  const std::vector<Strategy>& registry = strategy_registry();
  auto it = std::find_if(registry.begin(), registry.end(), [&](const Strategy& s) { return s.name == name; });
  HEADROOM_CHECK(it != registry.end(), "unknown strategy " + name);
  const std::string why_not = it->applies(ctx, stages);
  if (!why_not.empty()) return not_applicable(name, why_not);
  return it->search(name, ctx, stages, baseline);
}

}  // namespace headroom
