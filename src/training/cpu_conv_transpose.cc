#include "training/cpu_conv_transpose.h"

#include "training/kernel_events.h"
#include "util/checked.h"

namespace headroom {
namespace {

using K = LocalEvent::Kind;
using kernel_events::drop;
using kernel_events::needs;
using kernel_events::new_grad;
using kernel_events::temp;


// Cout*kh*kw rows by H*W columns of the input: what one batch element unfolds into.
int64_t columns_bytes(const RuleContext& c) {
  const Tensor& x = c.graph.tensor(c.op.inputs[0]);
  const Tensor& w = c.graph.tensor(c.op.inputs[1]);
  int64_t n = dtype_size(x.dtype);
  for (int64_t d : {w.shape[1], w.shape[2], w.shape[3], x.shape[2], x.shape[3]}) n = checked_mul(n, d, "conv_transpose2d columns");
  return n;
}

bool plain_1x1(const OpAttrs& a) {
  auto ones = [](const std::vector<int64_t>& v, int64_t one) {
    for (int64_t x : v) {
      if (x != one) return false;
    }
    return true;
  };
  return ones(a.kernel, 1) && ones(a.stride, 1) && ones(a.padding, 0) && ones(a.dilation, 1);
}


}  // namespace

ForwardPlan cpu_conv_transpose_forward(const RuleContext& c) {
  ForwardPlan p;
  p.output_alias.push_back(-1);
  p.events.push_back({K::AllocOutput, 0, 0});
  int t = 0;
  int cols = temp(p.events, t, columns_bytes(c));
  if (c.op.inputs.size() > 2) {
    const Tensor& y = c.graph.tensor(c.op.outputs[0]);
    drop(p.events, temp(p.events, t, checked_mul(checked_mul(y.shape[2], y.shape[3], "ones"), dtype_size(y.dtype), "ones")));
  }
  drop(p.events, cols);
  return p;
}

BackwardPlan cpu_conv_transpose_backward(const RuleContext& c, bool incoming_contiguous) {
  BackwardPlan b;
  int t = 0;
  const bool columns = !plain_1x1(c.op.attrs);
  const int64_t cols = columns ? columns_bytes(c) : 0;
  const int64_t gout_bytes = c.graph.tensor(c.op.outputs[0]).bytes();
  auto grad = [&](int input) { new_grad(b, input, c.graph.tensor(c.op.inputs[static_cast<size_t>(input)]).bytes()); };
  // Each pass makes a non-contiguous incoming gradient contiguous for itself.
  auto pass = [&](auto allocate_grads) {
    int copy = incoming_contiguous ? -1 : temp(b.events, t, gout_bytes);
    allocate_grads();
    if (columns) drop(b.events, temp(b.events, t, cols));
    if (copy >= 0) drop(b.events, copy);
  };
  const bool bias = c.op.inputs.size() > 2;
  if (needs(c, 0)) pass([&] { grad(0); });
  if (needs(c, 1) || (bias && needs(c, 2))) {
    pass([&] {
      if (needs(c, 1)) grad(1);
      if (bias && needs(c, 2)) grad(2);
    });
  }
  return b;
}

}  // namespace headroom
