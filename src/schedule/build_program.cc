#include "schedule/build_program.h"

#include <algorithm>
#include <string>
#include <vector>

#include "training/op_rules.h"
#include "util/checked.h"
#include "util/error.h"

namespace headroom {
namespace {

struct GradValue {
  BufferId buffer = kNone;
  bool contiguous = true;
};

// One autograd node recorded in the forward: the buffers it keeps for its backward.
struct Node {
  bool exists = false;
  std::vector<BufferId> saved;
};

class Interpreter {
 public:
  Interpreter(const Graph& g, const ScheduleOptions& o) : g_(g), o_(o) {
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
  }

  Program run() {
    setup();
    if (o_.mode == RunMode::Inference) {
      forward(/*iteration=*/0, /*micro=*/0, Phase::Inference);
    } else {
      HEADROOM_CHECK(g_.loss != kNone, "training needs a loss");
      param_grad_.assign(g_.tensors.size(), kNone);
      for (int it = 1; it <= o_.iterations; ++it) {
        for (int mb = 1; mb <= o_.micro_batches; ++mb) {
          forward(it, mb, Phase::Forward);
          backward(it, mb);
        }
        optimizer_step(it);
      }
    }
    validate_program(p_);
    return std::move(p_);
  }

 private:
  // ---- buffers and references -------------------------------------------------------------
  BufferId new_buffer(int64_t bytes, Category cat, std::string name, OpId op) {
    p_.buffers.push_back(Buffer{bytes, cat, std::move(name), op});
    refs_.push_back(0);
    saved_refs_.push_back(0);
    offloaded_.push_back(false);
    replacement_.push_back(kNone);
    pending_prefetch_.push_back(-1);
    offload_op_of_.push_back(kNone);
    return static_cast<BufferId>(p_.buffers.size()) - 1;
  }
  void alloc(BufferId b) { p_.events.push_back({Event::Kind::Alloc, Category::Weights, b}); }
  void ref(BufferId b, int n = 1) { refs_[static_cast<size_t>(b)] += n; }
  void unref(BufferId b) {
    int& r = refs_[static_cast<size_t>(b)];
    HEADROOM_CHECK(r > 0, "reference count underflow on " + p_.buffers[static_cast<size_t>(b)].name);
    if (--r == 0) p_.events.push_back({Event::Kind::Free, Category::Weights, b});
  }
  void free_if_unreferenced(BufferId b) {
    if (refs_[static_cast<size_t>(b)] == 0) p_.events.push_back({Event::Kind::Free, Category::Weights, b});
  }
  void retag(BufferId b, Category c) { p_.events.push_back({Event::Kind::Retag, c, b}); }

  void begin_step(Phase phase, int iteration, int micro, OpId op, std::string label) {
    Step s;
    s.phase = phase;
    s.iteration = iteration;
    s.micro_batch = micro;
    s.op = op;
    s.label = std::move(label);
    s.first_event = static_cast<int32_t>(p_.events.size());
    p_.steps.push_back(std::move(s));
  }
  void end_step() { p_.steps.back().end_event = static_cast<int32_t>(p_.events.size()); }

  // ---- setup: weights and inputs live from the start -------------------------------------
  void setup() {
    buf_of_.assign(g_.tensors.size(), kNone);
    begin_step(Phase::Setup, 0, 0, kNone, "weights and inputs");
    for (const Tensor& t : g_.tensors) {
      bool weight = g_.is_weight(t.id);
      bool input = t.role == TensorRole::Input || (t.role == TensorRole::Target && o_.mode == RunMode::Training);
      if (!weight && !input) continue;
      if (t.tied_to != kNone) {
        buf_of_[static_cast<size_t>(t.id)] = buf_of_[static_cast<size_t>(t.tied_to)];
        continue;
      }
      BufferId b = new_buffer(t.bytes(), weight ? Category::Weights : Category::Inputs, t.name, kNone);
      alloc(b);
      ref(b);  // held by the model or the data loader for the whole run
      buf_of_[static_cast<size_t>(t.id)] = b;
    }
    end_step();
  }

  bool op_runs(const Op& op) const { return o_.mode == RunMode::Training || op.stage == OpStage::Model; }

  // Whether the backward will find a node for op p: recorded in the forward, or recorded when
  // its checkpointed segment is re-run.
  bool will_have_node(OpId p) const {
    return nodes_[static_cast<size_t>(p)].exists ||
           (segment_of_[static_cast<size_t>(p)] >= 0 && grad_plans_[static_cast<size_t>(p)].creates_node);
  }

  RuleContext context(const Op& op, bool grad_mode) const {
    const DeviceProfile& device = no_workspace_op_[static_cast<size_t>(op.id)] ? no_workspace_device_ : o_.device;
    RuleContext c{g_, op, device, grad_mode, o_.mode == RunMode::Training, {}};
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      c.input_requires_grad.push_back(grad_mode && requires_grad_[static_cast<size_t>(op.inputs[i])] &&
                                      differentiable_input(op, static_cast<int>(i)));
    }
    return c;
  }

  // ---- forward -----------------------------------------------------------------------------
  void forward(int iteration, int micro, Phase phase) {
    const bool grad_mode = phase == Phase::Forward;
    requires_grad_.assign(g_.tensors.size(), false);
    for (const Tensor& t : g_.tensors) requires_grad_[static_cast<size_t>(t.id)] = grad_mode && t.role == TensorRole::Parameter;
    nodes_.assign(g_.ops.size(), Node{});
    grad_.assign(g_.tensors.size(), GradValue{});
    redirect_.assign(g_.tensors.size(), kNone);
    segment_saved_.assign(segments_.size(), {});
    segment_state_.assign(segments_.size(), SegmentState::Forward);
    segment_held_.assign(segments_.size(), {});
    segment_incoming_.assign(segments_.size(), {});
    offload_candidates_.clear();

    // Forward references of each tensor: reads by later ops, Python locals, returned outputs.
    std::vector<int> uses(g_.tensors.size(), 0);
    std::vector<std::vector<TensorId>> hold_release(g_.ops.size());
    for (const Op& op : g_.ops) {
      if (!op_runs(op)) continue;
      for (TensorId in : op.inputs) ++uses[static_cast<size_t>(in)];
    }
    for (const Hold& h : g_.holds) {
      if (!op_runs(g_.op(h.until))) continue;
      ++uses[static_cast<size_t>(h.tensor)];
      hold_release[static_cast<size_t>(h.until)].push_back(h.tensor);
    }
    std::vector<TensorId> returned = g_.outputs;
    if (phase == Phase::Forward) {
      returned.push_back(g_.loss);
      returned.insert(returned.end(), g_.loss_terms.begin(), g_.loss_terms.end());
    }
    for (TensorId t : returned) ++uses[static_cast<size_t>(t)];
    returned_ = returned;
    // Leaves (weights, inputs, targets) already have buffers; each read by an op is a reference.
    for (const Tensor& t : g_.tensors) {
      BufferId b = buf_of_[static_cast<size_t>(t.id)];
      if (t.producer == kNone && b != kNone) ref(b, uses[static_cast<size_t>(t.id)]);
    }

    // Plans first: which storages some node saves decides their category from birth. The plan
    // autograd would record (grad_plans_) decides which tensors require grad and what a
    // checkpointed segment saves when it is recomputed; a checkpointed op runs under no_grad.
    std::vector<ForwardPlan> plans(g_.ops.size());
    grad_plans_.assign(g_.ops.size(), ForwardPlan{});
    std::vector<bool> saved_storage(g_.tensors.size(), false);
    storage_.resize(g_.tensors.size());
    for (size_t i = 0; i < storage_.size(); ++i) storage_[i] = static_cast<TensorId>(i);
    for (const Op& op : g_.ops) {
      if (!op_runs(op)) continue;
      const bool checkpointed = grad_mode && segment_of_[static_cast<size_t>(op.id)] >= 0;
      ForwardPlan& gp = grad_plans_[static_cast<size_t>(op.id)];
      gp = forward_plan(context(op, grad_mode));
      ForwardPlan& fp = plans[static_cast<size_t>(op.id)];
      fp = checkpointed ? forward_plan(context(op, false)) : gp;
      for (size_t j = 0; j < op.outputs.size(); ++j) {
        TensorId out = op.outputs[j];
        if (fp.output_alias[j] >= 0) storage_[static_cast<size_t>(out)] = storage_[static_cast<size_t>(op.inputs[static_cast<size_t>(fp.output_alias[j])])];
        requires_grad_[static_cast<size_t>(out)] = gp.creates_node;
        if (!gp.creates_node && gp.output_alias[j] >= 0) {
          // An identity (dropout with p = 0 or in eval mode) returns its input: gradients for
          // the output are gradients for the input.
          TensorId src = op.inputs[static_cast<size_t>(gp.output_alias[j])];
          requires_grad_[static_cast<size_t>(out)] = requires_grad_[static_cast<size_t>(src)];
          redirect_[static_cast<size_t>(out)] = src;
        }
      }
      mark_saved(op, fp, saved_storage);
    }
    if (grad_mode) {
      for (size_t s = 0; s < segments_.size(); ++s) {
        for (TensorId t : segment_inputs_[s]) saved_storage[static_cast<size_t>(storage_[static_cast<size_t>(t)])] = true;
      }
    }

    for (const Op& op : g_.ops) {
      if (!op_runs(op)) continue;
      const ForwardPlan& fp = plans[static_cast<size_t>(op.id)];
      begin_step(phase, iteration, micro, op.id, op.name);
      const int seg = segment_of_[static_cast<size_t>(op.id)];
      if (grad_mode && seg >= 0 && op.id == segments_[static_cast<size_t>(seg)].first) {
        // CheckpointFunction keeps the segment's inputs (save_for_backward) for the
        // recomputation; they are its call's arguments from the start.
        for (TensorId t : segment_inputs_[static_cast<size_t>(seg)]) {
          BufferId b = buf_of_[static_cast<size_t>(t)];
          ref(b);
          ++saved_refs_[static_cast<size_t>(b)];
          segment_saved_[static_cast<size_t>(seg)].push_back(b);
        }
        // CheckpointFunction.forward: `ctx.fwd_cpu_state = torch.get_rng_state()`
        // (torch/utils/checkpoint.py:81 in 1.13), before the segment runs. A ctx attribute, not a
        // saved tensor: release_variables() keeps it, so it lives until the graph is freed.
        if (o_.device.checkpoint_rng_state_bytes > 0) {
          BufferId r = new_buffer(o_.device.checkpoint_rng_state_bytes, Category::SavedActivations,
                                  "checkpoint RNG state (" + op.name + ")", op.id);
          alloc(r);
          ref(r);
          graph_held_.push_back(r);
        }
      }
      execute(op, fp, uses, saved_storage, /*may_offload=*/grad_mode);
      for (TensorId t : hold_release[static_cast<size_t>(op.id)]) unref(buf_of_[static_cast<size_t>(t)]);
      release_fresh();
      if (grad_mode) offload_ready();
      end_step();
    }
    offload_candidates_.clear();  // still referenced by the forward at its end: not offloaded
    if (phase == Phase::Inference) {
      begin_step(phase, iteration, micro, kNone, "drop outputs");
      release_returned();
      end_step();
    }
  }

  void mark_saved(const Op& op, const ForwardPlan& fp, std::vector<bool>& saved_storage) const {
    for (const Ref& r : fp.saved) {
      if (r.kind == Ref::Kind::Input) saved_storage[static_cast<size_t>(storage_[static_cast<size_t>(op.inputs[static_cast<size_t>(r.index)])])] = true;
      if (r.kind == Ref::Kind::Output) saved_storage[static_cast<size_t>(storage_[static_cast<size_t>(op.outputs[static_cast<size_t>(r.index)])])] = true;
    }
  }

  // Runs one forward op: its outputs, extras and temporaries, its node's saved references, and
  // the return (inputs lose this reference). Fresh buffers nobody references are freed by
  // release_fresh() after the caller drops Python locals.
  void execute(const Op& op, const ForwardPlan& fp, const std::vector<int>& uses,
               const std::vector<bool>& saved_storage, bool may_offload) {
    if (uses_cublas(op)) cublas_workspace(forward_workspace_, "cuBLAS workspace (main thread)");
    fresh_.clear();
    std::vector<BufferId> out_buf(op.outputs.size(), kNone);
    for (size_t j = 0; j < op.outputs.size(); ++j) {
      TensorId out = op.outputs[j];
      if (fp.output_alias[j] >= 0) {
        out_buf[j] = buf_of_[static_cast<size_t>(op.inputs[static_cast<size_t>(fp.output_alias[j])])];
      } else {
        Category cat = saved_storage[static_cast<size_t>(storage_[static_cast<size_t>(out)])] ? Category::SavedActivations : Category::Activations;
        int64_t bytes = (j == 0 && fp.output_bytes >= 0) ? fp.output_bytes : g_.tensor(out).bytes();
        out_buf[j] = new_buffer(bytes, cat, g_.tensor(out).name, op.id);
        fresh_.push_back(out_buf[j]);
      }
      buf_of_[static_cast<size_t>(out)] = out_buf[j];
      ref(out_buf[j], uses[static_cast<size_t>(out)]);
    }
    std::vector<BufferId> extra_buf;
    for (const ExtraBuffer& e : fp.extras) {
      bool kept = std::any_of(fp.saved.begin(), fp.saved.end(), [&](const Ref& r) {
        return r.kind == Ref::Kind::Extra && r.index == static_cast<int>(extra_buf.size());
      });
      extra_buf.push_back(new_buffer(e.bytes, kept ? Category::SavedActivations : Category::Temporaries,
                                     op.name + "." + e.name, op.id));
      fresh_.push_back(extra_buf.back());
    }
    std::vector<BufferId> temps;
    for (const LocalEvent& e : fp.events) {
      switch (e.kind) {
        case LocalEvent::Kind::AllocOutput: alloc(out_buf[static_cast<size_t>(e.index)]); break;
        case LocalEvent::Kind::AllocExtra: alloc(extra_buf[static_cast<size_t>(e.index)]); break;
        case LocalEvent::Kind::AllocTemp: {
          BufferId t = new_buffer(e.bytes, e.workspace ? Category::Workspaces : Category::Temporaries,
                                  op.name + (e.workspace ? ".workspace" : ".tmp"), op.id);
          temps.push_back(t);
          alloc(t);
          ref(t);
          break;
        }
        case LocalEvent::Kind::FreeTemp: unref(temps.at(static_cast<size_t>(e.index))); break;
        case LocalEvent::Kind::AllocGrad: HEADROOM_CHECK(false, "AllocGrad in a forward plan"); break;
      }
    }
    if (fp.creates_node) {
      Node& n = nodes_[static_cast<size_t>(op.id)];
      n.exists = true;
      for (const Ref& r : fp.saved) {
        BufferId b = r.kind == Ref::Kind::Input ? buf_of_[static_cast<size_t>(op.inputs[static_cast<size_t>(r.index)])]
                   : r.kind == Ref::Kind::Output ? out_buf[static_cast<size_t>(r.index)]
                                                 : extra_buf[static_cast<size_t>(r.index)];
        ref(b);
        ++saved_refs_[static_cast<size_t>(b)];
        n.saved.push_back(b);
        // vDNN offloads what a layer keeps for its backward (a convolution's input feature map):
        // activations only; weights and model inputs stay where they are. The copy can start
        // when the layer starts, i.e. at the end of the previous step.
        const Buffer& kept = p_.buffers[static_cast<size_t>(b)];
        if (may_offload && offload_op_[static_cast<size_t>(op.id)] && kept.op != kNone &&
            kept.category == Category::SavedActivations &&
            std::none_of(offload_candidates_.begin(), offload_candidates_.end(), [&](const OffloadCandidate& c) { return c.buffer == b; })) {
          offload_candidates_.push_back({b, static_cast<int32_t>(p_.steps.size()) - 2, op.id});
        }
      }
    }
    // The op returns: its inputs lose this reference.
    for (TensorId in : op.inputs) unref(buf_of_[static_cast<size_t>(in)]);
  }

  void release_fresh() {
    for (BufferId b : fresh_) free_if_unreferenced(b);
    fresh_.clear();
  }

  // ---- offloading --------------------------------------------------------------------------
  // A candidate goes to host once autograd's saved references are all that hold it.
  void offload_ready() {
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

  // Copies an offloaded buffer back to the device, allocated now; the transfer's deadline is the
  // step of the node that first reads it (set by need_on_device).
  void prefetch(BufferId b) {
    const size_t i = static_cast<size_t>(b);
    if (!offloaded_[i] || replacement_[i] != kNone) return;
    const Buffer& orig = p_.buffers[i];
    BufferId copy = new_buffer(orig.bytes, Category::SavedActivations, orig.name + " (prefetched)", orig.op);
    alloc(copy);
    ref(copy, refs_[i]);
    saved_refs_[static_cast<size_t>(copy)] = refs_[i];
    refs_[i] = 0;
    saved_refs_[i] = 0;
    replacement_[i] = copy;
    pending_prefetch_[i] = static_cast<int32_t>(p_.transfers.size());
    const int32_t step = static_cast<int32_t>(p_.steps.size()) - 1;
    p_.transfers.push_back({copy, orig.bytes, offload_op_of_[i], false, step, -1});
  }
  void need_on_device(const std::vector<BufferId>& saved) {
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
  // Dropping a saved reference: an offloaded buffer's references moved to its prefetched copy.
  void release_saved(BufferId b) {
    const size_t i = static_cast<size_t>(b);
    if (replacement_[i] != kNone) return release_saved(replacement_[i]);
    --saved_refs_[i];
    if (offloaded_[i]) {
      --refs_[i];  // the host copy is dropped; nothing on the device
      return;
    }
    unref(b);
  }
  BufferId on_device(BufferId b) const {
    while (replacement_[static_cast<size_t>(b)] != kNone) b = replacement_[static_cast<size_t>(b)];
    return b;
  }

  // ---- checkpointed segments -----------------------------------------------------------------
  // Re-runs segment s's forward with grad, at the point the backward first reaches it.
  void recompute(int s, int iteration, int micro) {
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

  // The segment's backward returned: its held outputs, incoming gradients and saved inputs go,
  // then the gradients of its inputs (returned by CheckpointFunction.backward) reach the outer
  // graph like any node's.
  void finish_segment(int s, int iteration, int micro) {
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

  // A gradient for input `t` of the segment whose nodes are running: the re-run took
  // detach_variable() copies of its inputs (checkpoint.py:137), leaves of the nested graph, so
  // their gradients collect there (summed like any InputBuffer) and go through AccumulateGrad
  // into `inp.grad` when the last arrives; the backward returns them (checkpoint.py:158).
  bool deliver_to_detached_input(TensorId t, GradValue g) {
    if (running_segment_ < 0) return false;
    for (DetachedInput& d : segment_input_grads_[static_cast<size_t>(running_segment_)]) {
      if (d.tensor != t) continue;
      d.grad = d.grad.buffer == kNone ? g : sum_gradients(t, d.grad, g);
      if (--d.pending == 0) d.grad = accumulate_into_grad(t, d.grad);
      return true;
    }
    return false;
  }

  void release_returned() {
    for (TensorId t : returned_) unref(buf_of_[static_cast<size_t>(t)]);
    returned_.clear();
  }

  // ---- backward ----------------------------------------------------------------------------
  // The tensor whose gradient slot receives gradients sent to t.
  TensorId leaf(TensorId t) const {
    while (redirect_[static_cast<size_t>(t)] != kNone) t = redirect_[static_cast<size_t>(t)];
    const Tensor& x = g_.tensor(t);
    return x.tied_to != kNone ? x.tied_to : t;
  }

  // InputBuffer::accumulate: old + new, a new buffer; both inputs are dropped.
  GradValue sum_gradients(TensorId t, GradValue old, GradValue add) {
    BufferId sum = new_buffer(g_.tensor(t).bytes(), Category::ActivationGradients, g_.tensor(t).name + ".grad(sum)", kNone);
    alloc(sum);
    ref(sum);
    unref(old.buffer);
    unref(add.buffer);
    return {sum, true};
  }

  // AccumulateGrad's first gradient for leaf t: stolen when nothing else references it and its
  // layout matches t; otherwise a contiguous clone, and the incoming gradient is dropped.
  GradValue accumulate_into_grad(TensorId t, GradValue g) {
    if (refs_[static_cast<size_t>(g.buffer)] == 1 && g.contiguous && p_.buffers[static_cast<size_t>(g.buffer)].bytes == g_.tensor(t).bytes()) return g;
    BufferId copy = new_buffer(g_.tensor(t).bytes(), Category::ActivationGradients, g_.tensor(t).name + ".grad", kNone);
    alloc(copy);
    ref(copy);
    unref(g.buffer);
    return {copy, true};
  }

  void deliver(TensorId target, GradValue g, int iteration, int micro) {
    TensorId t = leaf(target);
    if (deliver_to_detached_input(t, g)) return;
    GradValue& pending = grad_[static_cast<size_t>(t)];
    if (pending.buffer == kNone) {
      pending = g;
    } else {
      pending = sum_gradients(t, pending, g);
    }
    if (--deps_[static_cast<size_t>(t)] == 0 && g_.tensor(t).role == TensorRole::Parameter) {
      accumulate_grad(t, iteration, micro);
    }
  }

  // AccumulateGrad: the first gradient is stolen when nothing else references it and its layout
  // matches the parameter; otherwise it is cloned. Later micro-batches add in place.
  void accumulate_grad(TensorId param, int, int) {
    GradValue g = grad_[static_cast<size_t>(param)];
    grad_[static_cast<size_t>(param)] = {};
    BufferId& pg = param_grad_[static_cast<size_t>(param)];
    if (pg != kNone) {
      unref(g.buffer);
      return;
    }
    if (refs_[static_cast<size_t>(g.buffer)] == 1 && g.contiguous &&
        p_.buffers[static_cast<size_t>(g.buffer)].bytes == g_.tensor(param).bytes()) {
      retag(g.buffer, Category::Gradients);
      pg = g.buffer;
      return;
    }
    pg = new_buffer(g_.tensor(param).bytes(), Category::Gradients, g_.tensor(param).name + ".grad", kNone);
    alloc(pg);
    ref(pg);
    unref(g.buffer);
  }

  void backward(int iteration, int micro) {
    // Which nodes the engine will run: those reachable from the loss through differentiable edges.
    std::vector<bool> reach(g_.ops.size(), false);
    deps_.assign(g_.tensors.size(), 0);
    const Tensor& loss = g_.tensor(g_.loss);
    HEADROOM_CHECK(loss.producer != kNone && will_have_node(loss.producer),
                   "the loss does not depend on any parameter");
    reach[static_cast<size_t>(loss.producer)] = true;
    std::vector<std::vector<bool>> needs(g_.ops.size());
    for (int i = static_cast<int>(g_.ops.size()) - 1; i >= 0; --i) {
      if (!reach[static_cast<size_t>(i)]) continue;
      const Op& op = g_.ops[static_cast<size_t>(i)];
      RuleContext c = context(op, true);
      needs[static_cast<size_t>(i)] = c.input_requires_grad;
      for (size_t k = 0; k < op.inputs.size(); ++k) {
        if (!c.input_requires_grad[k]) continue;
        TensorId in = leaf(op.inputs[k]);
        ++deps_[static_cast<size_t>(in)];
        OpId prod = g_.tensor(in).producer;
        if (prod != kNone && will_have_node(prod)) reach[static_cast<size_t>(prod)] = true;
      }
    }
    // Gradients for a segment's inputs from its own nodes meet at the detached copies (one per
    // input tensor) and leave the segment as one gradient each.
    segment_input_grads_.assign(segments_.size(), {});
    for (size_t i = 0; i < g_.ops.size(); ++i) {
      const int seg = segment_of_[i];
      if (seg < 0 || !reach[i]) continue;
      const Op& op = g_.ops[i];
      for (size_t k = 0; k < op.inputs.size(); ++k) {
        if (!needs[i][k]) continue;
        TensorId t = leaf(op.inputs[k]);
        OpId made = g_.tensor(t).producer;
        if (made == kNone || made >= segments_[static_cast<size_t>(seg)].first) continue;  // a leaf, or made inside
        std::vector<DetachedInput>& list = segment_input_grads_[static_cast<size_t>(seg)];
        auto it = std::find_if(list.begin(), list.end(), [&](const DetachedInput& d) { return d.tensor == t; });
        if (it == list.end()) list.push_back({t, {}, 1});
        else ++it->pending;
      }
    }
    for (const std::vector<DetachedInput>& list : segment_input_grads_) {
      for (const DetachedInput& d : list) deps_[static_cast<size_t>(d.tensor)] -= d.pending - 1;
    }
    // The last node of each checkpointed segment to run: after it, the segment's backward returns.
    std::vector<OpId> segment_last_node(segments_.size(), kNone);
    for (size_t i = 0; i < g_.ops.size(); ++i) {
      const int seg = segment_of_[i];
      if (seg >= 0 && reach[i] && segment_last_node[static_cast<size_t>(seg)] == kNone) segment_last_node[static_cast<size_t>(seg)] = static_cast<OpId>(i);
    }
    auto next_node = [&](int from) {
      for (int j = from; j >= 0; --j) {
        if (reach[static_cast<size_t>(j)]) return j;
      }
      return -1;
    };
    // vDNN prefetches one layer ahead: the next node's offloaded buffers are copied back while
    // the current node runs.
    auto prefetch_for = [&](int j) {
      if (j < 0 || !nodes_[static_cast<size_t>(j)].exists) return;
      for (BufferId b : nodes_[static_cast<size_t>(j)].saved) prefetch(b);
    };

    begin_step(Phase::Backward, iteration, micro, kNone, "loss.backward() seed");
    BufferId seed = new_buffer(loss.bytes(), Category::ActivationGradients, "loss.grad (ones)", kNone);
    alloc(seed);
    ref(seed, 2);  // torch.autograd.backward keeps grad_tensors until the whole backward returns
    grad_[static_cast<size_t>(leaf(g_.loss))] = {seed, true};
    prefetch_for(next_node(static_cast<int>(g_.ops.size()) - 1));
    end_step();

    for (int i = static_cast<int>(g_.ops.size()) - 1; i >= 0; --i) {
      if (!reach[static_cast<size_t>(i)]) continue;
      const Op& op = g_.ops[static_cast<size_t>(i)];
      const int seg = segment_of_[static_cast<size_t>(i)];
      if (seg >= 0 && segment_state_[static_cast<size_t>(seg)] == SegmentState::Forward) {
        for (BufferId b : segment_saved_[static_cast<size_t>(seg)]) need_on_device({b});
        recompute(seg, iteration, micro);
      }
      begin_step(Phase::Backward, iteration, micro, op.id, op.name);
      need_on_device(nodes_[static_cast<size_t>(i)].saved);
      prefetch_for(next_node(i - 1));
      // The node's incoming gradients: one per output that received any (split has several).
      std::vector<GradValue> incoming;
      for (TensorId out : op.outputs) {
        GradValue& gv = grad_[static_cast<size_t>(out)];
        if (gv.buffer != kNone) incoming.push_back(gv);
        gv = {};
      }
      HEADROOM_CHECK(!incoming.empty(), "node runs without a gradient: " + op.name);
      GradValue in_grad = incoming[0];
      if (uses_cublas(op)) cublas_workspace(backward_workspace_, "cuBLAS workspace (autograd thread)");
      RuleContext c = context(op, true);
      BackwardPlan bp = backward_plan(c, in_grad.contiguous);
      std::vector<GradValue> outs(bp.grads.size());
      std::vector<BufferId> temps;
      for (size_t gi = 0; gi < bp.grads.size(); ++gi) {
        const GradOut& go = bp.grads[gi];
        if (go.kind == GradOut::Kind::New) {
          const Tensor& in = g_.tensor(op.inputs[static_cast<size_t>(go.input)]);
          outs[gi] = {new_buffer(go.bytes, Category::ActivationGradients, in.name + ".grad", op.id), go.contiguous};
        } else {
          outs[gi] = {in_grad.buffer, go.contiguous};
          ref(in_grad.buffer);
        }
      }
      for (const LocalEvent& e : bp.events) {
        switch (e.kind) {
          case LocalEvent::Kind::AllocGrad: {
            BufferId b = outs[static_cast<size_t>(e.index)].buffer;
            alloc(b);
            ref(b);
            break;
          }
          case LocalEvent::Kind::AllocTemp: {
            BufferId t = new_buffer(e.bytes, e.workspace ? Category::Workspaces : Category::Temporaries,
                                    op.name + (e.workspace ? ".grad_workspace" : ".grad_tmp"), op.id);
            temps.push_back(t);
            alloc(t);
            ref(t);
            break;
          }
          case LocalEvent::Kind::FreeTemp: unref(temps.at(static_cast<size_t>(e.index))); break;
          default: HEADROOM_CHECK(false, "forward event in a backward plan");
        }
      }
      // call_function returns (incoming gradients dropped), then release_variables().
      for (const GradValue& gv : incoming) unref(gv.buffer);
      for (BufferId b : nodes_[static_cast<size_t>(i)].saved) release_saved(b);
      nodes_[static_cast<size_t>(i)].saved.clear();
      running_segment_ = seg;
      for (size_t gi = 0; gi < bp.grads.size(); ++gi) {
        deliver(op.inputs[static_cast<size_t>(bp.grads[gi].input)], outs[gi], iteration, micro);
      }
      running_segment_ = -1;
      if (seg >= 0 && segment_last_node[static_cast<size_t>(seg)] == i) finish_segment(seg, iteration, micro);
      end_step();
    }
    begin_step(Phase::Backward, iteration, micro, kNone, "drop outputs and loss");
    unref(seed);
    // Dropping the outputs and the loss frees the graph, and with it the checkpoint nodes' ctx.
    for (BufferId b : graph_held_) unref(b);
    graph_held_.clear();
    // Gradients that reached tensors no node consumes are dropped.
    for (GradValue& gv : grad_) {
      if (gv.buffer != kNone) {
        unref(gv.buffer);
        gv = {};
      }
    }
    release_returned();
    end_step();
  }

  // ---- optimizer ---------------------------------------------------------------------------
  std::vector<TensorId> trainable() const {
    std::vector<TensorId> ps;
    for (const Tensor& t : g_.tensors) {
      if (t.role == TensorRole::Parameter && t.tied_to == kNone && param_grad_[static_cast<size_t>(t.id)] != kNone) ps.push_back(t.id);
    }
    return ps;
  }

  void optimizer_step(int iteration) {
    std::vector<TensorId> ps = trainable();
    begin_step(Phase::Optimizer, iteration, 0, kNone, std::string(optimizer_name(o_.optimizer)) + ".step()");
    record_function();
    const bool adam = o_.optimizer == OptimizerKind::Adam || o_.optimizer == OptimizerKind::AdamW;
    if (!state_created_) {
      // State is created lazily by step() for each parameter, in parameter order.
      for (TensorId p : ps) {
        const Tensor& t = g_.tensor(p);
        if (adam) {
          state(4, t.name + ".step");
          state(t.bytes(), t.name + ".exp_avg");
          state(t.bytes(), t.name + ".exp_avg_sq");
        } else if (o_.optimizer == OptimizerKind::Momentum) {
          state(t.bytes(), t.name + ".momentum_buffer");
        }
      }
      state_created_ = true;
    }
    if (adam) {
      if (o_.foreach) {
        // _multi_tensor_adam: sqrt of every exp_avg_sq, then denom = sqrt + eps, both lists alive
        // until the update is done.
        std::vector<BufferId> sq, denom;
        for (TensorId p : ps) sq.push_back(temp(g_.tensor(p).bytes(), g_.tensor(p).name + ".sqrt"));
        std::vector<BufferId> eps = python_scalar("eps");
        for (TensorId p : ps) denom.push_back(temp(g_.tensor(p).bytes(), g_.tensor(p).name + ".denom"));
        for (auto it = eps.rbegin(); it != eps.rend(); ++it) unref(*it);
        for (auto it = denom.rbegin(); it != denom.rend(); ++it) unref(*it);
        for (auto it = sq.rbegin(); it != sq.rend(); ++it) unref(*it);
      } else {
        // _single_tensor_adam: denom = (exp_avg_sq.sqrt() / c).add_(eps); the sqrt result dies
        // after the division, denom when the next iteration rebinds it.
        BufferId prev = kNone;
        for (TensorId p : ps) {
          BufferId s = temp(g_.tensor(p).bytes(), g_.tensor(p).name + ".sqrt");
          std::vector<BufferId> c = python_scalar("bias_correction2_sqrt");
          BufferId d = temp(g_.tensor(p).bytes(), g_.tensor(p).name + ".denom");
          for (auto it = c.rbegin(); it != c.rend(); ++it) unref(*it);
          unref(s);
          if (prev != kNone) unref(prev);
          prev = d;
        }
        if (prev != kNone) unref(prev);
      }
    }
    end_step();
    begin_step(Phase::Optimizer, iteration, 0, kNone, "zero_grad(set_to_none=True)");
    record_function();
    for (TensorId p : ps) {
      unref(param_grad_[static_cast<size_t>(p)]);
      param_grad_[static_cast<size_t>(p)] = kNone;
    }
    end_step();
  }

  // 1.13's Optimizer.step and zero_grad open a record_function scope: a 4-byte handle and a
  // 288-byte RecordFunction holder, both freed before the work starts.
  void record_function() {
    if (!o_.device.optimizer_record_function) return;
    BufferId handle = temp(4, "record_function handle");
    BufferId holder = temp(288, "record_function holder");
    unref(holder);
    unref(handle);
  }

  static bool uses_cublas(const Op& op) { return op.kind == OpKind::Linear || op.kind == OpKind::MatMul; }

  // The first cuBLAS call of a thread creates its handle's workspace; it is never freed.
  void cublas_workspace(BufferId& slot, const char* name) {
    if (slot != kNone || o_.device.cublas_workspace_bytes <= 0) return;
    slot = new_buffer(o_.device.cublas_workspace_bytes, Category::Workspaces, name, kNone);
    alloc(slot);
    ref(slot);
  }

  // A Python float operand on the CPU: a float64 0-dim tensor and its fp32 cast, alive while the
  // op runs (none on CUDA, where they stay in host memory).
  std::vector<BufferId> python_scalar(const std::string& what) {
    if (!o_.device.python_scalar_tensors) return {};
    return {temp(8, what + " (float64 scalar)"), temp(4, what + " (cast)")};
  }

  void state(int64_t bytes, std::string name) {
    BufferId b = new_buffer(bytes, Category::OptimizerState, std::move(name), kNone);
    alloc(b);
    ref(b);
  }
  BufferId temp(int64_t bytes, std::string name) {
    BufferId b = new_buffer(bytes, Category::Temporaries, std::move(name), kNone);
    alloc(b);
    ref(b);
    return b;
  }

  const Graph& g_;
  const ScheduleOptions& o_;
  Program p_;
  std::vector<int> refs_;
  std::vector<BufferId> buf_of_;
  std::vector<bool> requires_grad_;
  std::vector<Node> nodes_;
  std::vector<GradValue> grad_;
  std::vector<int> deps_;
  std::vector<TensorId> redirect_;
  std::vector<BufferId> param_grad_;
  std::vector<TensorId> returned_;
  bool state_created_ = false;
  BufferId forward_workspace_ = kNone;
  BufferId backward_workspace_ = kNone;

  // The memory plan, resolved per op.
  DeviceProfile no_workspace_device_;
  std::vector<bool> no_workspace_op_;
  std::vector<bool> offload_op_;
  std::vector<int> segment_of_;  // segment index of an op, -1 outside checkpoints
  std::vector<CheckpointSegment> segments_;
  std::vector<std::vector<TensorId>> segment_inputs_;   // made before the segment, read in it
  std::vector<std::vector<TensorId>> segment_outputs_;  // made in it, read after it
  enum class SegmentState : uint8_t { Forward, Recomputed, Done };
  std::vector<SegmentState> segment_state_;
  std::vector<std::vector<BufferId>> segment_saved_;  // the checkpoint node's saved inputs
  std::vector<std::vector<BufferId>> segment_held_;   // recomputed outputs held by its backward
  std::vector<std::vector<BufferId>> segment_incoming_;  // its backward's incoming gradients
  struct DetachedInput {
    TensorId tensor;  // a segment input (the leaf its gradients go to)
    GradValue grad;   // summed so far; after AccumulateGrad, the detached copy's .grad
    int pending;      // gradients still to come from the segment's nodes
  };
  std::vector<std::vector<DetachedInput>> segment_input_grads_;
  int running_segment_ = -1;           // segment of the backward node delivering gradients
  std::vector<BufferId> graph_held_;   // freed with the graph: the checkpoint nodes' RNG states
  std::vector<ForwardPlan> grad_plans_;  // per op: the plan with autograd recording
  std::vector<TensorId> storage_;        // per tensor: the tensor owning its storage
  std::vector<BufferId> fresh_;          // buffers the current op made
  // Offloading state per buffer.
  struct OffloadCandidate {
    BufferId buffer;
    int32_t produced_step;
    OpId op;
  };
  std::vector<OffloadCandidate> offload_candidates_;
  std::vector<int> saved_refs_;          // references held by autograd nodes
  std::vector<bool> offloaded_;          // the device copy was freed after a copy to host
  std::vector<BufferId> replacement_;    // the prefetched copy of an offloaded buffer
  std::vector<int32_t> pending_prefetch_;  // transfer index whose deadline is not known yet
  std::vector<OpId> offload_op_of_;      // the plan op that sent a buffer to host
};

}  // namespace

Program build_program(const Graph& g, const ScheduleOptions& options) {
  HEADROOM_CHECK(options.iterations >= 1 && options.micro_batches >= 1, "at least one iteration and micro-batch");
  return Interpreter(g, options).run();
}

}  // namespace headroom
