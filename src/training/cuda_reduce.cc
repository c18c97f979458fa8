#include "training/cuda_reduce.h"

#include <algorithm>

#include "util/checked.h"
#include "util/error.h"

namespace headroom {
namespace {

int64_t div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Reduce.cuh last_pow2: the largest power of two not above n (at least 1).
int64_t last_pow2(int64_t n) {
  int64_t p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

}  // namespace

CudaReduceStaging cuda_reduce_staging(const CudaReduction& r, const ReduceDevice& device) {
  HEADROOM_CHECK(device.multiprocessors > 0 && device.max_threads_per_multiprocessor > 0,
                 "reduction staging needs the SM count");
  HEADROOM_CHECK(r.num_outputs > 0 && r.inputs_per_output > 0, "reduction of an empty tensor");
  // A reduction of everything is one on the innermost dimension (num_reduce_dims == ndim).
  const bool innermost = r.innermost || r.num_outputs == 1;
  int64_t dim0 = innermost ? r.inputs_per_output : r.num_outputs;
  const int64_t dim1 = innermost ? r.num_outputs : r.inputs_per_output;
  int64_t output_vec = 1;
  if (innermost) {
    if (dim0 > 128) dim0 /= 4;  // vectorize along the input
  } else {
    // get_output_vec_size: 4, halved until it divides the output count and the input's row
    // stride (both C here; the data pointer is taken as aligned).
    output_vec = 4;
    while (r.num_outputs % output_vec != 0) output_vec /= 2;
    dim0 /= output_vec;
  }
  // set_block_dimension
  const int64_t max_threads = 512 / output_vec;
  const int64_t dim0_pow2 = dim0 < max_threads ? last_pow2(dim0) : max_threads;
  const int64_t dim1_pow2 = dim1 < max_threads ? last_pow2(dim1) : max_threads;
  int64_t block_x = std::min<int64_t>(dim0_pow2, 32);
  const int64_t block_y = std::min(dim1_pow2, max_threads / block_x);
  block_x = std::min(dim0_pow2, max_threads / block_y);
  const int64_t threads = block_x * block_y;

  int64_t step_input = 1, step_output = 1;
  if (innermost) step_input *= block_x;
  else step_output *= block_x;
  bool split_y = false;
  if (div_up(r.inputs_per_output, step_input) >= block_y * 16 || div_up(r.inputs_per_output, step_input) >= 256) {
    step_input *= block_y;
    split_y = true;
  } else {
    step_output *= block_y;
  }
  const int64_t values = div_up(r.inputs_per_output, step_input);
  const int64_t target = device.multiprocessors * (device.max_threads_per_multiprocessor / threads);
  const int64_t grid_x = div_up(r.num_outputs / output_vec, step_output);
  CudaReduceStaging s;
  if (!split_y || values < 256 || grid_x > target) return s;
  const int64_t ctas = std::max(std::min(div_up(target, grid_x), div_up(values, 16)), div_up(values, 256));
  if (ctas <= 1) return s;
  int64_t bytes = checked_mul(checked_mul(r.accumulator_bytes, r.num_outputs, "reduction staging"), ctas, "reduction staging");
  if (!innermost) bytes = checked_mul(bytes, block_x * output_vec, "reduction staging");
  s.buffer_bytes = bytes;
  s.semaphore_bytes = 4 * grid_x;
  return s;
}

}  // namespace headroom
