#include "estimate/cuda_context.h"

namespace headroom {

int64_t cuda_context_bytes(const ContextUse& use, bool lazy_module_loading) {
  if (!lazy_module_loading) return kContextEagerBytes;
  int64_t bytes = kContextInitBytes;
  if (use.forward) bytes += kContextForwardBytes;
  if (use.convolution) bytes += kContextConvolutionBytes;
  if (use.backward) bytes += kContextBackwardBytes;
  if (use.convolution_backward) bytes += kContextConvolutionBackwardBytes;
  return bytes;
}

}  // namespace headroom
