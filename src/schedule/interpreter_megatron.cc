// Megatron-LM's own data parallelism in the interpreter (ShardingEngine::Megatron): what one rank
// holds when its model chunks are wrapped in megatron/core/distributed/distributed_data_parallel.py
// DistributedDataParallel and trained by Megatron's optimizers (megatron/core/optimizer/).
//
//   wrap     each model chunk's DDP builds one _ParamAndGradBuffer per dtype
//            (param_and_grad_buffer.py, layout: schedule/megatron_buffer.h): grad_data, the
//            main_grad of every trainable parameter, in fp32 under bf16 (validate_args sets
//            accumulate_allreduce_grads_in_fp32: "bfloat16 requires gradient accumulation and
//            all-reduce to be done in fp32"); with the distributed optimizer also param_data in
//            the parameters' dtype. Both are torch.zeros made before the parameters are remapped,
//            then each parameter's data is copied into param_data and its old storage freed.
//            Neither buffer is ever freed.
//   optimizer  16-bit parameters: Float16OptimizerWithFloat16Params keeps an fp32 main copy of
//            every parameter (param.detach().clone().float()), the distributed optimizer one of
//            each piece of this rank's buffer range (distrib_optimizer.py
//            _build_model_and_main_param_groups: shard_model_param.clone().float()), made when the
//            optimizer is built; fp32 parameters are their own main params (FP32Optimizer). The
//            Adam moments (Apex/TE FusedAdam: zeros_like(main param) at the first step, `step`
//            in the param group) are fp32 on the same tensors.
//   backward the gradient is added into main_grad and param.grad dropped (the hook of
//            _make_backward_post_hook; gradient_accumulation_fusion's wgrad GEMM writing straight
//            into main_grad is not modelled, so each weight gradient lives briefly as here).
//   step     main_param.grad = main_grad.float() is a view (main_grad is fp32 already), FusedAdam
//            updates in place, the main params are copied back in place (and all-gathered into
//            param_data), zero_grad_buffer() zeroes grad_data in place: nothing is allocated or
//            freed after the first step's moments.
#include <algorithm>
#include <string>
#include <vector>

#include "schedule/interpreter.h"
#include "schedule/megatron_buffer.h"
#include "util/checked.h"

namespace headroom::schedule_detail {

void Interpreter::megatron_setup() {
  if (!megatron()) return;
  const Sharding& s = o_.sharding;
  const bool distributed = s.zero_stage == 1;
  // Each model chunk (one, or v under the interleaved schedule) is its own DDP module.
  const size_t chunks = std::max<size_t>(1, o_.pipeline.chunks.size());
  std::vector<size_t> chunk_of_op(g_.ops.size(), 0);
  for (size_t c = 0; c < o_.pipeline.chunks.size(); ++c) {
    const PipelineChunk& ch = o_.pipeline.chunks[c];
    const OpId last = ch.last == kNone ? static_cast<OpId>(g_.ops.size()) - 1 : ch.last;
    for (OpId i = ch.first; i <= last; ++i) chunk_of_op[static_cast<size_t>(i)] = c;
  }
  std::vector<OpId> first_reader(g_.tensors.size(), kNone);
  for (const Op& op : g_.ops) {
    for (TensorId p : op_params_[static_cast<size_t>(op.id)]) {
      if (first_reader[static_cast<size_t>(p)] == kNone) first_reader[static_cast<size_t>(p)] = op.id;
    }
  }
  // named_parameters() of each chunk with requires_grad, in module order; the buffer takes them reversed.
  std::vector<std::vector<TensorId>> params(chunks);
  for (const Tensor& t : g_.tensors) {
    if (t.role != TensorRole::Parameter || t.tied_to != kNone || !t.requires_grad()) continue;
    if (t.dtype == DType::F16) {
      throw InputError("--megatron with fp16 parameters is not modelled (Megatron keeps fp16 main gradients and a loss scaler there); use --precision bf16 or fp32");
    }
    const OpId reader = first_reader[static_cast<size_t>(t.id)];
    params[reader == kNone ? 0 : chunk_of_op[static_cast<size_t>(reader)]].push_back(t.id);
  }
  std::vector<MegatronBufferLayout> layouts(chunks);
  std::vector<std::vector<int64_t>> numels(chunks);
  for (size_t c = 0; c < chunks; ++c) {
    std::reverse(params[c].begin(), params[c].end());
    for (TensorId p : params[c]) numels[c].push_back(g_.tensor(p).numel());
    layouts[c] = megatron_buffer_layout(numels[c], s.data_parallel, distributed);
  }
  const int rank = distributed ? megatron_most_loaded_rank(layouts, numels, s.data_parallel) : 0;
  for (size_t c = 0; c < chunks; ++c) {
    if (params[c].empty()) continue;
    const std::string chunk = chunks > 1 ? " of model chunk " + std::to_string(c) : "";
    const DType param_dtype = g_.tensor(params[c].front()).dtype;
    if (distributed) {
      BufferId data = new_buffer(checked_mul(layouts[c].elements, dtype_size(param_dtype), "Megatron buffer bytes"), Category::Weights,
                                 "param_data (" + std::string(dtype_name(param_dtype)) + ")" + chunk, kNone);
      alloc(data);
      ref(data);
      megatron_param_buffers_.push_back(data);
    }
    // grad_dtype: fp32 for bf16 (accumulate_allreduce_grads_in_fp32) and for fp32 parameters.
    BufferId grad = new_buffer(checked_mul(layouts[c].elements, 4, "Megatron buffer bytes"), Category::Gradients, "main_grad buffer (fp32)" + chunk, kNone);
    alloc(grad);
    ref(grad);
    megatron_grad_buffers_.push_back(grad);
    if (distributed) {
      // The parameters become views of param_data; their own storage goes.
      for (TensorId p : params[c]) {
        BufferId& b = buf_of_[static_cast<size_t>(p)];
        unref(b);
        b = megatron_param_buffers_.back();
      }
    }
  }
  // A tied parameter reads its target's storage (setup()), param_data where that was remapped.
  for (const Tensor& t : g_.tensors) {
    if (t.tied_to != kNone) buf_of_[static_cast<size_t>(t.id)] = buf_of_[static_cast<size_t>(t.tied_to)];
  }
  // The optimizer's main params (16-bit parameters only) and, for the first step, the tensors
  // its moments will be made like.
  megatron_main_params_.clear();
  for (size_t c = 0; c < chunks; ++c) {
    const std::vector<int64_t> pieces = distributed ? megatron_rank_pieces(layouts[c], numels[c], s.data_parallel, rank) : numels[c];
    for (size_t i = 0; i < params[c].size(); ++i) {
      if (pieces[i] == 0) continue;
      const Tensor& t = g_.tensor(params[c][i]);
      megatron_main_params_.push_back({t.id, pieces[i]});
      if (t.dtype != DType::F32) state(checked_mul(pieces[i], 4, "Megatron main param bytes"), t.name + (distributed ? " (fp32 main param shard)" : " (fp32 main param)"));
    }
  }
}

void Interpreter::megatron_accumulate(TensorId param, GradValue g) {
  // param.main_grad.add_(param.grad); param.grad = None. The buffer marks the parameter as
  // having a gradient this step.
  param_grad_[static_cast<size_t>(param)] = megatron_grad_buffers_.front();
  unref(g.buffer);
}

void Interpreter::megatron_optimizer_step(int iteration) {
  const bool distributed = o_.sharding.zero_stage == 1;
  begin_step(Phase::Optimizer, iteration, 0, kNone,
             distributed ? "Megatron DistributedOptimizer step() (this rank's 1/d)" : "Megatron Float16OptimizerWithFloat16Params.step()");
  // The update runs over the fp32 main params, one tensor per parameter (its piece of this
  // rank's 1/d range under the distributed optimizer), with Megatron's FusedAdam (Transformer
  // Engine's or apex's: multi_tensor_applier, megatron/core/optimizer/__init__.py).
  ParamUpdate u;
  for (const auto& piece : megatron_main_params_) u.elements = checked_add(u.elements, piece.second, "Megatron update elements");
  if (u.elements > 0) {
    u.bytes = checked_mul(u.elements, 4, "Megatron update bytes");
    u.tensors = static_cast<int32_t>(megatron_main_params_.size());
    u.kernels = UpdateKernels::Fused;
    set_update(u);
  }
  if (!state_created_) {
    // FusedAdam's first step: zeros_like(main param) for each moment, parameter by parameter, in fp32.
    std::vector<std::string> moments = partition_moments();
    for (std::string& m : moments) m = m.substr(0, m.find(' '));
    for (const auto& [param, elements] : megatron_main_params_) {
      for (const std::string& m : moments) {
        state(checked_mul(elements, 4, "Megatron optimizer state bytes"), g_.tensor(param).name + "." + m + (distributed ? " (shard)" : ""));
      }
    }
    state_created_ = true;
  }
  end_step();
  begin_step(Phase::Optimizer, iteration, 0, kNone, "zero_grad_buffer() (in place)");
  for (BufferId& pg : param_grad_) {
    if (std::find(megatron_grad_buffers_.begin(), megatron_grad_buffers_.end(), pg) != megatron_grad_buffers_.end()) pg = kNone;
  }
  end_step();
}

}  // namespace headroom::schedule_detail
