#include "training/cudnn_workspace.h"

#include "util/checked.h"

namespace headroom {
namespace {

int64_t add(int64_t a, int64_t b) { return checked_add(a, b, "conv workspace"); }
int64_t mul(int64_t a, int64_t b) { return checked_mul(a, b, "conv workspace"); }

// Winograd F(4x4, 3x3)'s filter-gradient buffers: every 3x3 filter becomes a 6x6 tile, every
// 4x4 block of the output map a 6x6 tile of the input and of the gradient, per channel (fp32).
int64_t winograd_filter_bytes(const ConvCall& c) {
  const int64_t tiles = mul(mul(c.batch, (c.out_h + 3) / 4), (c.out_w + 3) / 4);
  return add(mul(mul(36, mul(c.in_channels, c.out_channels)), 4), mul(mul(tiles, 36), mul(add(c.in_channels, c.out_channels), 4)));
}

bool runs_winograd_filter(const ConvCall& c) {
  if (c.kernel_h != 3 || c.kernel_w != 3 || c.stride_h != 1 || c.stride_w != 1) return false;
  if (c.dilation_h != 1 || c.dilation_w != 1 || c.groups != 1) return false;
  return c.out_channels <= 256 && c.out_h <= 56 && winograd_filter_bytes(c) <= (int64_t{32} << 20);
}

}  // namespace

int64_t cudnn9_conv_workspace(ConvPass pass, const ConvCall& c) {
  if (c.groups > 1) return 0;
  const int64_t xy = add(c.input_bytes, c.output_bytes);
  if (c.kernel_h == 1 && c.kernel_w == 1) {
    if (c.stride_h == 1 && c.stride_w == 1) return pass == ConvPass::BackwardFilter ? c.weight_bytes : 0;
    return add(xy, 16);
  }
  if (pass == ConvPass::Forward && c.in_channels <= 4) return 0;
  if (pass == ConvPass::BackwardFilter && runs_winograd_filter(c)) return winograd_filter_bytes(c);
  return add(add(xy, c.weight_bytes), pass == ConvPass::BackwardFilter ? 144 : 16);
}

}  // namespace headroom
