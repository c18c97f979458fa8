// PyTorch 1.13 DistributedDataParallel's gradient buckets in the interpreter (torch/nn/parallel/
// distributed.py _ddp_init_helper, csrc/distributed/c10d/reducer.cpp): the Reducer allocates each
// bucket's flat `gradients` tensor (initialize_buckets: at::empty of the bucket's elements) when
// DDP is built; with gradient_as_bucket_view=False (the default) param.grad stays a separate
// tensor, so the buckets are as many bytes again as the trainable parameters.
//
//   construction: find_unused_parameters=False gives one bucket of every trainable parameter per
//     dtype (bucket_size_limits = [sys.maxsize]);
//   rebuild: the second forward calls _rebuild_buckets(): the old buckets are cleared, then
//     compute_bucket_assignment_by_size over the parameters in the order their gradients became
//     ready in the first backward, a bucket closing once it reaches its limit (1 MiB
//     _DEFAULT_FIRST_BUCKET_BYTES first, then bucket_cap_mb = 25 MiB), each its own allocation.
#include "schedule/interpreter.h"

#include <algorithm>
#include <map>
#include <string>

#include "util/checked.h"

namespace headroom::schedule_detail {

bool Interpreter::ddp_buckets() const { return o_.sharding.ddp_buckets && o_.mode == RunMode::Training; }

void Interpreter::ddp_allocate_buckets(const std::vector<TensorId>& params, bool limited) {
  const int64_t first = o_.sharding.ddp_first_bucket_bytes, cap = o_.sharding.ddp_bucket_cap_bytes;
  struct Open {
    int64_t bytes = 0;
    int limit_index = 0;
  };
  std::map<DType, Open> open;  // BucketKey: dtype (one device)
  std::vector<std::pair<DType, int64_t>> closed;
  for (TensorId p : params) {
    const Tensor& t = g_.tensor(p);
    Open& b = open[t.dtype];
    b.bytes = checked_add(b.bytes, t.bytes(), "DDP bucket bytes");
    if (limited && b.bytes >= (b.limit_index == 0 ? first : cap)) {
      closed.emplace_back(t.dtype, b.bytes);
      b.bytes = 0;
      b.limit_index = 1;
    }
  }
  for (const auto& [dtype, b] : open) {
    if (b.bytes > 0) closed.emplace_back(dtype, b.bytes);
  }
  for (const auto& [dtype, bytes] : closed) {
    BufferId buf = new_buffer(bytes, Category::Gradients, "DDP bucket (" + std::string(dtype_name(dtype)) + ")", kNone);
    alloc(buf);
    ref(buf);
    ddp_bucket_buffers_.push_back(buf);
  }
}

void Interpreter::ddp_setup_buckets() {
  if (!ddp_buckets()) return;
  // _build_params_for_reducer: the trainable parameters, module order, each once.
  std::vector<TensorId> params;
  for (const Tensor& t : g_.tensors) {
    if (t.role == TensorRole::Parameter && t.tied_to == kNone && t.requires_grad()) params.push_back(t.id);
  }
  ddp_allocate_buckets(params, /*limited=*/false);
}

void Interpreter::ddp_mark_ready(TensorId param) {
  if (!ddp_buckets() || ddp_rebuilt_) return;
  if (std::find(ddp_ready_order_.begin(), ddp_ready_order_.end(), param) == ddp_ready_order_.end()) ddp_ready_order_.push_back(param);
}

void Interpreter::ddp_rebuild_buckets(int iteration, int micro) {
  if (!ddp_buckets() || ddp_rebuilt_ || ddp_ready_order_.empty()) return;
  ddp_rebuilt_ = true;
  begin_step(Phase::Forward, iteration, micro, kNone, "DDP _rebuild_buckets()");
  for (BufferId b : ddp_bucket_buffers_) unref(b);
  ddp_bucket_buffers_.clear();
  ddp_allocate_buckets(ddp_ready_order_, /*limited=*/true);
  end_step();
}

}  // namespace headroom::schedule_detail
