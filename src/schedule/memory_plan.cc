#include "schedule/memory_plan.h"

#include <vector>

#include "training/op_rules.h"

namespace headroom {

// Whether a tensor made before op `first` and read by ops first..last requires grad. Reentrant
// torch.utils.checkpoint passes only those tensors to CheckpointFunction (the segment's
// parameters are reached through the module, not passed): if none requires grad, its outputs do
// not either and the segment's parameters get no gradients (1.13 only warns, "None of the
// inputs have requires_grad=True", torch/utils/checkpoint.py:31).
bool checkpoint_gets_gradients(const Graph& g, OpId first, OpId last) {
  std::vector<bool> rg(g.tensors.size(), false);
  for (const Tensor& t : g.tensors) rg[static_cast<size_t>(t.id)] = t.requires_grad();
  for (OpId o = 0; o < first; ++o) {
    const Op& op = g.op(o);
    bool any = false;
    for (size_t i = 0; i < op.inputs.size(); ++i) any = any || (rg[static_cast<size_t>(op.inputs[i])] && differentiable_input(op, static_cast<int>(i)));
    for (TensorId out : op.outputs) rg[static_cast<size_t>(out)] = any;
  }
  for (OpId o = first; o <= last; ++o) {
    const Op& op = g.op(o);
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      const Tensor& t = g.tensor(op.inputs[i]);
      if (t.producer != kNone && t.producer < first && rg[static_cast<size_t>(t.id)] && differentiable_input(op, static_cast<int>(i))) return true;
    }
  }
  return false;
}

}  // namespace headroom
