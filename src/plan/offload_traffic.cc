#include "plan/offload_traffic.h"

#include "util/checked.h"

namespace headroom {

int64_t offload_bytes_per_step(DataParallelEngine engine, bool offload_optimizer, bool offload_params, int64_t parameter_elements,
                               int64_t data_parallel, int64_t micro_batches, int64_t element_bytes) {
  const int64_t part = (parameter_elements + data_parallel - 1) / data_parallel;
  const char* what = "offload traffic";
  if (engine == DataParallelEngine::FsdpFull && offload_params) return checked_mul(part, 12, what);
  if (engine == DataParallelEngine::Zero3 && offload_params) {
    return checked_mul(checked_mul(part, 3 * element_bytes, what), micro_batches, what);
  }
  if (engine == DataParallelEngine::Zero3 && offload_optimizer) {
    // Gradient partitions down per micro-batch; the updated partition up once (cast on the host).
    return checked_mul(part, checked_add(checked_mul(micro_batches, element_bytes, what), element_bytes, what), what);
  }
  if (offload_optimizer) return checked_mul(part, 8, what);
  return 0;
}

}  // namespace headroom
