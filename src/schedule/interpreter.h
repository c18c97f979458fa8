// The interpreter behind build_program (internal to src/schedule): it walks a Graph the way
// Python and the autograd engine hold references and writes the Program's events. Split by
// concern: build_program.cc (setup, forward, backward), interpreter_plan.cc (memory plans:
// checkpoint segments and offloading), interpreter_optimizer.cc (the optimizer step),
// interpreter_sharding.cc (ZeRO / FSDP: one data-parallel rank's model states),
// interpreter_megatron.cc (Megatron-LM's DDP buffers and optimizers).
//
// Invariants: one Interpreter builds one Program (run() once); every reference taken is dropped
// exactly once (unref checks underflow); the Program passes validate_program.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "schedule/build_program.h"
#include "schedule/fsdp_units.h"
#include "training/op_rules.h"
#include "util/error.h"

namespace headroom::schedule_detail {

struct GradValue {
  BufferId buffer = kNone;
  bool contiguous = true;
};

// One autograd node recorded in the forward: the buffers it keeps for its backward.
struct Node {
  bool exists = false;
  std::vector<BufferId> saved;
};

// Per op, the forward plans of one forward: made once per grad mode and pipeline chunk
// (Interpreter::forward_setup) and shared, read-only, by every forward that makes the same
// decisions.
class PlanTable {
 public:
  PlanTable() = default;
  explicit PlanTable(std::shared_ptr<const std::vector<ForwardPlan>> plans) : plans_(std::move(plans)) {}
  const ForwardPlan& operator[](size_t op) const { return (*plans_)[op]; }
  void clear() { plans_.reset(); }

 private:
  std::shared_ptr<const std::vector<ForwardPlan>> plans_;
};

class Interpreter {
 public:
  Interpreter(const Graph& g, const ScheduleOptions& o);

  Program run();

 private:
  // ---- buffers and references -------------------------------------------------------------
  // `name` is dropped when the run writes no buffer names (ScheduleOptions::names); the
  // hot callers build it with buffer_name() so that nothing is concatenated then.
  BufferId new_buffer(int64_t bytes, Category cat, std::string name, OpId op) {
    p_.buffers.push_back(Buffer{bytes, cat, o_.names ? std::move(name) : std::string(), op});
    refs_.push_back(0);
    saved_refs_.push_back(0);
    offloaded_.push_back(false);
    replacement_.push_back(kNone);
    pending_prefetch_.push_back(-1);
    offload_op_of_.push_back(kNone);
    return static_cast<BufferId>(p_.buffers.size()) - 1;
  }
  // A buffer's name joined from its parts, or "" (no allocation) without buffer names.
  template <typename... Parts>
  std::string buffer_name(const Parts&... parts) const {
    std::string name;
    if (!o_.names) return name;
    name.reserve((std::string_view(parts).size() + ...));
    (name.append(std::string_view(parts)), ...);
    return name;
  }
  // Room for `iterations` times what the program holds now (called after the first training
  // iteration, which every later one repeats): the program and the per-buffer state grow once
  // instead of by doubling, which copied them and returned large blocks to malloc.
  void reserve_for(int iterations) {
    const size_t n = static_cast<size_t>(iterations);
    p_.events.reserve(p_.events.size() * n);
    p_.steps.reserve(p_.steps.size() * n);
    const size_t buffers = p_.buffers.size() * n;
    p_.buffers.reserve(buffers);
    refs_.reserve(buffers);
    saved_refs_.reserve(buffers);
    offloaded_.reserve(buffers);
    replacement_.reserve(buffers);
    pending_prefetch_.reserve(buffers);
    offload_op_of_.reserve(buffers);
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
  // A step that runs `op` in the forward or the backward, labelled by its name (none without names).
  void begin_op_step(Phase phase, int iteration, int micro, const Op& op) {
    begin_step(phase, iteration, micro, op.id, o_.names ? op.name : std::string());
  }
  void end_step() { p_.steps.back().end_event = static_cast<int32_t>(p_.events.size()); }

  // ---- setup: weights and inputs live from the start -------------------------------------
  void setup();

  bool op_runs(const Op& op) const {
    if (chunk_ >= 0) {
      const PipelineChunk& c = o_.pipeline.chunks[static_cast<size_t>(chunk_)];
      if (op.id < c.first || op.id > c.last) return false;  // another model chunk of the pipeline rank
    }
    return o_.mode == RunMode::Training || op.stage == OpStage::Model;
  }
  // What the backward starts from: the loss, or the running pipeline chunk's output.
  TensorId loss_tensor() const { return chunk_ >= 0 ? o_.pipeline.chunks[static_cast<size_t>(chunk_)].output : g_.loss; }
  bool chunk_sends() const { return chunk_ >= 0 && o_.pipeline.chunks[static_cast<size_t>(chunk_)].sends; }
  bool pipeline_received(TensorId t) const {
    for (const PipelineChunk& c : o_.pipeline.chunks) {
      if (c.received == t) return true;
    }
    return false;
  }

  // Whether the backward will find a node for op p: recorded in the forward, or recorded when
  // its checkpointed segment is re-run.
  bool will_have_node(OpId p) const {
    return nodes_[static_cast<size_t>(p)].exists ||
           (segment_of_[static_cast<size_t>(p)] >= 0 && grad_plans_[static_cast<size_t>(p)].creates_node);
  }

  // Whether the op's input i requires grad in the current state (RuleContext::input_requires_grad
  // of a grad-mode context).
  bool input_requires_grad(const Op& op, size_t i) const {
    return requires_grad_[static_cast<size_t>(op.inputs[i])] && differentiable_input(op, static_cast<int>(i));
  }
  // backward_plan(context(op, true), contiguous), made once per program for each (inputs requiring
  // grad, contiguity) an op's node meets: every micro-batch and iteration asks the same. The plan
  // is a function of the op, its device profile (fixed per op), that contiguity and which inputs
  // require grad, so the cache is keyed by exactly those. Owned by the cache (stable address).
  const BackwardPlan& node_backward_plan(const Op& op, bool contiguous);

  RuleContext context(const Op& op, bool grad_mode) const {
    const DeviceProfile& device = no_workspace_op_[static_cast<size_t>(op.id)] ? no_workspace_device_ : o_.device;
    RuleContext c{g_, op, device, grad_mode, o_.mode == RunMode::Training, std::vector<bool>(op.inputs.size(), false)};
    if (!grad_mode) return c;
    for (size_t i = 0; i < op.inputs.size(); ++i) c.input_requires_grad[i] = input_requires_grad(op, i);
    return c;
  }

  // ---- forward -----------------------------------------------------------------------------
  void forward(int iteration, int micro, Phase phase);

  // What a forward decides before it runs an op, from the graph, the options, the grad mode, the
  // chunk and which tensors require grad at its start: each op's plans, which tensors require
  // grad, alias a storage or redirect gradients, which storages some node saves. Every forward
  // of a program (k micro-batches, two iterations) decides the same, so it is made once per
  // (grad mode, chunk) and reused while requires_grad_ at the start is the same.
  struct ForwardSetup {
    std::vector<bool> initial_requires_grad;
    std::vector<bool> requires_grad;
    std::vector<TensorId> redirect, storage;
    // Per op, the plan as run: its grad_plans entry, or for a checkpointed op its plain_plans
    // entry (no_grad) or its hooked_plans one (non-reentrant); pointers into those tables.
    std::vector<const ForwardPlan*> plans;
    PlanTable grad_plans, plain_plans;
    std::shared_ptr<const std::vector<ForwardPlan>> hooked_plans;
    std::vector<bool> saved_storage;
    std::vector<bool> region_hooks_save;
  };
  std::map<std::pair<bool, int>, ForwardSetup> forward_setups_;
  const ForwardSetup& forward_setup(bool grad_mode);

  void mark_saved(const Op& op, const ForwardPlan& fp, std::vector<bool>& saved_storage) const;

  // Runs one forward op: its outputs, extras and temporaries, its node's saved references, and
  // the return (inputs lose this reference). Fresh buffers nobody references are freed by
  // release_fresh() after the caller drops Python locals.
  void execute(const Op& op, const ForwardPlan& fp, const std::vector<int>& uses,
               const std::vector<bool>& saved_storage, bool may_offload);

  void release_fresh() {
    for (BufferId b : fresh_) free_if_unreferenced(b);
    fresh_.clear();
  }

  // ---- offloading --------------------------------------------------------------------------
  // A candidate goes to host once autograd's saved references are all that hold it.
  void offload_ready();

  // Copies an offloaded buffer back to the device, allocated now; the transfer's deadline is the
  // step of the node that first reads it (set by need_on_device).
  void prefetch(BufferId b);
  void need_on_device(const std::vector<BufferId>& saved);
  // Dropping a saved reference: an offloaded buffer's references moved to its prefetched copy.
  void release_saved(BufferId b);
  BufferId on_device(BufferId b) const {
    while (replacement_[static_cast<size_t>(b)] != kNone) b = replacement_[static_cast<size_t>(b)];
    return b;
  }

  // ---- checkpointed segments -----------------------------------------------------------------
  // A checkpoint call starts at region r's first op. Under grad (a top-level region in the
  // forward, or a region directly inside the one being re-run) it is a CheckpointFunction node:
  // it keeps r's inputs and its ctx's RNG state, which lives as long as the graph holding the
  // node (`owner`'s re-run, or the whole graph when owner < 0). Under no_grad (a region nested
  // in one running without grad) nothing is kept: its inputs (the call's arguments) and RNG
  // state live until the call returns (leave_calls after its last op).
  void enter_call(int r, bool grad_call, int owner, const std::string& where);
  void leave_calls(OpId o);

  // Re-runs segment s's forward with grad, at the point the backward first reaches it.
  void recompute(int s, int iteration, int micro);
  // Shared by both re-runs of region s (reentrant recompute, non-reentrant rerun_hooked): the
  // references its ops take per tensor (their inputs, the function locals it holds until it
  // returns, its return value) and, per op, the locals released after it.
  // Made once per region and run (they depend on the graph and the regions only): a region is
  // re-run in every micro-batch's backward, and the dense tables are the graph's size.
  struct RerunUses {
    std::vector<int> uses;
    std::vector<std::vector<TensorId>> hold_release;
    std::vector<TensorId> read;  // the tensors with uses, ascending
  };
  const RerunUses& rerun_uses(int s);
  std::vector<std::unique_ptr<const RerunUses>> rerun_uses_;  // per region (sized with segments_), made on first use
  // Binds region s's inputs to `kept` (what its call kept) and references every tensor from
  // outside the region the re-run reads; the old bindings of its inputs and of every tensor its
  // ops write go onto `restore`.
  void bind_rerun_inputs(int s, const std::vector<BufferId>& kept, const RerunUses& uses,
                         std::vector<std::pair<TensorId, BufferId>>& restore);
  // The storages region s's own ops save in its re-run (ops of nested regions save in theirs).
  std::vector<bool> own_saved_storage(int s);
  // What both re-runs set up before region s's first op: its uses, its inputs bound to `kept`
  // (the old bindings on `restore`), the storages its own ops save. end_rerun puts the bindings
  // back, in reverse, so a nested re-run's rebinding never outlives it.
  struct Rerun {
    const RerunUses* uses = nullptr;  // rerun_uses(s)
    std::vector<std::pair<TensorId, BufferId>> restore;
    std::vector<bool> saved_storage;
  };
  Rerun begin_rerun(int s, const std::vector<BufferId>& kept);
  // Opens the re-run's step for op o of region s; at the region's first op it also takes
  // `torch.random.fork_rng`'s state (checkpoint.py:132 reentrant, :398 non-reentrant, 1.13), whose
  // buffer it returns (kNone otherwise or when the device keeps no RNG state).
  BufferId begin_rerun_step(int s, OpId o, int iteration, int micro);
  void end_rerun(const Rerun& r);

  // The segment's backward returned: its held outputs, incoming gradients and saved inputs go,
  // then the gradients of its inputs (returned by CheckpointFunction.backward) reach the outer
  // graph like any node's.
  void finish_segment(int s, int iteration, int micro);

  // A gradient for input `t` of the segment whose nodes are running: the re-run took
  // detach_variable() copies of its inputs (checkpoint.py:137), leaves of the nested graph, so
  // their gradients collect there (summed like any InputBuffer) and go through AccumulateGrad
  // into `inp.grad` when the last arrives; the backward returns them (checkpoint.py:158).
  bool deliver_to_detached_input(TensorId t, GradValue g);

  // ---- non-reentrant checkpoint (interpreter_hooked_checkpoint.cc) -------------------------
  // _checkpoint_without_reentrant (torch/utils/checkpoint.py:326 in 1.13): the region runs with
  // grad under saved_tensors_hooks; pack stores a Holder, not the tensor, and the unpack closure
  // keeps the call's `args` and `fwd_cpu_state`.

  // Whether op o's node saves something through the hooks of its innermost region (its pack
  // runs, so its unpack will re-run the region).
  bool hooked_saves(OpId o) const;
  // The forward plan of an op run under the pack hook: autograd records its node, which keeps
  // nothing.
  static ForwardPlan hooked_plan(const ForwardPlan& fp) {
    ForwardPlan h = fp;
    h.saved.clear();
    return h;
  }
  // Region r's call starts: get_rng_state() and the arguments, held by the closure. A region
  // whose own nodes save nothing leaves no hook behind: its closure goes when the call returns.
  // `rerun_graph` (a call made inside a re-run): the closure goes with the re-run's graph.
  void enter_hooked_call(int r, std::vector<BufferId>* rerun_graph, const std::string& where);
  // The first unpack of region s's hooks: the region re-runs with grad from the closure's
  // arguments; its own nodes keep what they save (inner_pack's storage), the rest goes when
  // unpack returns.
  void rerun_hooked(int s, int iteration, int micro);
  // The last of region s's own nodes that saved something has released its variables: the
  // closure (arguments, RNG state) goes.
  void release_closure(int s);

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
  GradValue sum_gradients(TensorId t, GradValue old, GradValue add);

  // AccumulateGrad's first gradient for leaf t: stolen when nothing else references it and its
  // layout matches t; otherwise a contiguous clone, and the incoming gradient is dropped.
  GradValue accumulate_into_grad(TensorId t, GradValue g);

  void deliver(TensorId target, GradValue g, int iteration, int micro);

  // AccumulateGrad: the first gradient is stolen when nothing else references it and its layout
  // matches the parameter; otherwise it is cloned. Later micro-batches add in place.
  void accumulate_grad(TensorId param, int, int);

  void backward(int iteration, int micro);

  // ---- optimizer ---------------------------------------------------------------------------
  std::vector<TensorId> trainable() const;

  // One step of o_.optimizer: its OptimizerRule (training/optimizer_rules.h) replayed.
  void optimizer_step(int iteration);
  // The first step's state of parameter p under the rule, on the device or (FSDP CPUOffload)
  // recorded as host state.
  void create_optimizer_state(TensorId p, bool on_host);
  // The rule's state (when create_state) and update temporaries for the parameters ps, in the
  // rule's order: foreach once over all of them, else the single-tensor program per parameter.
  void replay_optimizer_update(const std::vector<TensorId>& ps, bool create_state);

  // What a torch.optim step over ps updates (Step::update): each parameter's state-sized value
  // (param_state_elements / _bytes), one tensor each, launched as the replayed implementation
  // (foreach or single-tensor); `on_host` under FSDP CPUOffload. Empty when ps is.
  ParamUpdate torch_optim_update(const std::vector<TensorId>& ps, bool on_host) const;
  // Sets the update of the optimizer step begun last.
  void set_update(const ParamUpdate& u) { p_.steps.back().update = u; }

  // 1.13's Optimizer.step and zero_grad open a record_function scope: a 4-byte handle and a
  // 288-byte RecordFunction holder, both freed before the work starts.
  void record_function();

  static bool uses_cublas(const Op& op) { return op.kind == OpKind::Linear || op.kind == OpKind::MatMul; }

  // The first cuBLAS call of a thread creates its handle's workspace of `bytes` (none when 0);
  // it is never freed.
  void cublas_workspace(BufferId& slot, int64_t bytes, const char* name);
  // The cuBLAS (and, for a biased Linear, cuBLASLt) workspaces an op creates on the thread that
  // runs it: the main thread in the forward, the autograd engine's device thread in backward()
  // (checkpoint re-runs included).
  void blas_workspaces(const Op& op);
  // Whether PyTorch 2.x runs the op through cublasLt's gemm_and_bias (Blas.cpp's Lt conditions).
  bool uses_cublaslt(const Op& op) const;

  // Megatron's GlobalMemoryBuffer "mpu" (megatron/core/utils.py get_tensor): one persistent buffer
  // per dtype, made by the first sequence-parallel all-gather and replaced by a larger one when
  // a later all-gather needs more (interpreter_sequence_parallel.cc).
  BufferId gather_buffer(const Tensor& gathered);

  // A Python float operand on the CPU: a float64 0-dim tensor and its fp32 cast, alive while the
  // op runs (none on CUDA, where they stay in host memory).
  std::vector<BufferId> python_scalar(const std::string& what);

  void state(int64_t bytes, std::string name);
  BufferId temp(int64_t bytes, std::string name);

  // ---- sharding (ZeRO / FSDP) ----------------------------------------------------------------
  void init_sharding();
  // Bytes of parameter t's storage on this rank (a shard, an fp32 flat parameter, or t itself).
  int64_t stored_param_bytes(const Tensor& t) const;
  // The shard (or whole parameter) the engine keeps, wherever it is kept.
  int64_t sharded_param_bytes(const Tensor& t) const;
  // Bytes of a per-parameter optimizer state (and its update temporaries) for parameter t.
  int64_t param_state_bytes(const Tensor& t) const;
  // The elements of that state (of the value the optimizer updates for t).
  int64_t param_state_elements(const Tensor& t) const;
  // DeepSpeed's flat fp32 master partition and its optimizer states, built with the engine.
  void deepspeed_setup_states();
  // The names of the fp32 moment partitions DeepSpeed keeps for the rule ("exp_avg partition").
  std::vector<std::string> partition_moments() const;
  // The full parameters op reads, allocated before it runs (all-gather / cast); idempotent.
  void gather(OpId op);
  void release_gather(OpId op);
  void release_all_gathered();
  // DeepSpeed stage 2/3 allocates its ipg bucket when the first backward of a step begins.
  void reduce_bucket();
  // A parameter's full gradient is reduce-scattered into this rank's partition and freed.
  void reduce_gradient(TensorId param, GradValue g);
  void deepspeed_optimizer_step(int iteration);

  // ---- FSDP units under block wrap (interpreter_fsdp_units.cc) -------------------------------
  // gather / release_gather / the gradient path go through these when block_units().
  bool block_units() const { return !fsdp_units_.units.empty(); }
  void init_fsdp_units();
  // _unshard: the unit's padded unsharded FlatParameter in the compute dtype; idempotent, and a
  // no-op for a unit whose post-backward already ran in this backward.
  void gather_unit(int u);
  void release_unit(int u);
  // BACKWARD_PRE: the next unit in the backward's order after op i's, gathered with it.
  void prefetch_next_unit(int i);
  // Which parameters of each unit get a gradient in the backward about to run, which ops it
  // reaches (`reach`).
  void begin_unit_backward(const std::vector<bool>& reach);
  // A parameter's gradient reached AccumulateGrad: held by the FlatParameter's split node until
  // the unit's last one, then the post-backward hook (reshard, reduce-scatter). unit_gradients():
  // the flat-gradient path applies (FULL_SHARD, SHARD_GRAD_OP without CPU offload); otherwise
  // each gradient takes reduce_gradient's path and the last one reshards the unit.
  bool unit_gradients() const;
  void unit_gradient(TensorId param, GradValue g);
  void unit_post_backward(int u);
  FsdpUnits fsdp_units_;
  std::vector<int> param_unit_;                    // per tensor: its unit, -1 outside
  std::vector<BufferId> unit_gathered_;            // per unit: its unsharded FlatParameter while alive
  std::vector<std::vector<BufferId>> unit_grads_;  // per unit: parameter gradients held by the split node
  std::vector<std::vector<TensorId>> unit_got_;    // per unit: the parameters those gradients are for
  std::vector<int> unit_pending_;                  // per unit: gradients still to come this backward
  std::vector<bool> unit_done_;                    // per unit: its post-backward ran this backward
  std::vector<BufferId> unit_grad_shard_;          // per unit: _saved_grad_shard, until zero_grad
  bool in_backward_ = false;                       // backward() runs (checkpoint re-runs included)
  std::vector<bool> unit_reach_;                   // per op: the running backward reaches it

  // ---- FSDP's FlatParameters (interpreter_fsdp_flat.cc) ----------------------------------------
  // One flat, padded shard per unit (flat_param.py FlatParamHandle._get_shard): the unit's
  // parameters share it, its gradient shard and (torch.optim sees one parameter per unit) its
  // optimizer state, all carried by the unit's first parameter.
  void init_fsdp_flat();
  bool flat_member(TensorId t) const { return !flat_of_.empty() && flat_of_[static_cast<size_t>(t)] >= 0; }
  // The parameter carrying t's FlatParameter (t itself outside one).
  TensorId flat_carrier(TensorId t) const { return flat_member(t) ? flat_rep_[static_cast<size_t>(flat_of_[static_cast<size_t>(t)])] : t; }
  std::vector<int> flat_of_;         // per tensor: its FlatParameter, -1 outside
  std::vector<int64_t> flat_numel_;  // per FlatParameter: its unsharded elements
  std::vector<TensorId> flat_rep_;   // per FlatParameter: its first parameter, the carrier

  // ---- engine offloading (interpreter_offload.cc) ---------------------------------------------
  void host_state(int64_t bytes, std::string name, bool nvme = false);
  // A parameter whose shard the engine keeps on the host: recorded there; its device buffer is empty.
  bool param_on_host(const Tensor& t) const;
  int64_t host_param_bytes(const Tensor& t) const;
  // DeepSpeed offload_optimizer: the fp32 master partition, its gradient and the optimizer
  // states on the host or NVMe, and what the engine keeps on the device for the copies.
  void deepspeed_offload_states(int64_t partition_elements);
  // The gradient's path to the host: DeepSpeed copies the bucket's part into the host
  // partition, FSDP copies the reduce-scattered shard into _cpu_grad.
  void offload_gradient(TensorId param, GradValue g);
  // FSDP CPUOffload: torch.optim on the host parameters (states created at the first step).
  void host_optimizer_step(int iteration);

  // ---- Megatron-LM's DDP and optimizers (interpreter_megatron.cc) -----------------------------
  bool megatron() const { return o_.sharding.engine == ShardingEngine::Megatron && o_.mode == RunMode::Training; }
  // Wrapping the model: the main_grad buffer (and under the distributed optimizer the padded
  // param_data buffer every trainable parameter becomes a view of), then the optimizer's fp32
  // main params. Called by setup() in place of allocating the trainable parameters one by one.
  void megatron_setup();
  // main_grad.add_(grad); param.grad = None: the gradient lands in the buffer and is freed.
  void megatron_accumulate(TensorId param, GradValue g);
  void megatron_optimizer_step(int iteration);
  std::vector<BufferId> megatron_grad_buffers_;   // per model chunk: grad_data
  std::vector<BufferId> megatron_param_buffers_;  // per model chunk: param_data (distributed optimizer)
  // The optimizer's main params: (parameter, elements), the rank's piece of it under the
  // distributed optimizer; the moments are made like them.
  std::vector<std::pair<TensorId, int64_t>> megatron_main_params_;

  // ---- DDP's gradient buckets (interpreter_ddp.cc) --------------------------------------------
  bool ddp_buckets() const;
  void ddp_allocate_buckets(const std::vector<TensorId>& params, bool limited);
  void ddp_setup_buckets();
  void ddp_mark_ready(TensorId param);  // the first backward's gradient-ready order
  void ddp_rebuild_buckets(int iteration, int micro);
  std::vector<BufferId> ddp_bucket_buffers_;
  std::vector<TensorId> ddp_ready_order_;
  bool ddp_rebuilt_ = false;

  bool gathers_ = false;                      // ops gather full parameters before they run
  bool fsdp_mixed_ = false;
  bool low_precision_ = false;                // 16-bit parameters (DeepSpeed's fp16/bf16 mode)                   // FSDP keeps fp32 flat parameters, computes in 16-bit
  int64_t flat_elements_ = 0;                 // trainable parameter elements (DeepSpeed's flat groups)
  std::vector<std::vector<TensorId>> op_params_;  // per op: the parameters it reads (through views)
  std::vector<OpId> next_param_op_;           // per op: the next op in graph order reading parameters
  std::vector<std::vector<BufferId>> gathered_;   // per op: its gathered parameters, while alive
  BufferId ipg_bucket_ = kNone;
  BufferId grad_partition_ = kNone;           // DeepSpeed's grads_in_partition (stage 2/3)
  std::vector<bool> grad_on_host_;            // per tensor: its gradient went to the host this step

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
  BufferId forward_lt_workspace_ = kNone;
  BufferId backward_lt_workspace_ = kNone;
  std::map<DType, BufferId> gather_buffers_;  // gather_buffer(): by dtype

  // The memory plan, resolved per op.
  DeviceProfile no_workspace_device_;
  std::vector<bool> no_workspace_op_;
  // node_backward_plan's cache: the plans in a deque (stable addresses), found through each op's
  // first (inputs requiring grad, contiguity) and, for the rare op that meets another, a map.
  struct BackwardPlanSlot {
    uint64_t mask = 0;  // bit i: input i requires grad
    bool contiguous = true;
    int32_t plan = -1;  // index in backward_plan_store_; -1: none yet
  };
  std::deque<BackwardPlan> backward_plan_store_;
  std::vector<BackwardPlanSlot> first_backward_plan_;  // per op, sized by the constructor
  std::map<std::tuple<OpId, uint64_t, bool>, int32_t> other_backward_plans_;
  std::vector<bool> offload_op_;
  std::vector<int> segment_of_;  // innermost segment of an op, -1 outside checkpoints
  std::vector<CheckpointSegment> segments_;  // outer before inner (validate_plan's order)
  std::vector<int> parent_;                  // per segment: the segment directly enclosing it, or -1
  std::vector<std::vector<int>> starting_;   // per op: the segments starting there, outer first
  std::vector<std::vector<BufferId>> call_held_;     // per segment: a no_grad call's arguments and RNG state
  std::vector<std::vector<BufferId>> region_graph_held_;  // per segment: its re-run's checkpoint nodes' RNG states
  PlanTable plain_plans_;  // per op: the plan without autograd recording (no_grad)
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
  bool non_reentrant_ = false;         // the plan's regions are non-reentrant checkpoint calls
  std::vector<bool> region_hooks_save_;                  // per segment: some own node saves a tensor
  std::vector<std::vector<BufferId>> closure_inputs_;    // per segment: the forward call's `args`
  std::vector<BufferId> closure_rng_;                    // per segment: its `fwd_cpu_state`, or kNone
  std::vector<OpId> closure_last_node_;  // per segment: its last own node with saves to run; kNone: with the graph
  std::vector<BufferId> graph_held_;   // freed with the graph: the checkpoint nodes' RNG states
  PlanTable grad_plans_;  // per op: the plan with autograd recording
  std::vector<TensorId> storage_;        // per tensor: the tensor owning its storage
  std::vector<bool> kv_cache_;           // per tensor: its storage is a KV cache (Graph::kv_cache)
  std::vector<BufferId> fresh_;          // buffers the current op made
  std::vector<BufferId> execute_outputs_, execute_extras_, execute_temps_;  // execute()'s scratch
  std::vector<GradValue> backward_incoming_, backward_outs_;                // backward()'s, per node
  std::vector<BufferId> backward_temps_;
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

  // ---- pipeline parallelism (interpreter_pipeline.cc) ------------------------------------------
  // One optimizer step's forwards and backwards in the schedule's order. Each forward's autograd
  // graph (nodes, saved buffers, outputs) is put aside until its backward, so several forwards'
  // saved activations are live at once, as on the real stage.
  void run_pipeline_order(int iteration);
  int chunk_ = -1;  // the pipeline chunk whose forward or backward runs; -1 outside pipelines
  struct MicroBatchGraph {
    std::vector<Node> nodes;
    std::vector<BufferId> buf_of;
    std::vector<TensorId> returned;
    std::vector<BufferId> graph_held;
    std::vector<std::vector<BufferId>> segment_saved, segment_held, segment_incoming;
    std::vector<SegmentState> segment_state;
    // Non-reentrant checkpoints: what each region's call keeps until its backward.
    std::vector<bool> region_hooks_save;
    std::vector<std::vector<BufferId>> closure_inputs;
    std::vector<BufferId> closure_rng;
    // What the forward decided for its ops (another model chunk's forward decides for others).
    std::vector<bool> requires_grad;
    std::vector<TensorId> redirect, storage;
    PlanTable grad_plans, plain_plans;
    BufferId received = kNone;  // the p2p receive buffer of this micro-batch's hidden state
  };
  MicroBatchGraph stash_micro_batch();
  void restore_micro_batch(MicroBatchGraph& m);
};

}  // namespace headroom::schedule_detail
