#include "schedule/build_program.h"

#include "schedule/interpreter.h"
#include "schedule/micro_batch_fold.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "util/checked.h"
#include "util/error.h"

namespace headroom::schedule_detail {

void Interpreter::execute(const Op& op, const ForwardPlan& fp, const std::vector<int>& uses,
                          const std::vector<bool>& saved_storage, bool may_offload) {
  blas_workspaces(op);
  p_.context_use.forward = true;
  if (is_convolution_kind(op.kind)) p_.context_use.convolution = true;
  gather(op.id);  // ZeRO-3 / FSDP: the full parameters exist while the op runs
  fresh_.clear();
  // Scratch kept by the interpreter (execute does not nest): no allocation per op.
  std::vector<BufferId>& out_buf = execute_outputs_;
  out_buf.assign(op.outputs.size(), kNone);
  for (size_t j = 0; j < op.outputs.size(); ++j) {
    TensorId out = op.outputs[j];
    if (fp.output_alias[j] >= 0) {
      out_buf[j] = buf_of_[static_cast<size_t>(op.inputs[static_cast<size_t>(fp.output_alias[j])])];
    } else if (j == 0 && fp.into_gather_buffer) {
      out_buf[j] = gather_buffer(g_.tensor(out));  // sequence parallelism: a view of Megatron's buffer
    } else {
      Category cat = saved_storage[static_cast<size_t>(storage_[static_cast<size_t>(out)])] ? Category::SavedActivations : Category::Activations;
      if (kv_cache_[static_cast<size_t>(out)]) cat = Category::KvCache;
      int64_t bytes = (j == 0 && fp.output_bytes >= 0) ? fp.output_bytes : g_.tensor(out).bytes();
      out_buf[j] = new_buffer(bytes, cat, buffer_name(g_.tensor(out).name), op.id);
      fresh_.push_back(out_buf[j]);
    }
    buf_of_[static_cast<size_t>(out)] = out_buf[j];
    ref(out_buf[j], uses[static_cast<size_t>(out)]);
  }
  std::vector<BufferId>& extra_buf = execute_extras_;
  extra_buf.clear();
  for (const ExtraBuffer& e : fp.extras) {
    bool kept = std::any_of(fp.saved.begin(), fp.saved.end(), [&](const Ref& r) {
      return r.kind == Ref::Kind::Extra && r.index == static_cast<int>(extra_buf.size());
    });
    extra_buf.push_back(new_buffer(e.bytes, kept ? Category::SavedActivations : Category::Temporaries,
                                   buffer_name(op.name, ".", e.name), op.id));
    fresh_.push_back(extra_buf.back());
  }
  std::vector<BufferId>& temps = execute_temps_;
  temps.clear();
  for (const LocalEvent& e : fp.events) {
    switch (e.kind) {
      case LocalEvent::Kind::AllocOutput: alloc(out_buf[static_cast<size_t>(e.index)]); break;
      case LocalEvent::Kind::AllocExtra: alloc(extra_buf[static_cast<size_t>(e.index)]); break;
      case LocalEvent::Kind::AllocTemp: {
        BufferId t = new_buffer(e.bytes, e.workspace ? Category::Workspaces : Category::Temporaries,
                                buffer_name(op.name, e.workspace ? ".workspace" : ".tmp"), op.id);
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
    n.saved.reserve(n.saved.size() + fp.saved.size());
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
  if (o_.sharding.reshard_after_forward()) release_gather(op.id);
}

Program Interpreter::run() {
  setup();
  if (o_.mode == RunMode::Inference) {
    forward(/*iteration=*/0, /*micro=*/0, Phase::Inference);
  } else {
    HEADROOM_CHECK(g_.loss != kNone, "training needs a loss");
    param_grad_.assign(g_.tensors.size(), kNone);
    for (int it = 1; it <= o_.iterations; ++it) {
      if (o_.pipeline.active) {
        run_pipeline_order(it);
      } else {
        for (int mb = 1; mb <= o_.micro_batches; ++mb) {
          forward(it, mb, Phase::Forward);
          backward(it, mb);
        }
      }
      if (o_.sharding.engine == ShardingEngine::DeepSpeed) deepspeed_optimizer_step(it);
      else if (megatron()) megatron_optimizer_step(it);
      else optimizer_step(it);
      if (it == 1 && o_.iterations > 1) reserve_for(o_.iterations);
    }
  }
  validate_program(p_);
  return std::move(p_);
}

void Interpreter::setup() {
  buf_of_.assign(g_.tensors.size(), kNone);
  kv_cache_.assign(g_.tensors.size(), false);
  for (TensorId t : g_.kv_cache) kv_cache_[static_cast<size_t>(t)] = true;
  begin_step(Phase::Setup, 0, 0, kNone, "weights and inputs");
  for (const Tensor& t : g_.tensors) {
    bool weight = g_.is_weight(t.id);
    bool input = t.role == TensorRole::Input || (t.role == TensorRole::Target && o_.mode == RunMode::Training);
    if (!weight && !input) continue;
    if (t.tied_to != kNone) {
      buf_of_[static_cast<size_t>(t.id)] = buf_of_[static_cast<size_t>(t.tied_to)];
      continue;
    }
    if (pipeline_received(t.id)) continue;  // a p2p receive per micro-batch (interpreter_pipeline.cc)
    if (flat_carrier(t.id) != t.id) {
      buf_of_[static_cast<size_t>(t.id)] = buf_of_[static_cast<size_t>(flat_carrier(t.id))];  // a view of the unit's flat shard
      continue;
    }
    Category cat = weight ? Category::Weights : kv_cache_[static_cast<size_t>(t.id)] ? Category::KvCache : Category::Inputs;
    BufferId b = new_buffer(stored_param_bytes(t), cat,
                            buffer_name(t.name, o_.sharding.params_sharded() && t.role == TensorRole::Parameter ? " (shard)" : ""), kNone);
    alloc(b);
    ref(b);  // held by the model or the data loader for the whole run
    buf_of_[static_cast<size_t>(t.id)] = b;
    if (param_on_host(t)) host_state(host_param_bytes(t), t.name + " (shard, host)");
  }
  megatron_setup();
  deepspeed_setup_states();
  ddp_setup_buckets();
  end_step();
}

void Interpreter::forward(int iteration, int micro, Phase phase) {
  const bool grad_mode = phase == Phase::Forward;
  if (grad_mode && !(iteration == 1 && micro == 1)) ddp_rebuild_buckets(iteration, micro);
  requires_grad_.assign(g_.tensors.size(), false);
  for (const Tensor& t : g_.tensors) requires_grad_[static_cast<size_t>(t.id)] = grad_mode && t.requires_grad();
  // Megatron's p2p receive makes the hidden state with requires_grad=True: its gradient is sent back.
  for (const PipelineChunk& c : o_.pipeline.chunks) {
    if (c.received != kNone) requires_grad_[static_cast<size_t>(c.received)] = grad_mode;
  }
  nodes_.assign(g_.ops.size(), Node{});
  grad_.assign(g_.tensors.size(), GradValue{});
  segment_saved_.assign(segments_.size(), {});
  segment_state_.assign(segments_.size(), SegmentState::Forward);
  segment_held_.assign(segments_.size(), {});
  segment_incoming_.assign(segments_.size(), {});
  closure_inputs_.assign(segments_.size(), {});
  closure_rng_.assign(segments_.size(), kNone);
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
  // Inputs the caller drops mid-run give up their setup reference (taken in setup()).
  HEADROOM_CHECK(g_.input_releases.empty() || phase == Phase::Inference, "inputs released in a training run");
  for (const Hold& h : g_.input_releases) hold_release[static_cast<size_t>(h.until)].push_back(h.tensor);
  // A pipeline chunk that sends its output on returns only that (the model's outputs and loss
  // terms belong to the last chunk of the last stage).
  std::vector<TensorId> returned = chunk_sends() ? std::vector<TensorId>{} : g_.outputs;
  if (phase == Phase::Forward) {
    returned.push_back(loss_tensor());
    if (!chunk_sends()) returned.insert(returned.end(), g_.loss_terms.begin(), g_.loss_terms.end());
  }
  for (TensorId t : returned) ++uses[static_cast<size_t>(t)];
  returned_ = returned;
  // Leaves (weights, inputs, targets) already have buffers; each read by an op is a reference.
  for (const Tensor& t : g_.tensors) {
    BufferId b = buf_of_[static_cast<size_t>(t.id)];
    if (t.producer == kNone && b != kNone) ref(b, uses[static_cast<size_t>(t.id)]);
  }

  const ForwardSetup& setup = forward_setup(grad_mode);
  requires_grad_ = setup.requires_grad;
  redirect_ = setup.redirect;
  storage_ = setup.storage;
  grad_plans_ = setup.grad_plans;
  plain_plans_ = setup.plain_plans;
  region_hooks_save_ = setup.region_hooks_save;
  const std::vector<const ForwardPlan*>& plans = setup.plans;
  const std::vector<bool>& saved_storage = setup.saved_storage;

  for (const Op& op : g_.ops) {
    if (!op_runs(op)) continue;
    const ForwardPlan& fp = *plans[static_cast<size_t>(op.id)];
    begin_op_step(phase, iteration, micro, op);
    if (grad_mode) {
      // Outermost regions are checkpoint nodes of the graph; regions nested in them are called
      // under their no_grad and keep nothing.
      for (int r : starting_[static_cast<size_t>(op.id)]) {
        if (non_reentrant_) enter_hooked_call(r, nullptr, op.name);
        else enter_call(r, /*grad_call=*/parent_[static_cast<size_t>(r)] < 0, -1, op.name);
      }
    }
    // FSDP forward_prefetch / DeepSpeed's prefetch: the next unit is gathered while this one runs.
    if (gathers_ && o_.sharding.prefetch_forward) gather(next_param_op_[static_cast<size_t>(op.id)]);
    execute(op, fp, uses, saved_storage, /*may_offload=*/grad_mode);
    for (TensorId t : hold_release[static_cast<size_t>(op.id)]) unref(buf_of_[static_cast<size_t>(t)]);
    leave_calls(op.id);
    release_fresh();
    if (grad_mode) offload_ready();
    end_step();
  }
  offload_candidates_.clear();  // still referenced by the forward at its end: not offloaded
  if (phase == Phase::Inference) {
    begin_step(phase, iteration, micro, kNone, "drop outputs");
    release_all_gathered();
    release_returned();
    end_step();
  }
}

const Interpreter::ForwardSetup& Interpreter::forward_setup(bool grad_mode) {
  auto [found, made] = forward_setups_.try_emplace({grad_mode, chunk_});
  ForwardSetup& setup = found->second;
  if (!made && setup.initial_requires_grad == requires_grad_) return setup;
  setup.initial_requires_grad = requires_grad_;
  // Plans first: which storages some node saves decides their category from birth. The plan
  // autograd would record (grad_plans_) decides which tensors require grad and what a
  // checkpointed segment saves when it is recomputed; a checkpointed op runs under no_grad.
  std::vector<const ForwardPlan*> plans(g_.ops.size(), nullptr);
  auto hooked_plans = std::make_shared<std::vector<ForwardPlan>>(non_reentrant_ ? g_.ops.size() : 0);
  auto grad_plans = std::make_shared<std::vector<ForwardPlan>>(g_.ops.size());
  auto plain_plans = std::make_shared<std::vector<ForwardPlan>>(g_.ops.size());
  grad_plans_ = PlanTable(grad_plans);  // hooked_saves() reads it
  plain_plans_ = PlanTable(plain_plans);
  redirect_.assign(g_.tensors.size(), kNone);
  region_hooks_save_.assign(segments_.size(), false);
  std::vector<bool> saved_storage(g_.tensors.size(), false);
  storage_.resize(g_.tensors.size());
  for (size_t i = 0; i < storage_.size(); ++i) storage_[i] = static_cast<TensorId>(i);
  for (const Op& op : g_.ops) {
    if (!op_runs(op)) continue;
    const bool checkpointed = grad_mode && segment_of_[static_cast<size_t>(op.id)] >= 0;
    ForwardPlan& gp = (*grad_plans)[static_cast<size_t>(op.id)];
    gp = forward_plan(context(op, grad_mode));
    if (segment_of_[static_cast<size_t>(op.id)] >= 0) (*plain_plans)[static_cast<size_t>(op.id)] = forward_plan(context(op, false));
    // A checkpointed op runs under no_grad (reentrant) or records a node that keeps nothing
    // (non-reentrant: its saved tensors go through the region's pack hook).
    const ForwardPlan* run_plan = &gp;
    if (checkpointed && non_reentrant_) {
      ForwardPlan& hooked = (*hooked_plans)[static_cast<size_t>(op.id)];
      hooked = hooked_plan(gp);
      run_plan = &hooked;
    } else if (checkpointed) {
      run_plan = &(*plain_plans)[static_cast<size_t>(op.id)];
    }
    plans[static_cast<size_t>(op.id)] = run_plan;
    const ForwardPlan& fp = *run_plan;
    if (checkpointed && hooked_saves(op.id)) region_hooks_save_[static_cast<size_t>(segment_of_[static_cast<size_t>(op.id)])] = true;
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
      // Reentrant: a nested call runs under its outer call's no_grad and keeps nothing.
      // Non-reentrant: every call's closure keeps its arguments.
      if (parent_[s] >= 0 && !non_reentrant_) continue;
      for (TensorId t : segment_inputs_[s]) saved_storage[static_cast<size_t>(storage_[static_cast<size_t>(t)])] = true;
    }
  }

  setup.requires_grad = requires_grad_;
  setup.redirect = redirect_;
  setup.storage = storage_;
  setup.plans = std::move(plans);
  setup.hooked_plans = std::move(hooked_plans);
  setup.grad_plans = grad_plans_;
  setup.plain_plans = plain_plans_;
  setup.saved_storage = std::move(saved_storage);
  setup.region_hooks_save = region_hooks_save_;
  return setup;
}

void Interpreter::mark_saved(const Op& op, const ForwardPlan& fp, std::vector<bool>& saved_storage) const {
  for (const Ref& r : fp.saved) {
    if (r.kind == Ref::Kind::Input) saved_storage[static_cast<size_t>(storage_[static_cast<size_t>(op.inputs[static_cast<size_t>(r.index)])])] = true;
    if (r.kind == Ref::Kind::Output) saved_storage[static_cast<size_t>(storage_[static_cast<size_t>(op.outputs[static_cast<size_t>(r.index)])])] = true;
  }
}

GradValue Interpreter::sum_gradients(TensorId t, GradValue old, GradValue add) {
  // old_var.add_(var) when the engine holds the only reference to a dense old_var
  // (DeviceProfile::grad_accumulate_inplace). Not for a parameter used twice: measured on the
  // H100, gpt2's tied wte/lm_head gradients are summed into a new buffer (the lm_head's is the
  // transposed view that mm_mat2_backward returns, which can_accumulate_inplace refuses).
  if (o_.device.grad_accumulate_inplace && g_.tensor(t).role != TensorRole::Parameter &&
      refs_[static_cast<size_t>(old.buffer)] == 1 && old.contiguous &&
      p_.buffers[static_cast<size_t>(old.buffer)].bytes == g_.tensor(t).bytes()) {
    unref(add.buffer);
    return old;
  }
  BufferId sum = new_buffer(g_.tensor(t).bytes(), Category::ActivationGradients, buffer_name(g_.tensor(t).name, ".grad(sum)"), kNone);
  alloc(sum);
  ref(sum);
  unref(old.buffer);
  unref(add.buffer);
  return {sum, true};
}

GradValue Interpreter::accumulate_into_grad(TensorId t, GradValue g) {
  if (refs_[static_cast<size_t>(g.buffer)] == 1 && g.contiguous && p_.buffers[static_cast<size_t>(g.buffer)].bytes == g_.tensor(t).bytes()) return g;
  BufferId copy = new_buffer(g_.tensor(t).bytes(), Category::ActivationGradients, buffer_name(g_.tensor(t).name, ".grad"), kNone);
  alloc(copy);
  ref(copy);
  unref(g.buffer);
  return {copy, true};
}

void Interpreter::deliver(TensorId target, GradValue g, int iteration, int micro) {
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

void Interpreter::accumulate_grad(TensorId param, int, int) {
  GradValue g = grad_[static_cast<size_t>(param)];
  grad_[static_cast<size_t>(param)] = {};
  ddp_mark_ready(param);
  if (block_units() && param_unit_[static_cast<size_t>(param)] >= 0) {
    unit_gradient(param, g);  // the FlatParameter's split node holds it (interpreter_fsdp_units.cc)
    return;
  }
  if (megatron()) {
    megatron_accumulate(param, g);
    return;
  }
  if (o_.sharding.grads_sharded() || fsdp_mixed_ || (o_.sharding.engine == ShardingEngine::Fsdp && o_.sharding.offload_params)) {
    reduce_gradient(param, g);
    return;
  }
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
  pg = new_buffer(g_.tensor(param).bytes(), Category::Gradients, buffer_name(g_.tensor(param).name, ".grad"), kNone);
  alloc(pg);
  ref(pg);
  unref(g.buffer);
}

const BackwardPlan& Interpreter::node_backward_plan(const Op& op, bool contiguous) {
  auto make = [&] {
    backward_plan_store_.push_back(backward_plan(context(op, true), contiguous));
    // The plan's staging buffers name their reductions by the program's index from here on.
    BackwardPlan& plan = backward_plan_store_.back();
    const auto at = static_cast<int32_t>(p_.cuda_reductions.size());
    for (LocalEvent& e : plan.events) {
      if (e.reduction >= 0) e.reduction += at;
    }
    p_.cuda_reductions.insert(p_.cuda_reductions.end(), plan.cuda_reductions.begin(), plan.cuda_reductions.end());
    return static_cast<int32_t>(backward_plan_store_.size()) - 1;
  };
  if (op.inputs.size() > 64) return backward_plan_store_[static_cast<size_t>(make())];  // not cached
  uint64_t mask = 0;
  for (size_t i = 0; i < op.inputs.size(); ++i) mask |= static_cast<uint64_t>(input_requires_grad(op, i)) << i;
  BackwardPlanSlot& first = first_backward_plan_[static_cast<size_t>(op.id)];
  if (first.plan < 0) first = {mask, contiguous, make()};
  if (first.mask == mask && first.contiguous == contiguous) return backward_plan_store_[static_cast<size_t>(first.plan)];
  auto [other, fresh] = other_backward_plans_.try_emplace({op.id, mask, contiguous}, -1);
  if (fresh) other->second = make();
  return backward_plan_store_[static_cast<size_t>(other->second)];
}

void Interpreter::backward(int iteration, int micro) {
  // Which nodes the engine will run: those reachable from the loss through differentiable edges.
  std::vector<bool> reach(g_.ops.size(), false);
  deps_.assign(g_.tensors.size(), 0);
  const Tensor& loss = g_.tensor(loss_tensor());
  // A model without trainable parameters on the loss's path cannot be trained: the user's model,
  // not a broken invariant (an ONNX file of a parameter-free graph reaches here).
  if (loss.producer == kNone || !will_have_node(loss.producer)) {
    throw InputError(g_.parameter_count() == 0
                         ? "model '" + g_.model + "' has no parameters, so it cannot be trained (use --mode infer)"
                         : "the loss of model '" + g_.model + "' does not depend on any parameter, so it cannot be trained (use --mode infer)");
  }
  reach[static_cast<size_t>(loss.producer)] = true;
  // Gradients for a region's inputs meet at its detached copies (one per input tensor) and leave
  // the region as one gradient each, delivered in the graph holding the region's node (the
  // enclosing region's re-run, or the outer graph). An edge from op i to a tensor t made by op p
  // is seen by every region around i that starts after p (innermost first): the innermost gets
  // it from op i (one per input slot), each further one from the region just inside it (once),
  // and t's own graph from the outermost of them (once).
  segment_input_grads_.assign(segments_.size(), {});
  auto add_input_edge = [&](int r, TensorId t) {
    std::vector<DetachedInput>& list = segment_input_grads_[static_cast<size_t>(r)];
    auto it = std::find_if(list.begin(), list.end(), [&](const DetachedInput& d) { return d.tensor == t; });
    if (it == list.end()) list.push_back({t, {}, 1});
    else ++it->pending;
  };
  std::set<std::pair<int, TensorId>> region_edges;  // (region node, tensor): counted once
  for (int i = static_cast<int>(g_.ops.size()) - 1; i >= 0; --i) {
    if (!reach[static_cast<size_t>(i)]) continue;
    const Op& op = g_.ops[static_cast<size_t>(i)];
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      if (!input_requires_grad(op, k)) continue;
      TensorId in = leaf(op.inputs[k]);
      OpId prod = g_.tensor(in).producer;
      if (prod != kNone && will_have_node(prod)) reach[static_cast<size_t>(prod)] = true;
      int node = -1;  // the region whose node delivers to `in` so far; -1: op i itself
      if (prod != kNone && !non_reentrant_) {  // non-reentrant regions' nodes are the graph's
        for (int r = segment_of_[static_cast<size_t>(i)]; r >= 0 && segments_[static_cast<size_t>(r)].first > prod; r = parent_[static_cast<size_t>(r)]) {
          if (node < 0) add_input_edge(r, in);
          else if (region_edges.insert({node, in}).second) add_input_edge(r, in);
          node = r;
        }
      }
      if (node < 0 || region_edges.insert({node, in}).second) ++deps_[static_cast<size_t>(in)];
    }
  }
  // The last node of each region to run (the lowest op reached): after it, its backward returns.
  std::vector<OpId> segment_last_node(segments_.size(), kNone);
  for (size_t r = 0; r < segments_.size(); ++r) {
    for (OpId o = segments_[r].first; o <= segments_[r].last; ++o) {
      if (reach[static_cast<size_t>(o)]) {
        segment_last_node[r] = o;
        break;
      }
    }
  }
  // Non-reentrant: the closure of a region goes after the last of its own nodes with saves runs
  // (if one is never reached, with the graph).
  closure_last_node_.assign(segments_.size(), kNone);
  if (non_reentrant_) {
    std::vector<bool> unreached(segments_.size(), false);
    for (size_t o = 0; o < g_.ops.size(); ++o) {
      if (!op_runs(g_.ops[o]) || !hooked_saves(static_cast<OpId>(o))) continue;
      const size_t r = static_cast<size_t>(segment_of_[o]);
      if (!reach[o]) unreached[r] = true;
      else if (closure_last_node_[r] == kNone) closure_last_node_[r] = static_cast<OpId>(o);
    }
    for (size_t r = 0; r < segments_.size(); ++r) {
      if (unreached[r]) closure_last_node_[r] = kNone;
    }
  }
  // The regions around op i, outermost first.
  auto regions_of = [&](int i) {
    std::vector<int> chain;
    for (int r = segment_of_[static_cast<size_t>(i)]; r >= 0; r = parent_[static_cast<size_t>(r)]) chain.insert(chain.begin(), r);
    return chain;
  };
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

  in_backward_ = true;
  begin_unit_backward(reach);
  // A re-run reads the inputs its checkpoint kept; one that another op's node saved may have
  // been offloaded, and its copy back is allocated in a step of its own before the re-run (steps
  // tile the events), due by then.
  auto fetch_rerun_inputs = [&](const std::vector<BufferId>& inputs, const Op& at, int it, int mb) {
    if (std::none_of(inputs.begin(), inputs.end(), [&](BufferId b) { return offloaded_[static_cast<size_t>(b)]; })) return;
    begin_step(Phase::Backward, it, mb, at.id, "prefetch for the re-run (" + at.name + ")");
    need_on_device(inputs);
    end_step();
  };

  begin_step(Phase::Backward, iteration, micro, kNone, "loss.backward() seed");
  // A stage before the last starts from the gradient received for the hidden state it sent.
  BufferId seed = new_buffer(loss.bytes(), Category::ActivationGradients, chunk_sends() ? buffer_name("p2p recv ", loss.name, ".grad") : buffer_name("loss.grad (ones)"), kNone);
  alloc(seed);
  ref(seed, 2);  // torch.autograd.backward keeps grad_tensors until the whole backward returns
  grad_[static_cast<size_t>(leaf(loss_tensor()))] = {seed, true};
  reduce_bucket();
  prefetch_for(next_node(static_cast<int>(g_.ops.size()) - 1));
  end_step();

  for (int i = static_cast<int>(g_.ops.size()) - 1; i >= 0; --i) {
    if (!reach[static_cast<size_t>(i)]) continue;
    const Op& op = g_.ops[static_cast<size_t>(i)];
    const int seg = segment_of_[static_cast<size_t>(i)];
    const std::vector<int> regions = regions_of(i);
    // The backward reaches the regions around op i not re-run yet: the outer one's re-run makes
    // the inner ones' nodes, whose own re-run then follows.
    if (non_reentrant_ && seg >= 0 && hooked_saves(i) && segment_state_[static_cast<size_t>(seg)] == SegmentState::Forward) {
      fetch_rerun_inputs(closure_inputs_[static_cast<size_t>(seg)], op, iteration, micro);
      rerun_hooked(seg, iteration, micro);
    }
    for (int r : regions) {
      if (non_reentrant_ || segment_state_[static_cast<size_t>(r)] != SegmentState::Forward) continue;
      fetch_rerun_inputs(segment_saved_[static_cast<size_t>(r)], op, iteration, micro);
      recompute(r, iteration, micro);
    }
    begin_op_step(Phase::Backward, iteration, micro, op);
    need_on_device(nodes_[static_cast<size_t>(i)].saved);
    prefetch_for(next_node(i - 1));
    if (gathers_) {
      // _pre_backward_hook / pre_sub_module_backward_function: the unit's parameters again,
      // and with BACKWARD_PRE prefetching the next unit's.
      gather(op.id);
      if (o_.sharding.prefetch_backward && !block_units()) {  // block units prefetch in gather()
        for (int j = i - 1; j >= 0; --j) {
          if (reach[static_cast<size_t>(j)] && !op_params_[static_cast<size_t>(j)].empty()) {
            gather(j);
            break;
          }
        }
      }
    }
    // The node's incoming gradients: one per output that received any (split has several).
    // Scratch kept by the interpreter: nothing below runs another node before these are read.
    std::vector<GradValue>& incoming = backward_incoming_;
    incoming.clear();
    for (TensorId out : op.outputs) {
      GradValue& gv = grad_[static_cast<size_t>(out)];
      if (gv.buffer != kNone) incoming.push_back(gv);
      gv = {};
    }
    HEADROOM_CHECK(!incoming.empty(), "node runs without a gradient: " + op.name);
    GradValue in_grad = incoming[0];
    // A node's backward runs mm (beta 0), never cublasLt: only the cuBLAS workspace.
    if (uses_cublas(op)) cublas_workspace(backward_workspace_, o_.device.cublas_workspace_bytes, "cuBLAS workspace (autograd thread)");
    p_.context_use.backward = true;
    if (is_convolution_kind(op.kind)) p_.context_use.convolution_backward = true;
    const BackwardPlan& bp = node_backward_plan(op, in_grad.contiguous);
    std::vector<GradValue>& outs = backward_outs_;
    outs.assign(bp.grads.size(), GradValue{});
    std::vector<BufferId>& temps = backward_temps_;
    temps.clear();
    for (size_t gi = 0; gi < bp.grads.size(); ++gi) {
      const GradOut& go = bp.grads[gi];
      if (go.kind == GradOut::Kind::New) {
        const Tensor& in = g_.tensor(op.inputs[static_cast<size_t>(go.input)]);
        outs[gi] = {new_buffer(go.bytes, Category::ActivationGradients, buffer_name(in.name, ".grad"), op.id), go.contiguous};
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
                                  buffer_name(op.name, e.workspace ? ".grad_workspace" : ".grad_tmp"), op.id);
          p_.buffers[static_cast<size_t>(t)].reduction = e.reduction;
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
    if (non_reentrant_ && seg >= 0 && closure_last_node_[static_cast<size_t>(seg)] == i) release_closure(seg);
    running_segment_ = seg;
    for (size_t gi = 0; gi < bp.grads.size(); ++gi) {
      deliver(op.inputs[static_cast<size_t>(bp.grads[gi].input)], outs[gi], iteration, micro);
    }
    running_segment_ = -1;
    for (auto r = regions.rbegin(); r != regions.rend() && !non_reentrant_; ++r) {
      if (segment_last_node[static_cast<size_t>(*r)] == i) finish_segment(*r, iteration, micro);
    }
    release_gather(op.id);  // _post_backward_hook reshards; release_sub_module
    end_step();
  }
  begin_step(Phase::Backward, iteration, micro, kNone, "drop outputs and loss");
  unref(seed);
  release_all_gathered();
  in_backward_ = false;
  // Dropping the outputs and the loss frees the graph, and with it the checkpoint nodes' ctx.
  for (BufferId b : graph_held_) unref(b);
  graph_held_.clear();
  // Non-reentrant closures whose hooks a node never reached still held.
  for (size_t r = 0; r < segments_.size() && non_reentrant_; ++r) {
    if (!closure_inputs_[r].empty() || closure_rng_[r] != kNone) release_closure(static_cast<int>(r));
  }
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

}  // namespace headroom::schedule_detail

namespace headroom {

namespace {

// The program of every micro-batch from the interpreter's first few (schedule/micro_batch_fold.h),
// or nullopt where there are too few to fold or the fold does not apply.
std::optional<Program> folded_program(const Graph& g, const ScheduleOptions& options) {
  const PipelineRun& pipe = options.pipeline;
  if (pipe.active && pipe.stages < 1) return std::nullopt;
  int built = kFoldTemplateMicroBatch + 1;
  // The interleaved schedule needs a multiple of P micro-batches.
  if (pipe.active && pipe.kind == PipelineScheduleKind::Interleaved) built = (built + pipe.stages - 1) / pipe.stages * pipe.stages;
  if (options.micro_batches <= built) return std::nullopt;
  ScheduleOptions few = options;
  few.micro_batches = built;
  std::vector<PipelineAction> built_order, order;
  if (pipe.active) {
    built_order = pipeline_order(pipe.kind, pipe.stages, pipe.stage, built, static_cast<int>(pipe.chunks.size()));
    few.pipeline.order = built_order;
    order = pipe.order;
  } else {
    built_order = accumulation_order(built);
    order = accumulation_order(options.micro_batches);
  }
  std::optional<Program> p = expand_micro_batches(schedule_detail::Interpreter(g, few).run(), built_order, built, order, options.micro_batches);
  if (p) validate_program(*p);
  return p;
}

}  // namespace

Program build_program(const Graph& g, const ScheduleOptions& options) {
  HEADROOM_CHECK(options.iterations >= 1 && options.micro_batches >= 1, "at least one iteration and micro-batch");
  if (options.mode == RunMode::Training) {
    if (std::optional<Program> p = folded_program(g, options)) return std::move(*p);
  }
  return schedule_detail::Interpreter(g, options).run();
}

}  // namespace headroom
