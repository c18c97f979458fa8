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
  Interpreter(const Graph& g, const ScheduleOptions& o) : g_(g), o_(o) {}

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

  RuleContext context(const Op& op, bool grad_mode) const {
    RuleContext c{g_, op, o_.device, grad_mode, o_.mode == RunMode::Training, {}};
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

    // Plans first: which storages some node saves decides their category from birth.
    std::vector<ForwardPlan> plans(g_.ops.size());
    std::vector<bool> saved_tensor(g_.tensors.size(), false);
    std::vector<TensorId> storage(g_.tensors.size());
    for (size_t i = 0; i < storage.size(); ++i) storage[i] = static_cast<TensorId>(i);
    for (const Op& op : g_.ops) {
      if (!op_runs(op)) continue;
      RuleContext c = context(op, grad_mode);
      plans[static_cast<size_t>(op.id)] = forward_plan(c);
      const ForwardPlan& fp = plans[static_cast<size_t>(op.id)];
      for (size_t j = 0; j < op.outputs.size(); ++j) {
        TensorId out = op.outputs[j];
        if (fp.output_alias[j] >= 0) storage[static_cast<size_t>(out)] = storage[static_cast<size_t>(op.inputs[static_cast<size_t>(fp.output_alias[j])])];
        requires_grad_[static_cast<size_t>(out)] = fp.creates_node;
        if (!fp.creates_node && fp.output_alias[j] >= 0) {
          // An identity (dropout with p = 0 or in eval mode) returns its input: gradients for
          // the output are gradients for the input.
          TensorId src = op.inputs[static_cast<size_t>(fp.output_alias[j])];
          requires_grad_[static_cast<size_t>(out)] = requires_grad_[static_cast<size_t>(src)];
          redirect_[static_cast<size_t>(out)] = src;
        }
      }
      for (const Ref& r : fp.saved) {
        if (r.kind == Ref::Kind::Input) saved_tensor[static_cast<size_t>(storage[static_cast<size_t>(op.inputs[static_cast<size_t>(r.index)])])] = true;
        if (r.kind == Ref::Kind::Output) saved_tensor[static_cast<size_t>(storage[static_cast<size_t>(op.outputs[static_cast<size_t>(r.index)])])] = true;
      }
    }

    for (const Op& op : g_.ops) {
      if (!op_runs(op)) continue;
      const ForwardPlan& fp = plans[static_cast<size_t>(op.id)];
      begin_step(phase, iteration, micro, op.id, op.name);
      if (uses_cublas(op)) cublas_workspace(forward_workspace_, "cuBLAS workspace (main thread)");
      std::vector<BufferId> fresh;
      std::vector<BufferId> out_buf(op.outputs.size(), kNone);
      for (size_t j = 0; j < op.outputs.size(); ++j) {
        TensorId out = op.outputs[j];
        if (fp.output_alias[j] >= 0) {
          out_buf[j] = buf_of_[static_cast<size_t>(op.inputs[static_cast<size_t>(fp.output_alias[j])])];
        } else {
          Category cat = saved_tensor[static_cast<size_t>(storage[static_cast<size_t>(out)])] ? Category::SavedActivations : Category::Activations;
          int64_t bytes = (j == 0 && fp.output_bytes >= 0) ? fp.output_bytes : g_.tensor(out).bytes();
          out_buf[j] = new_buffer(bytes, cat, g_.tensor(out).name, op.id);
          fresh.push_back(out_buf[j]);
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
        fresh.push_back(extra_buf.back());
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
          n.saved.push_back(b);
        }
      }
      // The op returns: its inputs lose this reference, Python locals of a finished scope go.
      for (TensorId in : op.inputs) unref(buf_of_[static_cast<size_t>(in)]);
      for (TensorId t : hold_release[static_cast<size_t>(op.id)]) unref(buf_of_[static_cast<size_t>(t)]);
      for (BufferId b : fresh) free_if_unreferenced(b);
      end_step();
    }
    if (phase == Phase::Inference) {
      begin_step(phase, iteration, micro, kNone, "drop outputs");
      release_returned();
      end_step();
    }
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

  void deliver(TensorId target, GradValue g, int iteration, int micro) {
    TensorId t = leaf(target);
    GradValue& pending = grad_[static_cast<size_t>(t)];
    if (pending.buffer == kNone) {
      pending = g;
    } else {
      // InputBuffer::accumulate: old + new, a new buffer; both inputs are dropped.
      BufferId sum = new_buffer(g_.tensor(t).bytes(), Category::ActivationGradients, g_.tensor(t).name + ".grad(sum)", kNone);
      alloc(sum);
      ref(sum);
      unref(pending.buffer);
      unref(g.buffer);
      pending = {sum, true};
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
    HEADROOM_CHECK(loss.producer != kNone && nodes_[static_cast<size_t>(loss.producer)].exists,
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
        if (prod != kNone && nodes_[static_cast<size_t>(prod)].exists) reach[static_cast<size_t>(prod)] = true;
      }
    }

    begin_step(Phase::Backward, iteration, micro, kNone, "loss.backward() seed");
    BufferId seed = new_buffer(loss.bytes(), Category::ActivationGradients, "loss.grad (ones)", kNone);
    alloc(seed);
    ref(seed, 2);  // torch.autograd.backward keeps grad_tensors until the whole backward returns
    grad_[static_cast<size_t>(leaf(g_.loss))] = {seed, true};
    end_step();

    for (int i = static_cast<int>(g_.ops.size()) - 1; i >= 0; --i) {
      if (!reach[static_cast<size_t>(i)]) continue;
      const Op& op = g_.ops[static_cast<size_t>(i)];
      begin_step(Phase::Backward, iteration, micro, op.id, op.name);
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
      for (BufferId b : nodes_[static_cast<size_t>(i)].saved) unref(b);
      nodes_[static_cast<size_t>(i)].saved.clear();
      for (size_t gi = 0; gi < bp.grads.size(); ++gi) {
        deliver(op.inputs[static_cast<size_t>(bp.grads[gi].input)], outs[gi], iteration, micro);
      }
      end_step();
    }
    begin_step(Phase::Backward, iteration, micro, kNone, "drop outputs and loss");
    unref(seed);
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
};

}  // namespace

Program build_program(const Graph& g, const ScheduleOptions& options) {
  HEADROOM_CHECK(options.iterations >= 1 && options.micro_batches >= 1, "at least one iteration and micro-batch");
  return Interpreter(g, options).run();
}

}  // namespace headroom
