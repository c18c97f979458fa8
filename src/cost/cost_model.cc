#include "cost/cost_model.h"

#include <algorithm>
#include <cmath>

#include "training/optimizer_rules.h"
#include "util/error.h"

namespace headroom {
namespace {

bool gemm_like(OpKind k) { return is_convolution_kind(k) || k == OpKind::Linear || k == OpKind::MatMul; }

DType op_dtype(const Graph& g, const Op& op) {
  if (!op.outputs.empty()) return g.tensor(op.outputs[0]).dtype;
  return DType::F32;
}

}  // namespace

CostModel::CostModel(const GpuSpec& gpu, CostConstants constants) : gpu_(gpu), c_(constants) {
  HEADROOM_CHECK(gpu_.fp32_flops > 0 && gpu_.memory_bandwidth_bytes_per_s > 0, "cost model needs FLOP/s and bandwidth: " + gpu_.name);
}

double CostModel::op_flops_per_s(const Graph& g, const Op& op) const {
  if (!gemm_like(op.kind)) return gpu_.fp32_flops;
  switch (op_dtype(g, op)) {
    case DType::F16: return gpu_.fp16_flops.value_or(gpu_.fp32_flops);
    case DType::BF16: return gpu_.bf16_flops.value_or(gpu_.fp32_flops);
    case DType::F32:
      if (is_convolution_kind(op.kind)) return gpu_.tf32_flops.value_or(gpu_.fp32_flops);
      return gpu_.fp32_flops;
    default: return gpu_.fp32_flops;
  }
}

OpCost CostModel::op_cost(const Graph& g, const Op& op, bool no_workspace) const {
  if (op.flops == 0 && op.bytes_moved == 0) return {};  // a view: no kernel
  const double compute_s = static_cast<double>(op.flops) / (op_flops_per_s(g, op) * c_.compute_efficiency);
  const double memory_s = static_cast<double>(op.bytes_moved) / (gpu_.memory_bandwidth_bytes_per_s * c_.memory_efficiency);
  double forward_ms = std::max(compute_s, memory_s) * 1e3 + c_.launch_us * 1e-3;
  if (no_workspace && is_convolution_kind(op.kind)) forward_ms *= c_.no_workspace_conv_slowdown;
  return {forward_ms, forward_ms * c_.backward_factor};
}

double CostModel::update_ms(const ParamUpdate& u, OptimizerKind kind) const {
  if (u.empty()) return 0;
  const double traffic = optimizer_rule(kind).traffic_per_param_byte;
  if (u.on_host) {
    const double rate = u.kernels == UpdateKernels::Fused ? c_.host_fused_adam_elements_per_s : c_.host_torch_adam_elements_per_s;
    const double adam_traffic = optimizer_rule(OptimizerKind::Adam).traffic_per_param_byte;
    return static_cast<double>(u.elements) * c_.host_ranks / rate * (traffic / adam_traffic) * 1e3;
  }
  const double groups = std::ceil(static_cast<double>(u.tensors) / c_.foreach_tensors_per_launch);
  const double launches = u.kernels == UpdateKernels::PerTensor ? c_.optimizer_kernels_per_tensor * u.tensors
                          : u.kernels == UpdateKernels::Foreach ? c_.optimizer_kernels_per_tensor * groups
                                                                : groups;
  return traffic * static_cast<double>(u.bytes) / (gpu_.memory_bandwidth_bytes_per_s * c_.memory_efficiency) * 1e3 +
         launches * c_.launch_us * 1e-3;
}

double CostModel::transfer_ms(int64_t bytes) const {
  HEADROOM_CHECK(gpu_.host_link.bandwidth_bytes_per_s > 0, "no host link bandwidth for " + gpu_.name);
  return static_cast<double>(bytes) / (gpu_.host_link.bandwidth_bytes_per_s * c_.host_link_efficiency) * 1e3 +
         c_.copy_latency_us * 1e-3;
}

double CostModel::load_ms(int64_t bytes, int64_t tensors, bool pinned) const {
  HEADROOM_CHECK(gpu_.host_link.bandwidth_bytes_per_s > 0, "no host link bandwidth for " + gpu_.name);
  if (bytes == 0 && tensors == 0) return 0;
  const double rate = gpu_.host_link.bandwidth_bytes_per_s * c_.host_link_efficiency * (pinned ? 1.0 : c_.pageable_factor);
  return (c_.load_fixed_us + static_cast<double>(tensors) * c_.load_per_tensor_us) * 1e-3 + static_cast<double>(bytes) / rate * 1e3;
}

namespace {

// The one timeline both iteration_time() and step_times() read, so a plotted step and the timed
// step are the same arithmetic. `times` (optional) gets each step's start and end.
IterationTime run_timeline(const CostModel& model, const Graph& g, const Program& p, const MemoryPlan& plan,
                           OptimizerKind optimizer, int iteration, StepTimes* times) {
  std::vector<bool> no_ws(g.ops.size(), false);
  for (OpId id : plan.no_conv_workspace) no_ws[static_cast<size_t>(id)] = true;
  // Copies that start or must end at each step boundary.
  std::vector<std::vector<int>> ready_begin(p.steps.size()), ready_end(p.steps.size()), due_begin(p.steps.size()), due_end(p.steps.size());
  for (size_t i = 0; i < p.transfers.size(); ++i) {
    const Transfer& t = p.transfers[i];
    HEADROOM_CHECK(t.ready_step >= 0 && t.deadline_step >= t.ready_step && static_cast<size_t>(t.deadline_step) < p.steps.size(),
                   "transfer outside the program's steps");
    (t.to_host ? ready_end : ready_begin)[static_cast<size_t>(t.ready_step)].push_back(static_cast<int>(i));
    (t.to_host ? due_end : due_begin)[static_cast<size_t>(t.deadline_step)].push_back(static_cast<int>(i));
  }
  std::vector<double> done(p.transfers.size(), 0);
  double clock = 0, to_host_free = 0, to_device_free = 0;
  IterationTime r;
  auto start_copy = [&](int i) {
    const Transfer& t = p.transfers[static_cast<size_t>(i)];
    double& engine = t.to_host ? to_host_free : to_device_free;
    const double ms = model.transfer_ms(t.bytes);
    done[static_cast<size_t>(i)] = std::max(clock, engine) + ms;
    engine = done[static_cast<size_t>(i)];
    return ms;
  };
  auto wait_for = [&](int i, bool counts) {
    const double d = done[static_cast<size_t>(i)];
    if (d > clock) {
      if (counts) r.stall_ms += d - clock;
      clock = d;
    }
  };
  const bool training = iteration > 0;
  for (size_t s = 0; s < p.steps.size(); ++s) {
    const Step& st = p.steps[s];
    if (times) times->start_ms[s] = clock;
    const bool counts = st.iteration == iteration && (training ? st.phase != Phase::Setup : st.phase == Phase::Inference);
    for (int i : due_begin[s]) wait_for(i, counts);
    for (int i : ready_begin[s]) {
      double ms = start_copy(i);
      if (counts) {
        r.transfer_ms += ms;
        r.transfer_bytes += p.transfers[static_cast<size_t>(i)].bytes;
      }
    }
    double ms = 0;
    if (st.phase == Phase::Optimizer) {
      ms = model.update_ms(st.update, optimizer);
      if (counts) r.optimizer_ms += ms;
    } else if (st.op != kNone) {
      const Op& op = g.op(st.op);
      OpCost c = model.op_cost(g, op, no_ws[static_cast<size_t>(st.op)]);
      const bool forward = st.phase == Phase::Forward || st.phase == Phase::Inference || st.recompute;
      ms = forward ? c.forward_ms : c.backward_ms;
      if (counts) {
        (st.recompute ? r.recompute_ms : r.compute_ms) += ms;
        r.flops += static_cast<double>(op.flops) * (forward ? 1.0 : model.constants().backward_factor);
      }
    }
    clock += ms;
    for (int i : ready_end[s]) {
      double copy_ms = start_copy(i);
      if (counts) {
        r.transfer_ms += copy_ms;
        r.transfer_bytes += p.transfers[static_cast<size_t>(i)].bytes;
      }
    }
    for (int i : due_end[s]) wait_for(i, counts);
    if (times) times->end_ms[s] = clock;
  }
  r.total_ms = r.compute_ms + r.recompute_ms + r.optimizer_ms + r.stall_ms;
  return r;
}

}  // namespace

IterationTime iteration_time(const CostModel& model, const Graph& g, const Program& p, const MemoryPlan& plan,
                             OptimizerKind optimizer, int iteration) {
  return run_timeline(model, g, p, plan, optimizer, iteration, nullptr);
}

StepTimes step_times(const CostModel& model, const Graph& g, const Program& p, const MemoryPlan& plan,
                     OptimizerKind optimizer, int iteration) {
  StepTimes t;
  t.start_ms.assign(p.steps.size(), 0);
  t.end_ms.assign(p.steps.size(), 0);
  run_timeline(model, g, p, plan, optimizer, iteration, &t);
  return t;
}

}  // namespace headroom
