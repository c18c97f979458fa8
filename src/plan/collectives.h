// The communication side of a data-parallel training step: how many bytes each GPU sends per
// step under DDP, DeepSpeed ZeRO 1-3 and FSDP, and how long that takes over the GPUs' links
// with NCCL's ring algorithm. Volumes follow the engines:
//   DDP (torch.nn.parallel.DistributedDataParallel, gradients bucketed and all-reduced once per
//     step: no_sync() during accumulation): all-reduce of the gradients, 2 (d-1)/d x G bytes;
//   ZeRO-1 (deepspeed/runtime/zero/stage_1_and_2.py): reduce-scatter of the gradients once per
//     step, all-gather of the updated parameters: (d-1)/d x (G + P);
//   ZeRO-2: the reduce-scatter after every micro-batch's backward (partitioned gradients cannot
//     accumulate unreduced), the all-gather once: (d-1)/d x (k G + P);
//   ZeRO-3 and FSDP FULL_SHARD (stage3.py, torch/distributed/fsdp): every micro-batch gathers
//     the parameters for the forward and again for the backward, and reduce-scatters the
//     gradients: (d-1)/d x k (2 P + G);
//   FSDP SHARD_GRAD_OP: parameters gathered once per micro-batch, kept through the backward:
//     (d-1)/d x k (P + G).
// P: the parameter bytes one rank computes with; G: the gradient bytes of the trainable ones;
// d: the data-parallel size; k: micro-batches per step. A ring collective moves (d-1)/d of the
// buffer per GPU for a reduce-scatter or an all-gather, twice that for an all-reduce (NCCL's
// docs, "Performance": algorithm vs bus bandwidth).
//
// Invariants: times are finite and non-negative; one GPU (d = 1) communicates nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "sim/device_catalog.h"

namespace headroom {

struct Interconnect {
  std::string description;               // "NVLink 450 GB/s", "PCIe 31.5 GB/s + network 25 GB/s"
  double intra_node_bytes_per_s = 0;     // per GPU per direction, within one machine
  double inter_node_bytes_per_s = 0;     // per GPU per direction, between machines
  int gpus_per_node = 8;
};

// NCCL's bus bandwidth reaches about 80 % of a link's peak on large messages (nccl-tests'
// PERFORMANCE.md reports busbw near 230-240 GB/s on A100 NVLink's 300 GB/s).
inline constexpr double kCollectiveEfficiency = 0.8;
// Fixed cost of one collective call (NCCL launch and ring latency, tens of microseconds).
inline constexpr double kCollectiveLatencyUs = 20.0;
// Bytes per collective call: DDP's default bucket_cap_mb is 25.
inline constexpr int64_t kCollectiveBucketBytes = int64_t{25} << 20;

// The GPU's links: NVLink where the catalog has it, else PCIe at the host link's rate, within a
// machine of 8; between machines one InfiniBand port per GPU (DGX A100: HDR 200 Gb/s = 25 GB/s;
// DGX H100: NDR 400 Gb/s = 50 GB/s). `override_bytes_per_s` (--interconnect) replaces both.
Interconnect default_interconnect(const GpuSpec& gpu, std::optional<double> override_bytes_per_s);

// "100GB/s", "400Gb/s" (bits), "25e9B/s" -> bytes per second; InputError otherwise.
double parse_bandwidth(const std::string& option, const std::string& text);

enum class DataParallelEngine : uint8_t { Ddp, Zero1, Zero2, Zero3, FsdpFull, FsdpGradOp };

struct StepCommunication {
  int64_t bytes_per_gpu = 0;  // sent by each GPU per step
  int collectives = 0;
  double ms = 0;
};

// The communication of one step among `data_parallel` GPUs.
StepCommunication step_communication(DataParallelEngine engine, int64_t param_bytes, int64_t grad_bytes,
                                     int64_t data_parallel, int64_t micro_batches, const Interconnect& link);

}  // namespace headroom
