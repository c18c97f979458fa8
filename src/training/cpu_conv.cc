#include "training/cpu_conv.h"

#include <algorithm>

#include "training/kernel_events.h"
#include "util/checked.h"

namespace headroom {
namespace {

using K = LocalEvent::Kind;
using kernel_events::drop;
using kernel_events::needs;
using kernel_events::new_grad;
using kernel_events::temp;

struct ConvShape {
  int64_t n, cin, h, w, cout, ho, wo, kh, kw, groups;
  bool bias;
};

ConvShape shape_of(const RuleContext& c) {
  const Tensor& x = c.graph.tensor(c.op.inputs[0]);
  const Tensor& wt = c.graph.tensor(c.op.inputs[1]);
  const Tensor& y = c.graph.tensor(c.op.outputs[0]);
  return {x.shape[0], x.shape[1], x.shape[2], x.shape[3], y.shape[1], y.shape[2], y.shape[3],
          wt.shape[2], wt.shape[3], c.op.attrs.groups, c.op.inputs.size() > 2};
}

int64_t blocked(int64_t ch, int block) { return (ch + block - 1) / block * block; }

int64_t bytes4(std::initializer_list<int64_t> dims) {
  int64_t n = 4;
  for (int64_t d : dims) n = checked_mul(n, d, "convolution buffer");
  return n;
}

struct OnednnSizes {
  int64_t src_b, dst_b, wb, wb_data;  // wb_data: weight layout of the backward-data pass
  bool plain_src, depthwise, grouped;
};

OnednnSizes onednn_sizes(const ConvShape& s, int block) {
  OnednnSizes z{};
  z.depthwise = s.groups > 1 && s.groups == s.cin && s.groups == s.cout;
  z.grouped = s.groups > 1 && !z.depthwise;
  z.plain_src = s.groups == 1 && s.cin <= 4;
  z.src_b = z.plain_src ? 0 : bytes4({s.n, blocked(s.cin, block), s.h, s.w});
  z.dst_b = bytes4({s.n, blocked(s.cout, block), s.ho, s.wo});
  if (z.depthwise) {
    z.wb = bytes4({blocked(s.cout, block), s.kh, s.kw});
    z.wb_data = z.wb;
  } else if (z.grouped) {
    z.wb = bytes4({s.cout, s.cin / s.groups, s.kh, s.kw});
    z.wb_data = z.wb;
  } else if (z.plain_src) {
    z.wb = bytes4({blocked(s.cout, block), s.cin, s.kh, s.kw});
    z.wb_data = bytes4({blocked(s.cout, block), blocked(s.cin, block), s.kh, s.kw});
  } else {
    z.wb = bytes4({blocked(s.cout, block), blocked(s.cin, block), s.kh, s.kw});
    z.wb_data = z.wb;
  }
  return z;
}



bool dilated(const OpAttrs& a) { return a.dilation.size() == 2 && (a.dilation[0] != 1 || a.dilation[1] != 1); }

// oneDNN 2.6's AVX-512 direct kernels give up on a dilated convolution whose left padding exceeds
// the output row block (jit_avx512_common_conv_fwd_kernel::init_conf: l_pad > ur_w, ur_w =
// min(ow, 28); the backward-data kernel's overflow check is the same for symmetric padding), and
// the backward-weights kernel on one whose dilated kernel is taller or wider than the input
// (jit_avx512_common_conv_bwd_weights_kernel_f32::init_conf: kh_range <= ih, and dilation only
// with stride 1). The backward-weights kernel also refuses any kernel wider than 14 columns
// (same init_conf: "if (jcp.kw > 14) return status::unimplemented"), dilated or not: ViT's
// patch embedding (16x16 or 32x32, stride = kernel). oneDNN then runs its GEMM convolution on
// the plain NCHW tensors.
bool gemm_forward_and_data(const ConvShape& s, const OpAttrs& a) {
  if (!dilated(a) || a.padding.size() != 2) return false;
  return a.padding[1] > std::min<int64_t>(s.wo, 28);
}

bool gemm_weights(const ConvShape& s, const OpAttrs& a) {
  if (s.kw > 14) return true;
  if (!dilated(a)) return false;
  bool strided = a.stride.size() == 2 && (a.stride[0] != 1 || a.stride[1] != 1);
  return strided || 1 + (s.kh - 1) * a.dilation[0] > s.h || 1 + (s.kw - 1) * a.dilation[1] > s.w;
}

// The GEMM convolution's scratchpad, per thread: the im2col columns (Cin/g*kh*kw*Ho*Wo floats),
// for the weights pass four more weight-sized buffers, plus a fixed 128 (data) or 256 (weights)
// bytes. Measured on single convolutions (docs/accuracy.md); the forward's scratchpad (85,376
// bytes for ASPP's 2048->256 at 8x8) is not modelled, like the direct kernels' scratchpads.
int64_t gemm_columns(const ConvShape& s) { return bytes4({s.cin / s.groups, s.kh, s.kw, s.ho, s.wo}); }

// A channels-last input (Tensor::channels_last) makes aten::_convolution call oneDNN with NHWC
// tensors: the source and destination are read and written in place (no reorders), the output is
// allocated first, and a dense convolution's weight is first copied to channels_last
// (weight.contiguous(suggest_memory_format), a [Cout,Cin,kh,kw] weight with Cin > 1 and a kernel
// larger than 1x1 is not already one). Measured for the dense calls with channel counts that are
// multiples of the channel block (ConvNeXt's 2x2 stride-2 downsampling) and depthwise ones; other
// grouped or unaligned channels-last convolutions keep the NCHW rule (not measured: 20 -> 40
// channels allocates a different weights pass).
bool channels_last_call(const RuleContext& c, const ConvShape& s, const OnednnSizes& z) {
  if (!c.graph.tensor(c.op.inputs[0]).channels_last || gemm_forward_and_data(s, c.op.attrs) ||
      gemm_weights(s, c.op.attrs)) {
    return false;
  }
  const int block = c.device.onednn_block;
  if (z.depthwise) return true;
  return !z.grouped && !z.plain_src && s.cin % block == 0 && s.cout % block == 0;
}

bool weight_copied_to_channels_last(const ConvShape& s) {
  return s.cin / s.groups > 1 && s.kh * s.kw > 1;
}

// convolution_backward of a channels-last call, measured at 1 and 2 threads (the same bytes):
//   data:    [+W copy] +grad_input +W reorder (cB(Cout)*cB(Cin)*kh*kw*4; depthwise cB(C)*kh*kw*4)
//            -W reorder; the dense copy lives until the call returns;
//   weights: dense and depthwise 3x3: +diff_weights (W) [+diff_bias] [+b.grad] +W.grad in
//            channels_last +W.grad converted to the weight's format, then the first two freed;
//            depthwise larger than 3x3: +C*kh*kw*1,024 bytes (4,816,896 for 96 channels at 7x7,
//            whatever the batch, map size or thread count; 2,457,600 at 5x5; 2,007,040 for 40
//            channels) +(C*64 + 128) [+diff_bias] -(C*64 + 128), then as above.
// AccumulateGrad then copies a dense weight's gradient once more (+W -W), which stays below the
// weights pass's own peak and is not modelled.
BackwardPlan channels_last_backward(const RuleContext& c, const ConvShape& s, BackwardPlan& b) {
  int t = 0;
  const OnednnSizes z = onednn_sizes(s, c.device.onednn_block);
  const int64_t x_bytes = c.graph.tensor(c.op.inputs[0]).bytes();
  const int64_t w_bytes = c.graph.tensor(c.op.inputs[1]).bytes();
  const bool wgrad = needs(c, 1) || (s.bias && needs(c, 2));
  int wcl = !z.depthwise && weight_copied_to_channels_last(s) && (needs(c, 0) || wgrad) ? temp(b.events, t, w_bytes) : -1;
  if (needs(c, 0)) {
    new_grad(b, 0, x_bytes);
    int64_t wd = z.depthwise ? z.wb : bytes4({blocked(s.cout, c.device.onednn_block), blocked(s.cin, c.device.onednn_block), s.kh, s.kw});
    drop(b.events, temp(b.events, t, wd));
  }
  if (wgrad) {
    int big = -1, db = -1, dw = -1;
    if (z.depthwise && (s.kh > 3 || s.kw > 3)) {
      big = temp(b.events, t, checked_mul(s.cout, checked_mul(s.kh * s.kw, 1024, "convolution buffer"), "convolution buffer"));
      int small = temp(b.events, t, checked_add(checked_mul(s.cout, 64, "convolution buffer"), 128, "convolution buffer"));
      if (s.bias) db = temp(b.events, t, s.cout * 4);
      drop(b.events, small);
    } else {
      dw = temp(b.events, t, w_bytes);
      if (s.bias) db = temp(b.events, t, s.cout * 4);
    }
    if (s.bias && needs(c, 2)) new_grad(b, 2, s.cout * 4);
    int gcl = temp(b.events, t, w_bytes);
    new_grad(b, 1, w_bytes);
    drop(b.events, gcl);
    if (dw >= 0) drop(b.events, dw);
    if (big >= 0) drop(b.events, big);
    if (db >= 0) drop(b.events, db);
  }
  if (wcl >= 0) drop(b.events, wcl);
  return b;
}

}  // namespace

bool cpu_conv_uses_onednn(const RuleContext& c) {
  ConvShape s = shape_of(c);
  const OpAttrs& a = c.op.attrs;
  bool strided = a.stride.size() == 2 && (a.stride[0] != 1 || a.stride[1] != 1);
  bool not_1x1 = s.kh != 1 || s.kw != 1;
  bool first = strided || dilated(a) || s.n >= 16 || not_1x1 || c.device.threads > 1;
  int64_t numel = s.n * s.cin * s.h * s.w;
  bool second = s.groups > 1 || (s.kh > 3 && s.kw > 3) || s.n > 1 || numel > 20480;
  return first && second;
}

ForwardPlan cpu_conv_forward(const RuleContext& c) {
  ForwardPlan p;
  p.output_alias.push_back(-1);
  ConvShape s = shape_of(c);
  int t = 0;
  if (cpu_conv_uses_onednn(c) && gemm_forward_and_data(s, c.op.attrs)) {
    // Plain source and weights are read in place; only the destination is oneDNN's.
    int dst = temp(p.events, t, bytes4({s.n, s.cout, s.ho, s.wo}));
    p.events.push_back({K::AllocOutput, 0, 0});
    drop(p.events, dst);
  } else if (cpu_conv_uses_onednn(c) && channels_last_call(c, s, onednn_sizes(s, c.device.onednn_block))) {
    // Measured at 1 and 2 threads: dense 96 -> 192 2x2 stride 2 on [2,96,16,16] (and 192 -> 384,
    // 384 -> 768): +W copy 294,912, +out 98,304, +scratchpad 4,096 * (threads + 1), +W reorder
    // Cout * cB(Cin) * kh*kw * 4 = 294,912, then both weights and the scratchpad freed.
    // Depthwise 7x7 (and 5x5) on [2,96,16,16]: +out, +scratchpad 128 + 4,096 * threads,
    // +W reorder cB(C) * kh*kw * 4 = 18,816, freed.
    OnednnSizes z = onednn_sizes(s, c.device.onednn_block);
    const int64_t threads = c.device.threads;
    int wcl = !z.depthwise && weight_copied_to_channels_last(s) ? temp(p.events, t, c.graph.tensor(c.op.inputs[1]).bytes()) : -1;
    p.events.push_back({K::AllocOutput, 0, 0});
    int64_t scratch = z.depthwise ? checked_add(128, checked_mul(4096, threads, "scratchpad"), "scratchpad")
                                  : checked_mul(4096, checked_add(threads, 1, "scratchpad"), "scratchpad");
    int sp = temp(p.events, t, scratch);
    int wb = temp(p.events, t, z.depthwise ? z.wb : bytes4({s.cout, blocked(s.cin, c.device.onednn_block), s.kh, s.kw}));
    drop(p.events, wb);
    drop(p.events, sp);
    if (wcl >= 0) drop(p.events, wcl);
  } else if (cpu_conv_uses_onednn(c)) {
    OnednnSizes z = onednn_sizes(s, c.device.onednn_block);
    int src = z.plain_src ? -1 : temp(p.events, t, z.src_b);
    int wb = temp(p.events, t, z.wb);
    int dst = temp(p.events, t, z.dst_b);
    drop(p.events, wb);
    if (src >= 0) drop(p.events, src);
    p.events.push_back({K::AllocOutput, 0, 0});
    drop(p.events, dst);
  } else if (s.kh != 1 || s.kw != 1) {
    int cols = temp(p.events, t, bytes4({s.cin / s.groups, s.kh, s.kw, s.ho, s.wo}));
    p.events.push_back({K::AllocOutput, 0, 0});
    drop(p.events, cols);
  } else {
    p.events.push_back({K::AllocOutput, 0, 0});
  }
  return p;
}

BackwardPlan cpu_conv_backward(const RuleContext& c, bool incoming_contiguous) {
  BackwardPlan b;
  ConvShape s = shape_of(c);
  int t = 0;
  const int64_t x_bytes = c.graph.tensor(c.op.inputs[0]).bytes();
  const int64_t w_bytes = c.graph.tensor(c.op.inputs[1]).bytes();
  const bool wgrad = needs(c, 1) || (s.bias && needs(c, 2));
  if (cpu_conv_uses_onednn(c) && channels_last_call(c, s, onednn_sizes(s, c.device.onednn_block))) {
    return channels_last_backward(c, s, b);
  }
  if (cpu_conv_uses_onednn(c)) {
    OnednnSizes z = onednn_sizes(s, c.device.onednn_block);
    int64_t gin_b = bytes4({s.n, blocked(s.cin, c.device.onednn_block), s.h, s.w});
    const int64_t threads = c.device.threads;
    if (needs(c, 0) && gemm_forward_and_data(s, c.op.attrs)) {
      int gi = temp(b.events, t, x_bytes);
      drop(b.events, temp(b.events, t, checked_add(checked_mul(threads, gemm_columns(s), "scratchpad"), 128, "scratchpad")));
      new_grad(b, 0, x_bytes);
      drop(b.events, gi);
    } else if (needs(c, 0)) {
      int go = temp(b.events, t, z.dst_b);
      int wd = temp(b.events, t, z.wb_data);
      int gi = temp(b.events, t, gin_b);
      drop(b.events, wd);
      drop(b.events, go);
      new_grad(b, 0, x_bytes);
      drop(b.events, gi);
    }
    if (wgrad && gemm_weights(s, c.op.attrs)) {
      int dw = temp(b.events, t, w_bytes);
      int64_t per_thread = checked_add(gemm_columns(s), checked_mul(4, w_bytes, "scratchpad"), "scratchpad");
      int pad = temp(b.events, t, checked_add(checked_mul(threads, per_thread, "scratchpad"), 256, "scratchpad"));
      // ideep's diff_bias comes after the scratchpad and outlives the weight gradient's copy.
      int db = s.bias ? temp(b.events, t, s.cout * 4) : -1;
      drop(b.events, pad);
      if (s.bias && needs(c, 2)) new_grad(b, 2, s.cout * 4);
      new_grad(b, 1, w_bytes);
      drop(b.events, dw);
      if (db >= 0) drop(b.events, db);
    } else if (wgrad) {
      if (z.grouped) {
        int dw = temp(b.events, t, z.wb);
        if (s.bias && needs(c, 2)) new_grad(b, 2, s.cout * 4);
        new_grad(b, 1, w_bytes);
        drop(b.events, dw);
      } else if (z.depthwise && (s.kh > 3 || s.kw > 3)) {
        // Depthwise kernels larger than 3x3 (MNASNet's, MobileNetV3's and EfficientNet's 5x5,
        // ConvNeXt's 7x7): oneDNN computes the weight gradient on the plain tensors, with one
        // column buffer of kh*kw*oh*ow floats, plus 256 bytes and kh*kw*256 bytes per block of
        // channels, instead of reordering diff_dst and src. Measured on PyTorch 1.13 at one
        // thread: [2,16,32,32], 5x5, stride 1 -> 102,400 + 256 + 6,400 = 109,056 bytes; stride 2
        // -> 25,600 + 256 + 6,400; 32 channels -> 102,400 + 256 + 12,800; 7x7 -> 200,704 + 256 +
        // 12,544. Independent of the batch.
        int64_t kk = s.kh * s.kw;
        int64_t blocks = blocked(s.cout, c.device.onednn_block) / c.device.onednn_block;
        int64_t cols = checked_add(checked_add(bytes4({kk, s.ho, s.wo}), 256, "convolution buffer"),
                                   checked_mul(blocks, kk * 256, "convolution buffer"), "convolution buffer");
        int dw = temp(b.events, t, z.wb);
        int col = temp(b.events, t, cols);
        int db = s.bias ? temp(b.events, t, s.cout * 4) : -1;
        drop(b.events, col);
        if (s.bias && needs(c, 2)) new_grad(b, 2, s.cout * 4);
        new_grad(b, 1, w_bytes);
        drop(b.events, dw);
        if (db >= 0) drop(b.events, db);
      } else {
        int go = temp(b.events, t, z.dst_b);
        int src = z.plain_src ? -1 : temp(b.events, t, z.src_b);
        int dw = temp(b.events, t, z.wb);
        int db = s.bias ? temp(b.events, t, s.cout * 4) : -1;
        if (src >= 0) drop(b.events, src);
        drop(b.events, go);
        if (s.bias && needs(c, 2)) new_grad(b, 2, s.cout * 4);
        new_grad(b, 1, w_bytes);
        drop(b.events, dw);
        if (db >= 0) drop(b.events, db);
      }
    }
    return b;
  }
  // thnn: a non-contiguous incoming gradient is made contiguous once per pass that reads it.
  const int64_t gout_bytes = c.graph.tensor(c.op.outputs[0]).bytes();
  bool columns = s.kh != 1 || s.kw != 1;
  int64_t cols = columns ? bytes4({s.cin / s.groups, s.kh, s.kw, s.ho, s.wo}) : 0;
  if (needs(c, 0)) {
    int copy = incoming_contiguous ? -1 : temp(b.events, t, gout_bytes);
    new_grad(b, 0, x_bytes);
    if (columns) drop(b.events, temp(b.events, t, cols));
    if (copy >= 0) drop(b.events, copy);
  }
  if (wgrad) {
    int copy = incoming_contiguous ? -1 : temp(b.events, t, gout_bytes);
    if (s.bias && needs(c, 2)) new_grad(b, 2, s.cout * 4);
    new_grad(b, 1, w_bytes);
    if (columns) drop(b.events, temp(b.events, t, cols));
    if (copy >= 0) drop(b.events, copy);
  }
  return b;
}

}  // namespace headroom
