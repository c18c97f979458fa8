#include "schedule/interpreter.h"

#include <algorithm>
#include <string>
#include <vector>

#include "util/checked.h"
#include "util/error.h"

namespace headroom::schedule_detail {

Interpreter::Interpreter(const Graph& g, const ScheduleOptions& o) : g_(g), o_(o) {
  no_workspace_device_ = o.device;
  no_workspace_device_.conv_workspace = ConvWorkspace::None;
  const MemoryPlan& plan = o.plan;
  segment_of_.assign(g.ops.size(), -1);
  offload_op_.assign(g.ops.size(), false);
  no_workspace_op_.assign(g.ops.size(), false);
  auto valid_op = [&](OpId id) { return id >= 0 && static_cast<size_t>(id) < g.ops.size(); };
  for (OpId id : plan.offload) {
    HEADROOM_CHECK(valid_op(id), "offload of an unknown op");
    offload_op_[static_cast<size_t>(id)] = true;
  }
  for (OpId id : plan.no_conv_workspace) {
    HEADROOM_CHECK(valid_op(id), "workspace choice for an unknown op");
    no_workspace_op_[static_cast<size_t>(id)] = true;
  }
  OpId previous_last = kNone;
  for (const CheckpointSegment& seg : plan.checkpoints) {
    HEADROOM_CHECK(valid_op(seg.first) && valid_op(seg.last) && seg.first <= seg.last && seg.first > previous_last,
                   "checkpoint segments must be valid, sorted and disjoint");
    previous_last = seg.last;
    const int s = static_cast<int>(segments_.size());
    segments_.push_back(seg);
    std::vector<TensorId> inputs, outputs;
    for (OpId o = seg.first; o <= seg.last; ++o) {
      HEADROOM_CHECK(g.op(o).stage == OpStage::Model, "a checkpoint segment holds a loss op: " + g.op(o).name);
      segment_of_[static_cast<size_t>(o)] = s;
      for (TensorId in : g.op(o).inputs) {
        OpId made = g.tensor(in).producer;
        if (made != kNone && made < seg.first && std::find(inputs.begin(), inputs.end(), in) == inputs.end()) inputs.push_back(in);
      }
    }
    // Outputs: made inside, read after the segment, returned, or held past it.
    std::vector<bool> used_after(g.tensors.size(), false);
    for (const Op& op : g.ops) {
      if (op.id <= seg.last) continue;
      for (TensorId in : op.inputs) used_after[static_cast<size_t>(in)] = true;
    }
    for (TensorId t : g.outputs) used_after[static_cast<size_t>(t)] = true;
    for (const Hold& h : g.holds) {
      if (h.until > seg.last) used_after[static_cast<size_t>(h.tensor)] = true;
    }
    for (OpId o = seg.first; o <= seg.last; ++o) {
      for (TensorId out : g.op(o).outputs) {
        if (used_after[static_cast<size_t>(out)]) outputs.push_back(out);
      }
    }
    segment_inputs_.push_back(std::move(inputs));
    segment_outputs_.push_back(std::move(outputs));
  }
  init_sharding();
}

void Interpreter::offload_ready() {
  const int32_t step = static_cast<int32_t>(p_.steps.size()) - 1;
  std::vector<OffloadCandidate> keep;
  for (const OffloadCandidate& c : offload_candidates_) {
    const size_t b = static_cast<size_t>(c.buffer);
    if (refs_[b] == 0 || offloaded_[b]) continue;
    if (refs_[b] != saved_refs_[b]) {
      keep.push_back(c);
      continue;
    }
    offloaded_[b] = true;
    p_.events.push_back({Event::Kind::Free, Category::Weights, c.buffer});
    p_.transfers.push_back({c.buffer, p_.buffers[b].bytes, c.op, true, c.produced_step, step});
    offload_op_of_[b] = c.op;
  }
  offload_candidates_ = std::move(keep);
}

void Interpreter::prefetch(BufferId b) {
  const size_t i = static_cast<size_t>(b);
  if (!offloaded_[i] || replacement_[i] != kNone) return;
  // Copies, not a reference: new_buffer() grows p_.buffers and may move it.
  const int64_t bytes = p_.buffers[i].bytes;
  BufferId copy = new_buffer(bytes, Category::SavedActivations, p_.buffers[i].name + " (prefetched)",
                             p_.buffers[i].op);
  alloc(copy);
  ref(copy, refs_[i]);
  saved_refs_[static_cast<size_t>(copy)] = refs_[i];
  refs_[i] = 0;
  saved_refs_[i] = 0;
  replacement_[i] = copy;
  pending_prefetch_[i] = static_cast<int32_t>(p_.transfers.size());
  const int32_t step = static_cast<int32_t>(p_.steps.size()) - 1;
  p_.transfers.push_back({copy, bytes, offload_op_of_[i], false, step, -1});
}

void Interpreter::need_on_device(const std::vector<BufferId>& saved) {
  const int32_t step = static_cast<int32_t>(p_.steps.size()) - 1;
  for (BufferId b : saved) {
    const size_t i = static_cast<size_t>(b);
    if (!offloaded_[i]) continue;
    prefetch(b);
    if (pending_prefetch_[i] >= 0) {
      p_.transfers[static_cast<size_t>(pending_prefetch_[i])].deadline_step = step;
      pending_prefetch_[i] = -1;
    }
  }
}

void Interpreter::release_saved(BufferId b) {
  const size_t i = static_cast<size_t>(b);
  if (replacement_[i] != kNone) return release_saved(replacement_[i]);
  --saved_refs_[i];
  if (offloaded_[i]) {
    --refs_[i];  // the host copy is dropped; nothing on the device
    return;
  }
  unref(b);
}

void Interpreter::recompute(int s, int iteration, int micro) {
  const CheckpointSegment& seg = segments_[static_cast<size_t>(s)];
  std::vector<int> uses(g_.tensors.size(), 0);
  std::vector<std::vector<TensorId>> hold_release(g_.ops.size());
  for (OpId o = seg.first; o <= seg.last; ++o) {
    for (TensorId in : g_.op(o).inputs) ++uses[static_cast<size_t>(in)];
  }
  for (const Hold& h : g_.holds) {
    OpId made = g_.tensor(h.tensor).producer;
    if (h.until < seg.first || made == kNone || made < seg.first || made > seg.last) continue;
    // A local of the re-run function lives until that function returns.
    ++uses[static_cast<size_t>(h.tensor)];
    hold_release[static_cast<size_t>(std::min(h.until, seg.last))].push_back(h.tensor);
  }
  // The recomputed outputs are held by checkpoint's backward until its nested backward returns.
  for (TensorId t : segment_outputs_[static_cast<size_t>(s)]) ++uses[static_cast<size_t>(t)];
  // Tensors from outside the segment (its saved inputs, weights, model inputs) already have
  // buffers; each read by a recomputed op is a reference.
  for (size_t t = 0; t < uses.size(); ++t) {
    if (uses[t] == 0) continue;
    OpId made = g_.tensors[t].producer;
    if (made != kNone && made >= seg.first && made <= seg.last) continue;
    BufferId b = on_device(buf_of_[t]);
    buf_of_[t] = b;
    ref(b, uses[t]);
  }
  std::vector<bool> saved_storage(g_.tensors.size(), false);
  for (OpId o = seg.first; o <= seg.last; ++o) mark_saved(g_.op(o), grad_plans_[static_cast<size_t>(o)], saved_storage);
  // The re-run makes new buffers for the segment's tensors; the forward's (still referenced
  // as returned outputs or by later ops' nodes) stay what the rest of the run refers to.
  std::vector<std::pair<TensorId, BufferId>> forward_buffers;
  for (OpId o = seg.first; o <= seg.last; ++o) {
    for (TensorId t : g_.op(o).outputs) forward_buffers.push_back({t, buf_of_[static_cast<size_t>(t)]});
  }
  // CheckpointFunction.backward(ctx, *args) keeps its incoming gradients `args` (and passes them
  // to torch.autograd.backward as grad_tensors) until it returns (checkpoint.py:111,157 in
  // 1.13): the gradient of the segment's output outlives the node that consumes it.
  for (TensorId t : segment_outputs_[static_cast<size_t>(s)]) {
    const GradValue& gv = grad_[static_cast<size_t>(leaf(t))];
    if (gv.buffer == kNone) continue;
    ref(gv.buffer);
    segment_incoming_[static_cast<size_t>(s)].push_back(gv.buffer);
  }
  // `with torch.random.fork_rng(...)` around the re-run (checkpoint.py:132) takes
  // torch.get_rng_state() on entry and drops it on exit, before the nested backward.
  BufferId fork_rng = kNone;
  for (OpId o = seg.first; o <= seg.last; ++o) {
    const Op& op = g_.op(o);
    begin_step(Phase::Backward, iteration, micro, op.id, "recompute " + op.name);
    p_.steps.back().recompute = true;
    if (o == seg.first && o_.device.checkpoint_rng_state_bytes > 0) {
      fork_rng = temp(o_.device.checkpoint_rng_state_bytes, "fork_rng RNG state (" + op.name + ")");
    }
    execute(op, grad_plans_[static_cast<size_t>(o)], uses, saved_storage, /*may_offload=*/false);
    for (TensorId t : hold_release[static_cast<size_t>(o)]) unref(buf_of_[static_cast<size_t>(t)]);
    release_fresh();
    if (o == seg.last && fork_rng != kNone) unref(fork_rng);
    end_step();
  }
  for (TensorId t : segment_outputs_[static_cast<size_t>(s)]) segment_held_[static_cast<size_t>(s)].push_back(buf_of_[static_cast<size_t>(t)]);
  for (const auto& [t, b] : forward_buffers) buf_of_[static_cast<size_t>(t)] = b;
  segment_state_[static_cast<size_t>(s)] = SegmentState::Recomputed;
}

void Interpreter::finish_segment(int s, int iteration, int micro) {
  const size_t si = static_cast<size_t>(s);
  for (BufferId b : segment_held_[si]) unref(b);
  segment_held_[si].clear();
  for (BufferId b : segment_incoming_[si]) unref(b);
  segment_incoming_[si].clear();
  for (BufferId b : segment_saved_[si]) release_saved(b);
  segment_saved_[si].clear();
  segment_state_[si] = SegmentState::Done;
  std::vector<DetachedInput> inputs = std::move(segment_input_grads_[si]);
  segment_input_grads_[si].clear();
  for (DetachedInput& d : inputs) {
    if (d.grad.buffer != kNone) deliver(d.tensor, d.grad, iteration, micro);
  }
}

bool Interpreter::deliver_to_detached_input(TensorId t, GradValue g) {
  if (running_segment_ < 0) return false;
  for (DetachedInput& d : segment_input_grads_[static_cast<size_t>(running_segment_)]) {
    if (d.tensor != t) continue;
    d.grad = d.grad.buffer == kNone ? g : sum_gradients(t, d.grad, g);
    if (--d.pending == 0) d.grad = accumulate_into_grad(t, d.grad);
    return true;
  }
  return false;
}

}  // namespace headroom::schedule_detail
