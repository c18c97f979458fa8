// Non-reentrant checkpoint regions (MemoryPlan::checkpoint_impl NonReentrant): PyTorch 1.13's
// torch.utils.checkpoint.checkpoint(..., use_reentrant=False), i.e. _checkpoint_without_reentrant
// (torch/utils/checkpoint.py:326-423 in 1.13), replayed by the interpreter.
//
//   forward   fwd_cpu_state = get_rng_state(); `with saved_tensors_hooks(pack, unpack)`: the
//             function runs with grad, every node is recorded, and pack returns a Holder for
//             each tensor a node saves, so nothing is kept. The unpack closure keeps `args`
//             and fwd_cpu_state for as long as a SavedVariable holds the hooks.
//   backward  the first node of the region to unpack (the first own node with saves the
//             engine runs) re-runs the whole function under fork_rng and enable_grad with
//             inner_pack, which puts each saved tensor (detached: the same storage) in
//             `storage` under its Holder; the re-run's return value and graph go when unpack
//             returns. A stored tensor goes when its node releases its variables (the Holder
//             dies with the SavedVariable, the WeakKeyDictionary drops the entry), and the
//             closure when the last such node has.
//   nesting   only the innermost hooks pack (the saved_tensors_hooks stack), so a region's
//             nodes are its own ops' and every region has its own closure: an inner call keeps
//             its arguments and RNG state from the first forward; an outer re-run calls it
//             again (with fresh hooks whose closure dies with the re-run's graph), and its own
//             re-run comes when the backward reaches its nodes.
//
// Gradients need no routing: the region's nodes are the graph's nodes.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "schedule/interpreter.h"

namespace headroom::schedule_detail {

bool Interpreter::hooked_saves(OpId o) const {
  const size_t i = static_cast<size_t>(o);
  return segment_of_[i] >= 0 && grad_plans_[i].creates_node && !grad_plans_[i].saved.empty();
}

void Interpreter::enter_hooked_call(int r, std::vector<BufferId>* rerun_graph, const std::string& where) {
  const size_t ri = static_cast<size_t>(r);
  const bool keeps = region_hooks_save_[ri];
  std::vector<BufferId> held;
  // `fwd_cpu_state = torch.get_rng_state()` (checkpoint.py:344), before the function runs.
  BufferId rng = kNone;
  if (o_.device.checkpoint_rng_state_bytes > 0) {
    rng = new_buffer(o_.device.checkpoint_rng_state_bytes, keeps ? Category::SavedActivations : Category::Temporaries,
                     buffer_name("checkpoint RNG state (", where, ")"), segments_[ri].first);
    alloc(rng);
    ref(rng);
  }
  std::vector<BufferId> inputs;
  for (TensorId t : segment_inputs_[ri]) {
    BufferId b = buf_of_[static_cast<size_t>(t)];
    ref(b);
    inputs.push_back(b);
  }
  if (!keeps || rerun_graph != nullptr) {
    // No hook outlives the call (its closure goes when it returns), or the hooks belong to a
    // re-run's graph (its closure goes when that unpack returns).
    std::vector<BufferId>& to = keeps ? *rerun_graph : call_held_[ri];
    to.insert(to.end(), inputs.begin(), inputs.end());
    if (rng != kNone) to.push_back(rng);
    return;
  }
  // The forward's closure: kept, like a checkpoint node's saved inputs, until its hooks go.
  for (BufferId b : inputs) ++saved_refs_[static_cast<size_t>(b)];
  closure_inputs_[ri] = std::move(inputs);
  closure_rng_[ri] = rng;
}

void Interpreter::rerun_hooked(int s, int iteration, int micro) {
  const size_t si = static_cast<size_t>(s);
  const CheckpointSegment& seg = segments_[si];
  // The re-run reads `args`, the forward's tensors the closure kept; every tensor it writes gets
  // its forward buffer back afterwards. The region's own nodes save into storage; nested calls
  // pack into their own (re-run) hooks.
  Rerun rr = begin_rerun(s, closure_inputs_[si]);
  auto own = [&](OpId o) { return segment_of_[static_cast<size_t>(o)] == s; };
  std::vector<BufferId> rerun_graph;  // nested calls' closures, referenced from the re-run's graph
  BufferId fork_rng = kNone;
  for (OpId o = seg.first; o <= seg.last; ++o) {
    const Op& op = g_.op(o);
    if (BufferId b = begin_rerun_step(s, o, iteration, micro); b != kNone) fork_rng = b;
    for (int r : starting_[static_cast<size_t>(o)]) {
      if (r <= s) continue;  // s itself, or a region enclosing it
      enter_hooked_call(r, &rerun_graph, "recompute " + op.name);
    }
    const ForwardPlan& gp = grad_plans_[static_cast<size_t>(o)];
    const ForwardPlan fp = own(o) ? gp : hooked_plan(gp);
    execute(op, fp, rr.uses->uses, rr.saved_storage, /*may_offload=*/false);
    for (TensorId t : rr.uses->hold_release[static_cast<size_t>(o)]) unref(buf_of_[static_cast<size_t>(t)]);
    leave_calls(o);
    release_fresh();
    if (o == seg.last) {
      // unpack returns: fork_rng's state, then `_unused` and with it the re-run's graph.
      if (fork_rng != kNone) unref(fork_rng);
      for (TensorId t : segment_outputs_[si]) unref(buf_of_[static_cast<size_t>(t)]);
      for (BufferId b : rerun_graph) unref(b);
    }
    end_step();
  }
  end_rerun(rr);
  segment_state_[si] = SegmentState::Recomputed;
}

void Interpreter::release_closure(int s) {
  const size_t si = static_cast<size_t>(s);
  for (BufferId b : closure_inputs_[si]) release_saved(b);
  closure_inputs_[si].clear();
  if (closure_rng_[si] != kNone) unref(closure_rng_[si]);
  closure_rng_[si] = kNone;
  segment_state_[si] = SegmentState::Done;
}

}  // namespace headroom::schedule_detail
