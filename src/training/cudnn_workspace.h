// The workspace a cuDNN 9 convolution call borrows under PyTorch 2.x (benchmark off), as a rule
// of the call's geometry: the `cudnn9` policy of --conv-workspace, the CUDA profile's default.
//
// What PyTorch does (aten/src/ATen/native/cudnn/Conv_v8.cpp): run_single_conv asks cuDNN's
// heuristics (CUDNN_HEUR_MODE_INSTANT, then the fallback list) for engine configs, runs the first
// one that builds and executes, and run_conv_plan borrows plan.getWorkspaceSize() bytes from the
// caching allocator for that call only (allocate(0) allocates nothing). Forward, backward-data and
// backward-filter are separate calls (ConvShared.cpp cudnn_convolution_backward: data first,
// each after its gradient is allocated).
//
// The rule, read off the allocator traces of the H100 run (PyTorch 2.11, cuDNN 9.19, fp32 NCHW,
// TF32 allowed; docs/gpu.md "cuDNN workspaces" has the data and the accuracy per model): the
// engines the heuristics pick for fp32 NCHW mostly copy their operands into the layout of a
// tensor-core kernel, so the workspace is the bytes of the operands it converts:
//   - grouped (depthwise) convolutions: nothing;
//   - 1x1 stride 1: nothing for forward and backward-data; backward-filter borrows one weight
//     gradient (the partial sums of a split-K reduction, at one split);
//   - 1x1 strided: input + output + 16 bytes, every pass;
//   - larger kernels: input + output + weight, + 16 bytes (forward, backward-data) or + 144
//     (backward-filter); a forward whose input has at most 4 channels (a first layer) borrows
//     nothing;
//   - except the filter gradient of a 3x3 stride-1 convolution with at most 256 output channels
//     on a map of at most 56 rows, which runs Winograd F(4x4, 3x3) when its buffers fit in
//     32 MiB: the transformed filter gradient (6x6 per filter, 36*Cin*Cout*4 bytes) plus the
//     transformed input and gradient tiles (N * ceil(Ho/4) * ceil(Wo/4) tiles of 6x6 per channel,
//     36*(Cin+Cout)*4 bytes each).
// Known misses (measured, not modelled): some calls pick an engine without a workspace, others a
// split-K or Winograd engine whose workspace is several weight gradients (up to 500x a first
// layer's), decided by cuDNN's heuristic per shape.
#pragma once

#include <cstdint>

namespace headroom {

enum class ConvPass : uint8_t { Forward, BackwardData, BackwardFilter };

// One convolution call's geometry, in the forward convolution's terms (a transposed convolution
// is cuDNN's backward-data: pass it with its roles swapped).
struct ConvCall {
  int64_t input_bytes = 0;   // x (or its gradient)
  int64_t output_bytes = 0;  // y (or its gradient)
  int64_t weight_bytes = 0;  // w (or its gradient)
  int64_t batch = 1;
  int64_t in_channels = 0, out_channels = 0;
  int64_t out_h = 1, out_w = 1;  // the forward output's map
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
};

// Bytes the call borrows under the cudnn9 rule above (0: no allocation).
int64_t cudnn9_conv_workspace(ConvPass pass, const ConvCall& call);

}  // namespace headroom
