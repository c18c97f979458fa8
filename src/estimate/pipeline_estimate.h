// The estimate of a pipeline-parallel layout (--pipeline-parallel P): every stage's rank program
// is built (schedule/pipeline_split.h for its graph, schedule/pipeline_schedule.h for the order
// of its micro-batches) and replayed on the same interpreter and allocator as any estimate; the
// stage with the highest peak is the one reported (docs/distributed.md). Each stage is
// simulated: no formula stands in for one (stage 0 usually peaks, holding the embedding and the
// most micro-batches in flight under 1F1B, but the last stage's logits can outweigh it).
//
// Invariants: stage_peak_bytes[i] is stage i's simulated peak; `stage` is the first stage with the
// largest one; graph/program/sim are that stage's.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include "estimate/parallel.h"
#include "schedule/build_program.h"
#include "schedule/held_state.h"
#include "schedule/pipeline_split.h"
#include "sim/simulate.h"

namespace headroom {

struct PipelineStages {
  std::shared_ptr<const Graph> graph;  // the reported stage's (shared with a RankGraphCache)
  Program program;
  SimResult sim;
  int stage = 0;
  int in_flight_micro_batches = 0;  // the reported stage's, from its schedule
  int layers_per_stage = 0;
  std::vector<int64_t> stage_peak_bytes;
  MemoryPlan plan;  // the reported stage's checkpoints, on its graph (schedule/pipeline_plan.h)
  std::optional<ModelStateBytes> model_state;  // the reported stage's, where StageSearch::model_state_limit had it read
  // StageSearch::live_limit > 0 and the reported stage's live peak is over it: the stages after it were not
  // built, so that peak is a lower bound of the layout's (simulate_pipeline_stages).
  bool live_over = false;
};

// The block cuts of model graphs (pipeline_cut), each made once for every thread that asks: the
// layout search's families share model graphs (plan/evaluate.h LayoutGraphs). Keyed by the
// graph's address: it must outlive the cuts and not change. A cut is made by the first thread
// that asks for it, the others wait for it.
class PipelineCuts {
 public:
  const PipelineCut& get(const Graph& model);

 private:
  struct Entry {
    std::mutex making;  // held while the cut is made
    std::optional<PipelineCut> cut;
  };
  std::mutex mutex_;  // guards entries_ (not the entries' making)
  std::map<const Graph*, std::shared_ptr<Entry>> entries_;
};

// The rank graphs cut from model graphs, kept for later evaluations that cut the same ranks (the
// layout search's candidates at one micro-batch: each recompute level, the probe and the fit).
// Keyed by the model graph's address: it must outlive the cache and not change. One thread;
// `shared` (may be null: cuts of its own) must outlive it.
class RankGraphCache {
 public:
  explicit RankGraphCache(PipelineCuts* shared = nullptr) : shared_(shared) {}
  std::shared_ptr<const RankGraph> get(const Graph& model, int stages, int virtual_stages, int rank);
  const PipelineCut& cut(const Graph& model);

 private:
  PipelineCuts* shared_;
  std::map<const Graph*, PipelineCut> cuts_;
  std::map<std::tuple<const Graph*, int, int, int>, std::shared_ptr<const RankGraph>> ranks_;
};

// InputError for a layout the model or the batch does not allow: see check in the .cc (the
// micro-batch rules of each schedule, the layer split, offloading not modelled with it).
// base.plan's checkpoint regions are the model graph's: each stage runs those of its own layers
// (schedule/pipeline_plan.h); a region the split cuts is an InputError.
// `micro_batches` is --grad-accum (the m of the schedules); `micro_batch_given` whether
// --micro-batch was written.
// `every_stage` false (the layout search): stages 0, 1 and P - 1 only. A middle stage i >= 2 runs
// the same graph as stage 1 (the same number of identical blocks, a received and a sent hidden
// state) with fewer micro-batches in flight (1F1B: min(P - i, m) <= min(P - 1, m); GPipe and
// interleaved: as many), so each of its steps finds at most as many stashed forwards live as a
// step of stage 1 doing the same work: its live peak is at most stage 1's, and stage 1 is
// reported first on a tie. stage_peak_bytes then lists the stages simulated only.
// `ranks`: where the stages' rank graphs are taken from and kept (nullptr: cut afresh).
// `search`: what the layout search lets the stages skip (below; all off for an estimate).
struct StageSearch {
  // > 0: a stage whose program holds more model state than that in its last optimizer step
  // (schedule/held_state.h) is reported at once, unsimulated (sim empty; stage_peak_bytes the
  // stages before it), the stages after it not built: every candidate then exceeds the limit.
  int64_t model_state_limit = 0;
  // > 0 (only whether the layout fits is read): a stage whose live peak is over it is reported at
  // once (live_over), the stages after it not built: the layout's peak is at least that stage's,
  // and any device total at least its live peak.
  int64_t live_limit = 0;
  // Each stage's sim holds its live peak's bytes only (live_peak_bytes; no step, categories or
  // iterations): what picks the reported stage, and all the search reads of it.
  bool peak_only = false;
};
PipelineStages simulate_pipeline_stages(const Graph& model, const ScheduleOptions& base, const ParallelOptions& p, int micro_batches,
                                        bool micro_batch_given, bool every_stage = true, RankGraphCache* ranks = nullptr,
                                        const StageSearch& search = {});

// One stage's rank program under `kind` with `micro_batches` micro-batches per step (no checks
// beyond the split's): for tests and tools that look at a stage other than the peak one.
struct PipelineStageRun {
  RankGraph rank;
  Program program;
  int in_flight_micro_batches = 0;  // (chunk, micro-batch) forwards in flight at most
  MemoryPlan plan;                  // base.plan on the rank's graph
};
PipelineStageRun pipeline_stage_program(const Graph& model, const ScheduleOptions& base, PipelineScheduleKind kind, int stages, int stage,
                                        int micro_batches, int virtual_stages = 1);

// Copies the pipeline fields into the per-GPU summary.
void add_pipeline_summary(const PipelineStages& s, PerGpu& g);

}  // namespace headroom
