// Megatron sequence parallelism in the rank's program: the persistent buffer that every
// column-parallel linear with sequence_parallel all-gathers its input into. The ops themselves
// (AllGather, ReduceScatter) are ordinary op rules (training/op_rules.cc); only this buffer
// outlives them, so it is the interpreter's.
//
// Megatron-LM megatron/core/utils.py GlobalMemoryBuffer.get_tensor(shape, dtype, "mpu"): one
// buffer per (name, dtype), created by the first request and replaced by a new torch.empty when
// a request needs more elements (the old one is then dropped); never freed otherwise. A request
// returns a view of its first numel elements.
#include "schedule/interpreter.h"

namespace headroom::schedule_detail {

BufferId Interpreter::gather_buffer(const Tensor& gathered) {
  const int64_t bytes = gathered.bytes();
  auto it = gather_buffers_.find(gathered.dtype);
  if (it != gather_buffers_.end() && p_.buffers[static_cast<size_t>(it->second)].bytes >= bytes) return it->second;
  BufferId b = new_buffer(bytes, Category::Workspaces,
                          std::string("Megatron all-gather buffer (GlobalMemoryBuffer \"mpu\", ") +
                              std::string(dtype_name(gathered.dtype)) + ")",
                          kNone);
  alloc(b);
  ref(b);  // held by Megatron's global for the whole run
  if (it != gather_buffers_.end()) {
    unref(it->second);  // the smaller one goes once nothing views it
    it->second = b;
  } else {
    gather_buffers_.emplace(gathered.dtype, b);
  }
  return b;
}

}  // namespace headroom::schedule_detail
