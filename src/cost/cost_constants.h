// The constants of the time model (cost/cost_model.h) in one place, each with where its value
// comes from: kernel efficiencies, launch costs, the backward ratio, host-link copies, weight
// loading and optimizer steps on the host. `plan`, `estimate`'s times and `pack`'s swap-in model
// read these defaults; a user changes them only through the documented overrides (pack's
// workload file).
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
  // DeepSpeed's FusedAdam (csrc/adam/multi_tensor_apply.cuh, from apex) launches its one fused
  // kernel per the same group: depth_to_max_tensors[3] = 36 tensors (p, g, m, v). Not counted:
  // its 320-block limit per launch, one more launch per 320 x 65,536 elements (a 8.8e9-element
  // ZeRO partition: 420 launches, 2.5 ms against the 90 ms its bytes take on an H100).
  double optimizer_kernels_per_tensor = 4.0;
  int foreach_tensors_per_launch = 36;
  // Optimizer steps on the host's CPU (ZeRO-Offload's DeepSpeedCPUAdam, FSDP CPUOffload's
  // torch.optim.Adam), in parameter elements updated per second by one host, all of its cores.
  // One pair measured in one run by DeepSpeed's authors (DeepSpeed PR 735, "CPU-Adam fix for
  // scalar mode", 2021-02-08): an 11.6B-parameter GPT-2's optimizer time 56 s with torch.optim.Adam
  // and 8.2 s with DeepSpeedCPUAdam, i.e. 11.6e9 / 8.2 = 1.41e9 and 11.6e9 / 56 = 2.07e8 elements/s
  // (the host is not named there; DeepSpeed's cpu_adam.py docstring claims 5x to 7x over
  // torch.optim.Adam, this pair is 6.8x). Both are bound by the host's memory bandwidth
  // (DeepSpeedCPUAdam streams p, g, m, v once with AVX and OpenMP, csrc/adam/cpu_adam_impl.cpp;
  // torch.optim makes several passes), so a host of the same era but fewer memory channels is
  // slower: this machine's measurement of torch.optim is in docs/distributed.md.
  double host_fused_adam_elements_per_s = 11.6e9 / 8.2;
  double host_torch_adam_elements_per_s = 11.6e9 / 56.0;
  // Ranks whose host steps run at once on one host and share its cores and memory bandwidth:
  // each rank's step takes host_ranks times its own elements' time. 1 for one GPU; the layout
  // search sets the GPUs of a machine it uses (plan --gpus N).
  int host_ranks = 1;
};

}  // namespace headroom
