// The host-link traffic of an offloading layout per optimizer step (plan --gpus ranks the offload
// families by it; their collectives are the engine's own, plan/collectives.h). Each rule follows
// the copies schedule/interpreter_offload.cc simulates:
//   ZeRO-2 + offload_optimizer cpu: each rank's gradient partition goes to the host in fp32
//     (copy_ to the fp32 .grad casts on the device first) and the updated fp32 partition comes
//     back (fp32_partition.to(device)): 8 bytes per partition element per step;
//   ZeRO-3 + offload_optimizer and offload_param cpu: the 16-bit partitions come up for each
//     micro-batch's forward and backward and its 16-bit gradient partition goes down: 3 x 2 bytes
//     per element per micro-batch (without offload_param: the gradient partitions go down per
//     micro-batch and the updated 16-bit partition comes up once, cast on the host);
//   FSDP CPUOffload: the shards (fp32 under MixedPrecision) come up for the forward and the
//     backward and the fp32 gradient shard goes down: 3 x 4 bytes per element (one micro-batch).
// The copies are counted as exposed (not overlapped with compute), and the CPU optimizer step is
// timed as the device's update: docs/distributed.md says what this leaves out.
#pragma once

#include <cstdint>

#include "plan/collectives.h"

namespace headroom {

// Bytes each rank moves over its host link per step; 0 for an engine without offloading.
int64_t offload_bytes_per_step(DataParallelEngine engine, bool offload_optimizer, bool offload_params, int64_t parameter_elements,
                               int64_t data_parallel, int64_t micro_batches, int64_t element_bytes);

}  // namespace headroom
