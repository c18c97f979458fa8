// The optimizer step as data: for each OptimizerKind, one OptimizerRule saying what step()
// allocates, in the order the upstream implementation allocates it. The interpreter
// (schedule/interpreter_optimizer.cc) replays a rule with one generic loop, the way it replays
// the op rules of training/op_rules.h, so an optimizer is one table entry in optimizer_rules.cc
// (plus its OptimizerKind value in training/optimizer.h). Each entry cites the upstream function
// it follows.
//
// A rule has three parts:
//   state    per-parameter tensors made on the first step (torch.optim's lazy state), each with
//            a size rule and the parameters it applies to (bitsandbytes' small-tensor fallback,
//            Adafactor's factored / unfactored second moment);
//   update   the temporaries of one update as a little program over numbered slots (Python
//            locals): allocate, take a Python scalar's tensors, drop, rebind a name, keep a value
//            until the next parameter's iteration rebinds it. `single_tensor` runs once per
//            parameter (the for-loop implementations); `foreach` once for all parameters, an
//            allocation then making one tensor per parameter (torch.optim's _multi_tensor_*);
//            `foreach_v2` instead of `foreach` where PyTorch 2.x's differs from 1.13's.
//   time     bytes of memory traffic per parameter byte (cost/cost_model.cc's roofline).
//
// Invariants (validate_optimizer_rule; tests run it on every entry):
//   - an allocation goes into an empty slot; a drop or rebind names a slot in range;
//   - at the end of `foreach` every slot is empty; at the end of `single_tensor` every slot is
//     empty or carried (dropped by the next iteration, the last one after the loop);
//   - a rule with a `foreach` (or `foreach_v2`) program has has_foreach set and makes its state
//     BeforeUpdate; in either only an allocation may depend on the parameter; the invariants hold for any
//     parameter (each combination of the conditions is checked).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "training/optimizer.h"

namespace headroom {

// How many bytes a state tensor or temporary takes, from its parameter.
enum class SizeRule : uint8_t {
  StateLikeParam,  // torch.optim's zeros_like(p) / like-p temporaries: the parameter's bytes as the
                   // optimizer sees them (the rank's fp32 or dtype shard under FSDP)
  WholeParam,      // the whole parameter's bytes in its dtype (no FSDP shard applied)
  Fp32LikeParam,   // numel x 4 (fp32 whatever the parameter's dtype)
  Uint8LikeParam,  // numel x 1 (bitsandbytes' 8-bit state)
  Fp32Scalar,      // a 0-dim fp32 tensor: 4 bytes (Adam's `step`)
  BlockAbsmax,     // fp32 per 2048-element block: ceil(numel / 2048) x 4 (bitsandbytes blockwise)
  FactoredRow,     // fp32 of shape[:-1]: numel / shape[-1] x 4 (Adafactor's exp_avg_sq_row)
  FactoredCol,     // fp32 of shape[:-2] + shape[-1:] (Adafactor's exp_avg_sq_col)
};

// Which parameters a state tensor or an update step applies to.
enum class ParamCondition : uint8_t {
  Always,
  Below8bitMin,   // numel < 4096: bitsandbytes' min_8bit_size keeps 32-bit state
  From8bitMin,    // numel >= 4096
  Factored,       // rank >= 2: Adafactor's _get_options factored
  NotFactored,    // rank < 2
};

struct StateRule {
  std::string_view suffix;  // appended to the parameter's name: ".exp_avg"
  SizeRule size = SizeRule::StateLikeParam;
  ParamCondition when = ParamCondition::Always;
  // torch.optim's `step` counter: made on the CPU whatever the parameter's device (unless
  // capturable or fused), so device memory only where DeviceProfile::optimizer_step_on_device.
  bool step_counter = false;
};

enum class UpdateOpKind : uint8_t {
  Alloc,     // a temporary into `slot` (foreach: one per parameter, in parameter order)
  Scalar,    // the tensors a Python float argument becomes (DeviceProfile::python_scalar_tensors)
  Drop,      // `slot`'s values go, the last made first
  Rebind,    // `slot = <from>`: slot's old values go, it takes `from`'s
  Carry,     // single-tensor only: `slot` outlives the iteration; the previous parameter's value
             // held there goes now, the last one after the loop (a local the next one rebinds)
};

struct UpdateOp {
  UpdateOpKind kind = UpdateOpKind::Alloc;
  int slot = 0;
  SizeRule size = SizeRule::StateLikeParam;  // Alloc
  std::string_view what;                     // Alloc: name suffix; Scalar: the argument's name
  ParamCondition when = ParamCondition::Always;
  int from = 0;                              // Rebind
};

inline constexpr int kOptimizerSlots = 4;

// Where a rule creates its state relative to the update.
enum class StateInit : uint8_t {
  BeforeUpdate,   // torch.optim: step() fills every parameter's state, then calls the update
  PerParameter,   // bitsandbytes, lion_pytorch, transformers: state, then update, per parameter
};

struct OptimizerRule {
  OptimizerKind kind = OptimizerKind::Sgd;
  std::string_view name;    // the CLI's word
  std::string_view source;  // upstream functions followed
  StateInit state_init = StateInit::BeforeUpdate;
  std::vector<StateRule> state;
  std::vector<UpdateOp> single_tensor;
  bool has_foreach = false;     // a multi-tensor implementation exists (--foreach applies)
  std::vector<UpdateOp> foreach;
  // PyTorch 2.x's foreach program where it differs from 1.13's `foreach` (replayed when
  // DeviceProfile::torch_optim_v2); empty: `foreach` serves both.
  std::vector<UpdateOp> foreach_v2;
  int traffic_per_param_byte = 7;
};

// The table: one entry per named OptimizerKind, in enum order, then registered ones.
const std::deque<OptimizerRule>& optimizer_rules();
// REQUIRES: k is in the table (every named OptimizerKind is).
const OptimizerRule& optimizer_rule(OptimizerKind k);
// Adds a rule for a kind outside the named values (tests, out-of-tree optimizers); from then on
// estimate, --optimizer NAME and the cost model see it like a built-in one. InputError when the
// kind or the name is taken or the rule breaks an invariant. The rule's string_views (name,
// source, suffixes) must outlive the program (string literals). Not thread-safe: register
// before estimating.
void register_optimizer_rule(OptimizerRule rule);

// The --optimizer words in table order, and as one phrase: "sgd, momentum, ... or adafactor".
std::vector<std::string> optimizer_names();
std::string optimizer_names_phrase();

bool param_condition_holds(ParamCondition c, const Tensor& t);
// `state_like_param` is what SizeRule::StateLikeParam means for t (the interpreter's sharding).
// Throws InputError (checked arithmetic) on sizes past 64 bits.
int64_t optimizer_bytes(SizeRule s, const Tensor& t, int64_t state_like_param);

// Empty when `r` keeps the invariants above, else what is wrong.
std::string validate_optimizer_rule(const OptimizerRule& r);

}  // namespace headroom
