// The staging memory of ATen's CUDA reductions (sum, mean, ... through Reduce.cuh's
// gpu_reduce_kernel): when setReduceConfig splits each output's inputs across several thread
// blocks (ctas_per_output > 1, "global reduce"), the call borrows a staging buffer for the
// blocks' partial results and an int per output block column (the semaphores) from the caching
// allocator, the buffer first, and returns both when it ends (semaphores first).
//
// setReduceConfig (aten/src/ATen/native/cuda/Reduce.cuh, PyTorch 2.x) for a reduction of
// `inputs_per_output` values into each of `num_outputs` outputs of a contiguous tensor:
//   - reducing the innermost dimension ("reduction on the fastest-striding dimension"): block.x
//     splits each output's inputs (loads vectorized by 4 when there are more than 128);
//   - reducing outer dimensions (a bias gradient, sum over rows of [rows, C]): block.x splits
//     the outputs, `output_vec_size` (4, 2 or 1: what divides C) outputs per thread;
//   - set_block_dimension: at most 512 / output_vec_size threads, block.x up to a warp (32);
//   - block.y splits the inputs when each thread keeps at least 16 values (or 256);
//   - then, if each thread still has at least 256 values and the output blocks do not fill the
//     device (grid.x <= SMs * maxThreadsPerMultiProcessor / threads), the inputs are split over
//     ctas_per_output = max(min(ceil(target / grid.x), ceil(values / 16)), ceil(values / 256))
//     blocks each;
//   - global_memory_size = sizeof(accumulator) * num_outputs * ctas_per_output, times
//     block.x * output_vec_size when block.x splits outputs; semaphore_size = 4 * grid.x.
// The accumulator is fp32 for fp32, bf16 and fp16 sums (opmath). Measured on the H100 (132 SMs)
// with 2.11: the bias gradient of a Linear(1024, 1024) at batch 1024 borrows
// 4 * 1024 * 16 * (32 * 4) = 8,388,608 bytes and 4 * 8 = 32 bytes of semaphores.
#pragma once

#include <cstdint>

namespace headroom {

struct CudaReduction {
  int64_t num_outputs = 1;
  int64_t inputs_per_output = 1;
  // The reduced dimensions are the innermost ones (a mean over the last axis, or everything);
  // false: the outer ones (a sum over rows).
  bool innermost = false;
  int64_t accumulator_bytes = 4;
};

// What setReduceConfig reads of the device (cudaDeviceProp).
struct ReduceDevice {
  int64_t multiprocessors = 0;                   // multiProcessorCount
  int64_t max_threads_per_multiprocessor = 0;    // maxThreadsPerMultiProcessor
  friend bool operator==(const ReduceDevice&, const ReduceDevice&) = default;
};

// The H100 80GB HBM3 (SXM5) that validation/measured_cuda*.json were measured on: the counts a
// CUDA run uses when no GPU is named (DeviceProfile::reduce_device). A named GPU brings its own
// from the catalog (data/gpus.json), so an A100 (108 SMs) splits some reductions differently.
inline constexpr ReduceDevice kMeasuredGpu{132, 2048};

struct CudaReduceStaging {
  int64_t buffer_bytes = 0;     // 0: no global reduce, nothing borrowed
  int64_t semaphore_bytes = 0;
  friend bool operator==(const CudaReduceStaging&, const CudaReduceStaging&) = default;
};

// REQUIRES: the device's counts are positive.
CudaReduceStaging cuda_reduce_staging(const CudaReduction& r, const ReduceDevice& device);

}  // namespace headroom
