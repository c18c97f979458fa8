// The constants of the time model (cost/cost_model.h) in one place, each with where its value
// comes from: kernel efficiencies, launch costs, the backward ratio, host-link copies and weight
// loading. `plan`, `estimate`'s times and `pack`'s swap-in model read these defaults; a user
// changes them only through the documented overrides (pack's workload file).
//
// Invariant: every field is positive; efficiencies and factors are in (0, 1] except
// backward_factor and no_workspace_conv_slowdown (ratios >= 1).
#pragma once

namespace headroom {

struct CostConstants {
  // Per kernel: CUDA launch plus PyTorch's eager dispatch, about 5-10 us per op on current
  // hardware (PyTorch performance tuning guide; CUDA launch latency is ~3-5 us).
  double launch_us = 6.0;
  // Fraction of the datasheet peak that eager kernels reach: large cuBLAS/cuDNN GEMMs reach
  // 60-80 % of tensor-core peak; elementwise kernels 70-90 % of DRAM bandwidth.
  double compute_efficiency = 0.65;
  double memory_efficiency = 0.8;
  // Backward of an op ~ 2x its forward: a GEMM-like layer computes the input gradient and the
  // weight gradient, each as large as the forward; elementwise backwards read twice as much.
  double backward_factor = 2.0;
  // Pinned host memory copies reach 70-80 % of the PCIe link's per-direction bandwidth: 11-11.8
  // GB/s reported on PCIe 3.0 x16 (15.75 GB/s theoretical) in NVIDIA's "How to Optimize Data
  // Transfers in CUDA C/C++" and its comments (docs/pack.md). Each copy also pays a fixed latency.
  double host_link_efficiency = 0.75;
  double copy_latency_us = 10.0;
  // Loading weights (model.to("cuda")): one cudaMemcpy per tensor (~2 us of launch each), a fixed
  // cost per load (synchronization, allocation: ~100 us), and pageable host memory staged by the
  // driver through a pinned buffer at about half the pinned rate (host dependent: measure yours
  // with `bandwidthTest --memory=pageable`). pack's swap-in model starts from these.
  double load_fixed_us = 100.0;
  double load_per_tensor_us = 2.0;
  double pageable_factor = 0.5;
  // A workspace-free convolution algorithm (implicit GEMM) against cuDNN's fastest with its
  // workspace: vDNN and MONeT report 1.2-2x; we take 1.5x.
  double no_workspace_conv_slowdown = 1.5;
  // Optimizer update: bytes read and written per parameter byte are SGD p,g -> p (3), momentum
  // adds its buffer (5), Adam/AdamW p,g,m,v -> p,m,v (7). Kernels: the single-tensor loop
  // launches ~4 per parameter tensor; foreach launches the same kernels once per group of
  // tensors (ATen's MultiTensorApply takes up to 36 tensors per launch at Adam's list depth).
  double optimizer_kernels_per_tensor = 4.0;
  int foreach_tensors_per_launch = 36;
};

}  // namespace headroom
