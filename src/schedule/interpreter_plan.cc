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
  first_backward_plan_.assign(g.ops.size(), {});
  validate_plan(g, plan);  // InputError on a malformed plan, before anything is built
  for (OpId id : plan.offload) offload_op_[static_cast<size_t>(id)] = true;
  for (OpId id : plan.no_conv_workspace) no_workspace_op_[static_cast<size_t>(id)] = true;
  starting_.assign(g.ops.size(), {});
  // Per tensor: the last op that reads it and the last op a hold keeps it to (kNone: none), and
  // whether the model returns it; a segment's outputs are what is needed after its last op.
  // Found once for all segments (a scan per segment is quadratic in a model of many blocks).
  std::vector<OpId> last_read(plan.checkpoints.empty() ? 0 : g.tensors.size(), kNone);
  std::vector<bool> returned(last_read.size(), false);
  if (!plan.checkpoints.empty()) {
    for (const Op& op : g.ops) {
      for (TensorId in : op.inputs) last_read[static_cast<size_t>(in)] = std::max(last_read[static_cast<size_t>(in)], op.id);
    }
    for (const Hold& h : g.holds) last_read[static_cast<size_t>(h.tensor)] = std::max(last_read[static_cast<size_t>(h.tensor)], h.until);
    for (TensorId t : g.outputs) returned[static_cast<size_t>(t)] = true;
  }
  // Outer regions come first, so the innermost region of an op is the last to claim it.
  for (const CheckpointSegment& seg : plan.checkpoints) {
    const int s = static_cast<int>(segments_.size());
    int parent = -1;
    for (int q = s - 1; q >= 0; --q) {
      if (segments_[static_cast<size_t>(q)].contains(seg)) {
        parent = q;
        break;
      }
    }
    segments_.push_back(seg);
    parent_.push_back(parent);
    starting_[static_cast<size_t>(seg.first)].push_back(s);
    std::vector<TensorId> inputs, outputs;
    for (OpId o = seg.first; o <= seg.last; ++o) {
      segment_of_[static_cast<size_t>(o)] = s;
      for (TensorId in : g.op(o).inputs) {
        OpId made = g.tensor(in).producer;
        if (made != kNone && made < seg.first && std::find(inputs.begin(), inputs.end(), in) == inputs.end()) inputs.push_back(in);
      }
    }
    // Outputs: made inside, read after the segment, returned, or held past it.
    for (OpId o = seg.first; o <= seg.last; ++o) {
      for (TensorId out : g.op(o).outputs) {
        const size_t t = static_cast<size_t>(out);
        if ((last_read[t] != kNone && last_read[t] > seg.last) || returned[t]) outputs.push_back(out);
      }
    }
    segment_inputs_.push_back(std::move(inputs));
    segment_outputs_.push_back(std::move(outputs));
  }
  call_held_.assign(segments_.size(), {});
  rerun_uses_.resize(segments_.size());
  non_reentrant_ = plan.checkpoint_impl == CheckpointImpl::NonReentrant;
  region_graph_held_.assign(segments_.size(), {});
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
  BufferId copy = new_buffer(bytes, Category::SavedActivations, buffer_name(p_.buffers[i].name, " (prefetched)"),
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

void Interpreter::enter_call(int r, bool grad_call, int owner, const std::string& where) {
  const size_t ri = static_cast<size_t>(r);
  // CheckpointFunction.forward: `ctx.fwd_cpu_state = torch.get_rng_state()` (checkpoint.py:81
  // in 1.13), before the function runs. A ctx attribute, not a saved tensor: release_variables()
  // keeps it, so it lives as long as the node; a no_grad call's ctx dies when apply returns.
  BufferId rng = kNone;
  if (o_.device.checkpoint_rng_state_bytes > 0) {
    rng = new_buffer(o_.device.checkpoint_rng_state_bytes, grad_call ? Category::SavedActivations : Category::Temporaries,
                     buffer_name("checkpoint RNG state (", where, ")"), segments_[ri].first);
    alloc(rng);
    ref(rng);
  }
  for (TensorId t : segment_inputs_[ri]) {
    BufferId b = buf_of_[static_cast<size_t>(t)];
    ref(b);
    if (grad_call) {
      // save_for_backward: the node keeps its inputs for the re-run.
      ++saved_refs_[static_cast<size_t>(b)];
      segment_saved_[ri].push_back(b);
    } else {
      call_held_[ri].push_back(b);  // the call's arguments (and ctx.to_save until apply returns)
    }
  }
  if (rng == kNone) return;
  if (!grad_call) call_held_[ri].push_back(rng);
  else if (owner < 0) graph_held_.push_back(rng);
  else region_graph_held_[static_cast<size_t>(owner)].push_back(rng);
}

void Interpreter::leave_calls(OpId o) {
  for (size_t r = 0; r < segments_.size(); ++r) {
    if (segments_[r].last != o || call_held_[r].empty()) continue;
    for (BufferId b : call_held_[r]) unref(b);
    call_held_[r].clear();
  }
}

const Interpreter::RerunUses& Interpreter::rerun_uses(int s) {
  const size_t si = static_cast<size_t>(s);
  if (rerun_uses_[si]) return *rerun_uses_[si];
  const CheckpointSegment& seg = segments_[si];
  auto made = std::make_unique<RerunUses>();
  RerunUses& r = *made;
  r.uses.assign(g_.tensors.size(), 0);
  r.hold_release.resize(g_.ops.size());
  for (OpId o = seg.first; o <= seg.last; ++o) {
    for (TensorId in : g_.op(o).inputs) ++r.uses[static_cast<size_t>(in)];
  }
  for (const Hold& h : g_.holds) {
    OpId made = g_.tensor(h.tensor).producer;
    if (h.until < seg.first || made == kNone || made < seg.first || made > seg.last) continue;
    // A local of the re-run function lives until that function returns.
    ++r.uses[static_cast<size_t>(h.tensor)];
    r.hold_release[static_cast<size_t>(std::min(h.until, seg.last))].push_back(h.tensor);
  }
  // The re-run's outputs: held by checkpoint's backward until its nested backward returns
  // (reentrant), or `_unused = function(*args)` until unpack returns (non-reentrant).
  for (TensorId t : segment_outputs_[si]) ++r.uses[static_cast<size_t>(t)];
  for (size_t t = 0; t < r.uses.size(); ++t) {
    if (r.uses[t] > 0) r.read.push_back(static_cast<TensorId>(t));
  }
  rerun_uses_[si] = std::move(made);
  return *rerun_uses_[si];
}

void Interpreter::bind_rerun_inputs(int s, const std::vector<BufferId>& kept, const RerunUses& uses,
                                    std::vector<std::pair<TensorId, BufferId>>& restore) {
  const size_t si = static_cast<size_t>(s);
  const CheckpointSegment& seg = segments_[si];
  for (size_t k = 0; k < segment_inputs_[si].size(); ++k) {
    const TensorId t = segment_inputs_[si][k];
    restore.push_back({t, buf_of_[static_cast<size_t>(t)]});
    buf_of_[static_cast<size_t>(t)] = kept[k];
  }
  // Tensors from outside the segment (its kept inputs, weights, model inputs) already have
  // buffers; each read by a re-run op is a reference.
  for (TensorId read : uses.read) {
    const auto t = static_cast<size_t>(read);
    OpId made = g_.tensors[t].producer;
    if (made != kNone && made >= seg.first && made <= seg.last) continue;
    BufferId b = on_device(buf_of_[t]);
    buf_of_[t] = b;
    ref(b, uses.uses[t]);
  }
  // Every tensor the re-run writes gets its current buffer back afterwards.
  for (OpId o = seg.first; o <= seg.last; ++o) {
    for (TensorId t : g_.op(o).outputs) restore.push_back({t, buf_of_[static_cast<size_t>(t)]});
  }
}

std::vector<bool> Interpreter::own_saved_storage(int s) {
  const CheckpointSegment& seg = segments_[static_cast<size_t>(s)];
  std::vector<bool> saved_storage(g_.tensors.size(), false);
  for (OpId o = seg.first; o <= seg.last; ++o) {
    if (segment_of_[static_cast<size_t>(o)] == s) mark_saved(g_.op(o), grad_plans_[static_cast<size_t>(o)], saved_storage);
  }
  return saved_storage;
}

Interpreter::Rerun Interpreter::begin_rerun(int s, const std::vector<BufferId>& kept) {
  Rerun r;
  r.uses = &rerun_uses(s);
  bind_rerun_inputs(s, kept, *r.uses, r.restore);
  r.saved_storage = own_saved_storage(s);
  return r;
}

BufferId Interpreter::begin_rerun_step(int s, OpId o, int iteration, int micro) {
  const Op& op = g_.op(o);
  begin_step(Phase::Backward, iteration, micro, op.id, "recompute " + op.name);
  p_.steps.back().recompute = true;
  if (o != segments_[static_cast<size_t>(s)].first || o_.device.checkpoint_rng_state_bytes <= 0) return kNone;
  return temp(o_.device.checkpoint_rng_state_bytes, buffer_name("fork_rng RNG state (", op.name, ")"));
}

void Interpreter::end_rerun(const Rerun& r) {
  for (auto it = r.restore.rbegin(); it != r.restore.rend(); ++it) buf_of_[static_cast<size_t>(it->first)] = it->second;
}

void Interpreter::recompute(int s, int iteration, int micro) {
  const size_t si = static_cast<size_t>(s);
  const CheckpointSegment& seg = segments_[si];
  // The re-run reads the inputs the node kept (detach_variable of ctx.saved_tensors); for a
  // nested region they are the enclosing re-run's tensors, not the forward's. Every tensor it
  // writes or rebinds gets its old buffer back afterwards: the forward's buffers (still
  // referenced as returned outputs or by later ops' nodes), and for a nested region, the
  // enclosing re-run's buffers of its inputs.
  Rerun rr = begin_rerun(s, segment_saved_[si]);
  // The segment's own ops record nodes; ops of regions nested in it run inside their own
  // checkpoint calls, under no_grad, and the inputs of those calls are saved by them.
  auto own = [&](OpId o) { return segment_of_[static_cast<size_t>(o)] == s; };
  for (size_t r = si + 1; r < segments_.size() && seg.contains(segments_[r]); ++r) {
    if (parent_[r] != s) continue;
    for (TensorId t : segment_inputs_[r]) rr.saved_storage[static_cast<size_t>(storage_[static_cast<size_t>(t)])] = true;
  }
  // CheckpointFunction.backward(ctx, *args) keeps its incoming gradients `args` (and passes them
  // to torch.autograd.backward as grad_tensors) until it returns (checkpoint.py:111,157 in
  // 1.13): the gradient of the segment's output outlives the node that consumes it.
  for (TensorId t : segment_outputs_[si]) {
    const GradValue& gv = grad_[static_cast<size_t>(leaf(t))];
    if (gv.buffer == kNone) continue;
    ref(gv.buffer);
    segment_incoming_[si].push_back(gv.buffer);
  }
  BufferId fork_rng = kNone;
  for (OpId o = seg.first; o <= seg.last; ++o) {
    const Op& op = g_.op(o);
    if (BufferId b = begin_rerun_step(s, o, iteration, micro); b != kNone) fork_rng = b;
    for (int r : starting_[static_cast<size_t>(o)]) {
      if (r <= s) continue;  // s itself, or a region enclosing it
      enter_call(r, /*grad_call=*/parent_[static_cast<size_t>(r)] == s, s, "recompute " + op.name);
    }
    const ForwardPlan& fp = own(o) ? grad_plans_[static_cast<size_t>(o)] : plain_plans_[static_cast<size_t>(o)];
    execute(op, fp, rr.uses->uses, rr.saved_storage, /*may_offload=*/false);
    for (TensorId t : rr.uses->hold_release[static_cast<size_t>(o)]) unref(buf_of_[static_cast<size_t>(t)]);
    leave_calls(o);
    release_fresh();
    if (o == seg.last && fork_rng != kNone) unref(fork_rng);  // fork_rng exits before the nested backward
    end_step();
  }
  for (TensorId t : segment_outputs_[si]) segment_held_[si].push_back(buf_of_[static_cast<size_t>(t)]);
  end_rerun(rr);
  segment_state_[si] = SegmentState::Recomputed;
}

void Interpreter::finish_segment(int s, int iteration, int micro) {
  const size_t si = static_cast<size_t>(s);
  for (BufferId b : segment_held_[si]) unref(b);
  segment_held_[si].clear();
  for (BufferId b : segment_incoming_[si]) unref(b);
  segment_incoming_[si].clear();
  for (BufferId b : segment_saved_[si]) release_saved(b);
  segment_saved_[si].clear();
  // The re-run's graph goes with `outputs` when the backward returns: the ctx of the checkpoint
  // nodes recorded in it (their RNG states), and what nested nodes never reached still keep.
  for (BufferId b : region_graph_held_[si]) unref(b);
  region_graph_held_[si].clear();
  for (size_t r = si + 1; r < segments_.size() && segments_[si].contains(segments_[r]); ++r) {
    if (parent_[r] != s) continue;
    for (BufferId b : segment_saved_[r]) release_saved(b);
    segment_saved_[r].clear();
  }
  segment_state_[si] = SegmentState::Done;
  std::vector<DetachedInput> inputs = std::move(segment_input_grads_[si]);
  segment_input_grads_[si].clear();
  // CheckpointFunction.backward returns the inputs' gradients to the graph that holds the node:
  // the enclosing region's re-run, or the outer graph.
  const int running = running_segment_;
  running_segment_ = parent_[si];
  for (DetachedInput& d : inputs) {
    if (d.grad.buffer != kNone) deliver(d.tensor, d.grad, iteration, micro);
  }
  running_segment_ = running;
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
