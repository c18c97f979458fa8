// One source of truth for what a plan costs: a candidate (memory plan + micro-batch) is turned
// into the training program by the same interpreter as `estimate`, replayed on the same heap
// model (PyTorch's caching allocator on CUDA, the exact heap on the CPU), and timed by the cost
// model. No strategy computes a plan's memory by a formula of its own.
//
// Invariants: the graph of each micro-batch size is built once and reused; evaluations are
// deterministic; peak_bytes is comparable with budget_bytes (both device totals on CUDA:
// context + NCCL + reserved; exact live bytes on the CPU).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "estimate/estimate.h"
#include "estimate/pipeline_estimate.h"
#include "cost/cost_model.h"
#include "schedule/memory_plan.h"

namespace headroom {

struct Candidate {
  MemoryPlan plan;
  int64_t micro_batch = 0;  // 0: the full batch
  // The caller reads of an infeasible candidate only that it does not fit (no message quotes its
  // peak): under answer_for_layout_search(), a pipeline's stages stop at the first whose live
  // peak alone is over the budget (Evaluation::peak_is_lower_bound).
  bool fit_only = false;
};

struct Evaluation {
  bool feasible = false;
  int64_t peak_bytes = 0;      // what is compared with the budget
  int64_t exact_peak_bytes = 0;  // live tensor bytes (torch.cuda.max_memory_allocated, unrounded)
  CategoryBytes exact_at_peak{};  // those bytes by category
  bool allocator_oom = false;  // the caching allocator ran out of the budget on the way
  // peak_bytes is a lower bound of the peak, over the budget (Candidate::fit_only): the candidate
  // does not fit, and no later stage was simulated.
  bool peak_is_lower_bound = false;
  // The parameters, gradients and optimizer states the program ends with, and the most of them
  // live in its last optimizer step with that step's own buffers (schedule/held_state.h): each the
  // same for every candidate of a layout (per pipeline stage), and no more than any's peak.
  int64_t held_bytes = 0;
  int64_t optimizer_step_bytes = 0;
  IterationTime time;          // one optimizer step (all micro-batches)
  int64_t micro_batch = 0;
  int micro_batches = 1;
  // The peak's moment, for reports.
  Phase peak_phase = Phase::Forward;
  std::string peak_op;
};

// The graphs of one run under several layouts, built once for all the contexts that share it
// (the layout search's families, on several threads). build_graph() reads the layout only for
// its tensor-parallel size and sequence parallelism, so a graph is keyed by those and the
// micro-batch. Invariant: every context given one LayoutGraphs runs the same options but their
// `parallel`; a graph is built by the first thread that asks for it, the others wait for it.
class LayoutGraphs {
 public:
  std::shared_ptr<const Graph> get(const EstimateOptions& options, int64_t batch);
  // The pipeline cuts of those graphs, made once for every context.
  PipelineCuts& cuts() { return cuts_; }

 private:
  struct Entry {
    std::mutex building;  // held while the graph is built: a second asker waits for it
    std::shared_ptr<const Graph> graph;
  };
  std::mutex mutex_;  // guards entries_ (not the entries' building)
  std::map<std::tuple<int64_t, bool, int64_t>, std::shared_ptr<Entry>> entries_;
  PipelineCuts cuts_;
};

class PlanContext {
 public:
  // `options`: the run (model, batch, optimizer, precision, device, GPU); `budget_bytes`: the
  // memory the plan must fit in, in the units of Evaluation::peak_bytes.
  PlanContext(EstimateOptions options, int64_t budget_bytes, CostModel cost);
  // Graphs from `shared` (see LayoutGraphs), which must outlive the context.
  PlanContext(EstimateOptions options, int64_t budget_bytes, CostModel cost, LayoutGraphs& shared);

  // A candidate evaluated before is answered from memory (a search may ask twice: the layout
  // search's pipeline probe is also the last size its fit tries), unless that answer's peak was a
  // lower bound and this caller is not fit_only; each call counts in evaluations().
  Evaluation evaluate(const Candidate& c);
  // The graph at a micro-batch size (0: the full batch), built once.
  const Graph& graph(int64_t micro_batch);
  // The program of a candidate (for stage statistics and reports).
  Program program(const Candidate& c);

  // From now on evaluations answer only what the layout search reads (plan/layout_fit.h):
  // feasible, peak_bytes, held_bytes, optimizer_step_bytes, and the time of a feasible
  // candidate. A candidate whose optimizer step holds more than the budget
  // (Evaluation::optimizer_step_bytes, at least held_bytes) is answered without any replay, its
  // peak_bytes those bytes (a lower bound); an infeasible one is not
  // timed; on a GPU the exact-heap replay is skipped (exact_peak_bytes, exact_at_peak, peak_phase
  // and peak_op stay empty; a pipeline's exact_peak_bytes is its reported stage's live peak,
  // StageSearch::peak_only).
  void answer_for_layout_search() { layout_search_ = true; }

  const EstimateOptions& options() const { return options_; }
  const CostModel& cost() const { return cost_; }
  int64_t budget_bytes() const { return budget_; }
  int evaluations() const { return evaluations_; }
  // The candidates simulated so far (those not answered from memory).
  int simulations() const { return static_cast<int>(evaluated_.size()) + resimulated_; }
  bool foreach() const { return schedule_.foreach; }

 private:
  // The candidate's program; without names (ScheduleOptions::names) where only its peaks and
  // times are read.
  Program build(const Candidate& c, bool names);
  Evaluation simulate_candidate(const Candidate& c);

  EstimateOptions options_;
  int64_t budget_;
  CostModel cost_;
  ScheduleOptions schedule_;
  LayoutGraphs* shared_ = nullptr;
  std::map<int64_t, std::shared_ptr<const Graph>> graphs_;
  RankGraphCache ranks_;  // a pipeline layout's stage graphs, cut from graphs_
  int evaluations_ = 0;
  int resimulated_ = 0;  // candidates simulated again for an exact peak (Candidate::fit_only)
  bool layout_search_ = false;
  std::vector<std::pair<Candidate, Evaluation>> evaluated_;  // in the order first asked
};

}  // namespace headroom
