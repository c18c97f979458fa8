#include "schedule/memory_plan.h"

#include "schedule/checkpoint_region.h"
#include "schedule/grad_flow.h"

#include <algorithm>
#include <string>
#include <vector>

#include "ir/op_kind.h"
#include "training/op_rules.h"
#include "util/error.h"

namespace headroom {

std::vector<bool> forward_requires_grad(const Graph& g) {
  std::vector<bool> rg(g.tensors.size(), false);
  for (const Tensor& t : g.tensors) rg[static_cast<size_t>(t.id)] = t.requires_grad() || t.input_requires_grad;
  for (const Op& op : g.ops) {
    bool any = false;
    for (size_t i = 0; i < op.inputs.size(); ++i) any = any || (rg[static_cast<size_t>(op.inputs[i])] && differentiable_input(op, static_cast<int>(i)));
    for (TensorId out : op.outputs) rg[static_cast<size_t>(out)] = any;
  }
  return rg;
}

// Whether a tensor made before op `first` and read by ops first..last requires grad. Reentrant
// torch.utils.checkpoint passes only those tensors to CheckpointFunction (the segment's
// parameters are reached through the module, not passed): if none requires grad, its outputs do
// not either and the segment's parameters get no gradients (1.13 only warns, "None of the
// inputs have requires_grad=True", torch/utils/checkpoint.py:31).
bool checkpoint_gets_gradients(const Graph& g, const std::vector<bool>& rg, OpId first, OpId last) {
  for (OpId o = first; o <= last; ++o) {
    const Op& op = g.op(o);
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      const Tensor& t = g.tensor(op.inputs[i]);
      const bool before = t.producer != kNone ? t.producer < first : t.input_requires_grad;
      if (before && rg[static_cast<size_t>(t.id)] && differentiable_input(op, static_cast<int>(i))) return true;
    }
  }
  return false;
}

bool checkpoint_gets_gradients(const Graph& g, OpId first, OpId last) {
  return checkpoint_gets_gradients(g, forward_requires_grad(g), first, last);
}

void sort_checkpoints(std::vector<CheckpointSegment>& regions) {
  std::sort(regions.begin(), regions.end(), [](const CheckpointSegment& a, const CheckpointSegment& b) {
    return a.first != b.first ? a.first < b.first : a.last > b.last;
  });
}

namespace {

bool valid_op(const Graph& g, OpId id) { return id >= 0 && static_cast<size_t>(id) < g.ops.size(); }

std::string range_name(const Graph& g, const CheckpointSegment& r) { return g.op(r.first).name + ".." + g.op(r.last).name; }

}  // namespace

std::optional<CheckpointImpl> parse_checkpoint_impl(const std::string& text) {
  if (text == "reentrant") return CheckpointImpl::Reentrant;
  if (text == "non-reentrant") return CheckpointImpl::NonReentrant;
  return std::nullopt;
}

const char* checkpoint_impl_name(CheckpointImpl impl) {
  return impl == CheckpointImpl::Reentrant ? "reentrant" : "non-reentrant";
}

namespace {

// checkpoint_region_problem with the graph's forward_requires_grad computed by the caller (once
// for all the regions of a plan).
std::string region_problem(const Graph& g, const CheckpointSegment& r, CheckpointImpl impl, const std::vector<bool>& rg) {
  if (!valid_op(g, r.first) || !valid_op(g, r.last)) {
    return "checkpoint region " + std::to_string(r.first) + ".." + std::to_string(r.last) + ": no such op (the graph has " +
           std::to_string(g.ops.size()) + ")";
  }
  if (r.first > r.last) return "checkpoint region " + range_name(g, r) + ": the first op runs after the last";
  for (OpId o = r.first; o <= r.last; ++o) {
    const Op& op = g.op(o);
    if (op.stage != OpStage::Model) return "checkpoint region " + range_name(g, r) + " holds the loss op " + op.name;
    // The re-run reads the region's inputs as they were kept: an op overwriting one in place
    // (relu_ on the region's input) would re-run on the overwritten value (PyTorch refuses:
    // the detached input is a leaf that requires grad).
    if (op.attrs.inplace && !op.inputs.empty()) {
      const Tensor& x = g.tensor(op.inputs[0]);
      if (x.producer == kNone || x.producer < r.first) {
        return "checkpoint region " + range_name(g, r) + ": " + op.name + " overwrites " + x.name +
               " in place, made before the region, so the region cannot be re-run from its inputs";
      }
    }
  }
  // Non-reentrant checkpoint records the region's graph in the forward: its parameters get
  // gradients whatever its inputs.
  if (impl == CheckpointImpl::Reentrant && !checkpoint_gets_gradients(g, rg, r.first, r.last)) {
    return "checkpoint region " + range_name(g, r) +
           ": no input of the region requires grad, so torch.utils.checkpoint would give its parameters no gradients; start it after an op with parameters";
  }
  return "";
}

}  // namespace

std::string checkpoint_region_problem(const Graph& g, const CheckpointSegment& r, CheckpointImpl impl) {
  return region_problem(g, r, impl, impl == CheckpointImpl::Reentrant ? forward_requires_grad(g) : std::vector<bool>{});
}

void validate_plan(const Graph& g, const MemoryPlan& plan) {
  const std::vector<CheckpointSegment>& rs = plan.checkpoints;
  const std::vector<bool> rg = plan.checkpoint_impl == CheckpointImpl::Reentrant && !rs.empty() ? forward_requires_grad(g) : std::vector<bool>{};
  for (const CheckpointSegment& r : rs) {
    const std::string problem = region_problem(g, r, plan.checkpoint_impl, rg);
    if (!problem.empty()) throw InputError(problem);
  }
  // Well nested and in order: a stack of the regions enclosing the current one.
  std::vector<CheckpointSegment> open;
  for (size_t i = 0; i < rs.size(); ++i) {
    if (i > 0 && rs[i] == rs[i - 1]) throw InputError("checkpoint region " + range_name(g, rs[i]) + " is listed twice");
    if (i > 0 && (rs[i].first < rs[i - 1].first || (rs[i].first == rs[i - 1].first && rs[i].last > rs[i - 1].last))) {
      throw InputError("checkpoint regions are not in order: " + range_name(g, rs[i]) + " comes after " + range_name(g, rs[i - 1]));
    }
    while (!open.empty() && open.back().last < rs[i].first) open.pop_back();
    if (!open.empty() && !open.back().contains(rs[i])) {
      throw InputError("checkpoint regions " + range_name(g, open.back()) + " and " + range_name(g, rs[i]) +
                       " overlap without one containing the other");
    }
    open.push_back(rs[i]);
  }
  std::vector<bool> in_region(g.ops.size(), false);
  for (const CheckpointSegment& r : rs) {
    for (OpId o = r.first; o <= r.last; ++o) in_region[static_cast<size_t>(o)] = true;
  }
  std::vector<bool> seen(g.ops.size(), false);
  for (OpId id : plan.offload) {
    if (!valid_op(g, id)) throw InputError("offload of op " + std::to_string(id) + ": no such op");
    const Op& op = g.op(id);
    if (op.stage != OpStage::Model) throw InputError("offload of " + op.name + ": a loss op's activations are not offloaded");
    if (in_region[static_cast<size_t>(id)]) {
      throw InputError("offload of " + op.name + ": it is inside a checkpoint region, so its forward keeps nothing to offload");
    }
    if (seen[static_cast<size_t>(id)]) throw InputError("offload of " + op.name + " is listed twice");
    seen[static_cast<size_t>(id)] = true;
  }
  for (OpId id : plan.no_conv_workspace) {
    if (!valid_op(g, id)) throw InputError("workspace choice for op " + std::to_string(id) + ": no such op");
    if (!is_convolution_kind(g.op(id).kind)) throw InputError("workspace choice for " + g.op(id).name + ": not a convolution");
  }
}

std::string plan_text(const Graph& g, const MemoryPlan& plan) {
  std::string s;
  if (plan.checkpoint_impl != CheckpointImpl::Reentrant && !plan.checkpoints.empty()) {
    s += std::string("checkpoint-impl ") + checkpoint_impl_name(plan.checkpoint_impl) + "\n";
  }
  std::vector<CheckpointSegment> open;
  for (const CheckpointSegment& r : plan.checkpoints) {
    while (!open.empty() && !open.back().contains(r)) open.pop_back();
    s += std::string(2 * open.size(), ' ') + "checkpoint " + range_name(g, r) + "\n";
    open.push_back(r);
  }
  for (OpId o : plan.offload) s += "offload " + g.op(o).name + "\n";
  for (OpId o : plan.no_conv_workspace) s += "no-workspace " + g.op(o).name + "\n";
  return s;
}

}  // namespace headroom
