#include "training/cudnn_workspace.h"

#include "util/checked.h"

namespace headroom {

int64_t cudnn9_conv_workspace(ConvPass pass, const ConvCall& c) {
  if (c.groups > 1) return 0;
  const int64_t xy = checked_add(c.input_bytes, c.output_bytes, "conv workspace");
  if (c.kernel_h == 1 && c.kernel_w == 1) {
    if (c.stride_h == 1 && c.stride_w == 1) {
      return pass == ConvPass::BackwardFilter ? c.weight_bytes : 0;
    }
    return checked_add(xy, 16, "conv workspace");
  }
  if (pass == ConvPass::Forward && c.in_channels <= 4) return 0;
  const int64_t tail = pass == ConvPass::BackwardFilter ? 144 : 16;
  return checked_add(checked_add(xy, c.weight_bytes, "conv workspace"), tail, "conv workspace");
}

}  // namespace headroom
