// The optimizer step of every engine path, timed from the update the interpreter records on the
// step (Step::update): what one rank's step updates (elements, bytes, tensors, kernels, device or
// host) worked out by hand from the parameter count Psi and the data-parallel size d, then its
// time on a round GPU (1e11 B/s, launches 6 us) or at round host rates. Nothing below is read
// off a run.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "cost/cost_model.h"
#include "estimate/estimate.h"
#include "layout_search_args.h"
#include "plan/layout_search.h"
#include "sim/device_catalog.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

// mlp:layers=4,dim=256: 4 Linears of 65,536 + 256 parameters, 8 tensors, Psi = 263,168. Over
// d = 8 ranks every split is exact: Psi / 8 = 32,896 (8,192 per weight, 32 per bias; each
// Linear's 65,792 / 8 = 8,224).
constexpr int64_t kPsi = 263168;
constexpr int64_t kPart = kPsi / 8;
const char* kModel = "mlp:layers=4,dim=256";

EstimateOptions layout(Precision p, std::optional<int> zero, std::optional<FsdpStrategy> fsdp = std::nullopt, int64_t gpus = 8) {
  EstimateOptions o;
  o.model = kModel;
  o.batch = 1;
  o.precision = p;
  o.foreach = false;
  o.parallel.gpus = gpus;
  o.parallel.zero_stage = zero;
  o.parallel.fsdp = fsdp;
  o.keep_program = true;
  return o;
}

Program program(const EstimateOptions& o) {
  Result<Estimate> r = estimate(o);
  EXPECT_TRUE(r.ok()) << r.error();
  return r.ok() ? r.value().program : Program{};
}

// The update of iteration `it`'s optimizer steps: exactly one of them updates parameters (the
// zero_grad steps update nothing), and no other step carries one.
ParamUpdate update_of(const Program& p, int it = 2) {
  ParamUpdate found;
  int updates = 0;
  for (const Step& s : p.steps) {
    if (s.update.empty()) continue;
    EXPECT_EQ(s.phase, Phase::Optimizer) << s.label;
    if (s.iteration != it) continue;
    found = s.update;
    ++updates;
  }
  EXPECT_EQ(updates, 1);
  return found;
}

GpuSpec round_gpu() {
  GpuSpec g;
  g.name = "round";
  g.fp32_flops = 1e12;
  g.memory_bandwidth_bytes_per_s = 1e11;
  g.host_link.bandwidth_bytes_per_s = 1e10;
  return g;
}

// Efficiencies 1; launch 6 us (the default); host rates 1e9 (DeepSpeedCPUAdam) and 1e8
// (torch.optim) elements/s; 8 ranks share the host.
CostModel round_model() {
  CostConstants c;
  c.memory_efficiency = 1;
  c.compute_efficiency = 1;
  c.host_fused_adam_elements_per_s = 1e9;
  c.host_torch_adam_elements_per_s = 1e8;
  c.host_ranks = 8;
  return CostModel(round_gpu(), c);
}

void expect_update(const ParamUpdate& u, int64_t elements, int64_t bytes, int32_t tensors, UpdateKernels kernels, bool on_host) {
  EXPECT_EQ(u.elements, elements);
  EXPECT_EQ(u.bytes, bytes);
  EXPECT_EQ(u.tensors, tensors);
  EXPECT_EQ(u.kernels, kernels);
  EXPECT_EQ(u.on_host, on_host);
}

TEST(OptimizerStepTime, DdpUpdatesTheWholeModelTensorByTensor) {
  // torch.optim.Adam (single-tensor) on every rank: Psi = 263,168 fp32 elements, 1,052,672
  // bytes, 8 tensors. Adam reads and writes 7 bytes per byte: 7,368,704 B at 1e11 B/s =
  // 0.07368704 ms, plus 4 kernels x 8 tensors x 6 us = 0.192 ms: 0.26568704 ms.
  const Program p = program(layout(Precision::Fp32, std::nullopt));
  const ParamUpdate u = update_of(p);
  expect_update(u, kPsi, 4 * kPsi, 8, UpdateKernels::PerTensor, false);
  const CostModel m = round_model();
  EXPECT_NEAR(m.update_ms(u, OptimizerKind::Adam), 0.07368704 + 0.192, 1e-12);
  // The timeline counts it once in the optimizer's share of the iteration.
  EstimateOptions o = layout(Precision::Fp32, std::nullopt);
  const Graph g = build_graph(o, 1);
  EXPECT_NEAR(iteration_time(m, g, p, MemoryPlan{}, OptimizerKind::Adam, 2).optimizer_ms, 0.26568704, 1e-12);
  // foreach: the same bytes, 4 kernels per group of up to 36 tensors: one group, 0.024 ms.
  o.foreach = true;
  const ParamUpdate f = update_of(program(o));
  expect_update(f, kPsi, 4 * kPsi, 8, UpdateKernels::Foreach, false);
  EXPECT_NEAR(m.update_ms(f, OptimizerKind::Adam), 0.07368704 + 0.024, 1e-12);
}

TEST(OptimizerStepTime, ZeroPartitionsCostOneEighthOfTheDdpBytesInOneFusedLaunch) {
  // ZeRO-1, 2 and 3 over d = 8: FusedAdam on this rank's fp32 partition, one flat tensor of
  // Psi / 8 = 32,896 elements, 131,584 bytes = 1/8 of DDP's 1,052,672. 7 x 131,584 = 921,088 B
  // at 1e11 B/s = 0.00921088 ms, plus one multi_tensor_adam launch, 0.006 ms.
  const CostModel m = round_model();
  for (int zero : {1, 2, 3}) {
    const ParamUpdate u = update_of(program(layout(Precision::Fp32, zero)));
    expect_update(u, kPart, 4 * kPart, 1, UpdateKernels::Fused, false);
    EXPECT_EQ(u.bytes * 8, 4 * kPsi);
    EXPECT_NEAR(m.update_ms(u, OptimizerKind::Adam), 0.00921088 + 0.006, 1e-12) << "ZeRO-" << zero;
  }
  // bf16: the master partition is still fp32 (4 bytes an element), the same update.
  expect_update(update_of(program(layout(Precision::Bf16, 2))), kPart, 4 * kPart, 1, UpdateKernels::Fused, false);
  // Stage 0 in fp32 keeps no flat partition: FusedAdam over the 8 parameters, one launch of
  // up to 36 tensors; stage 0 in bf16 updates its whole fp32 master group, one tensor.
  expect_update(update_of(program(layout(Precision::Fp32, 0))), kPsi, 4 * kPsi, 8, UpdateKernels::Fused, false);
  expect_update(update_of(program(layout(Precision::Bf16, 0))), kPsi, 4 * kPsi, 1, UpdateKernels::Fused, false);
}

TEST(OptimizerStepTime, ZeroOffloadRunsDeepSpeedCpuAdamOnTheHost) {
  // ZeRO-Offload (stage 2, offload_optimizer cpu), bf16, d = 8: DeepSpeedCPUAdam over this rank's
  // 32,896-element fp32 partition on the host, which 8 ranks share: 32,896 x 8 elements at
  // 1e9 elements/s = 0.263168 ms (no launches, no device bandwidth).
  EstimateOptions o = layout(Precision::Bf16, 2);
  o.parallel.offload_optimizer = OffloadDevice::Cpu;
  const ParamUpdate u = update_of(program(o));
  expect_update(u, kPart, 4 * kPart, 1, UpdateKernels::Fused, true);
  EXPECT_NEAR(round_model().update_ms(u, OptimizerKind::Adam), 0.263168, 1e-12);
  // Stage 3 with the optimizer and the parameters on the host: the same partition, on the host.
  o.parallel.zero_stage = 3;
  o.parallel.offload_params = true;
  expect_update(update_of(program(o)), kPart, 4 * kPart, 1, UpdateKernels::Fused, true);
}

TEST(OptimizerStepTime, FsdpUpdatesItsFlatShardsPaddingIncluded) {
  // FULL_SHARD, fp32, one unit per Linear: torch.optim sees one FlatParameter per unit, each
  // rank's shard 65,792 / 8 = 8,224 elements: 4 tensors, 32,896 elements, 131,584 bytes.
  // 0.00921088 ms of bytes + 4 kernels x 4 tensors x 6 us = 0.096 ms.
  const ParamUpdate u = update_of(program(layout(Precision::Fp32, std::nullopt, FsdpStrategy::Full)));
  expect_update(u, kPart, 4 * kPart, 4, UpdateKernels::PerTensor, false);
  EXPECT_NEAR(round_model().update_ms(u, OptimizerKind::Adam), 0.00921088 + 0.096, 1e-12);
  // Over 3 ranks each shard is padded to ceil(65,792 / 3) = 21,931 elements (65,792 = 3 x
  // 21,930 + 2): 4 x 21,931 = 87,724 elements, 2 more than 3 units' exact thirds.
  expect_update(update_of(program(layout(Precision::Fp32, std::nullopt, FsdpStrategy::Full, 3))), 4 * 21931, 4 * 4 * 21931, 4,
                UpdateKernels::PerTensor, false);
  // SHARD_GRAD_OP keeps the same flat shards.
  expect_update(update_of(program(layout(Precision::Fp32, std::nullopt, FsdpStrategy::GradOp))), kPart, 4 * kPart, 4,
                UpdateKernels::PerTensor, false);
}

TEST(OptimizerStepTime, FsdpCpuOffloadRunsTorchOptimOnTheHost) {
  // FULL_SHARD, MixedPrecision(bf16), CPUOffload: torch.optim.Adam over the 8 parameter-wise fp32
  // shards on the host (weights 8,192, biases 32 elements: 32,896 in all, 131,584 bytes). At
  // torch.optim's host rate of 1e8 elements/s, 8 ranks on the host: 32,896 x 8 / 1e8 s =
  // 2.63168 ms. SGD moves 3 bytes per byte where Adam moves 7: 3/7 of that.
  EstimateOptions o = layout(Precision::Bf16, std::nullopt, FsdpStrategy::Full);
  o.parallel.offload_params = true;
  const ParamUpdate u = update_of(program(o));
  expect_update(u, kPart, 4 * kPart, 8, UpdateKernels::PerTensor, true);
  const CostModel m = round_model();
  EXPECT_NEAR(m.update_ms(u, OptimizerKind::Adam), 2.63168, 1e-12);
  o.optimizer = OptimizerKind::Sgd;
  const ParamUpdate sgd = update_of(program(o));
  expect_update(sgd, kPart, 4 * kPart, 8, UpdateKernels::PerTensor, true);
  EXPECT_NEAR(m.update_ms(sgd, OptimizerKind::Sgd), 2.63168 * 3 / 7, 1e-12);
}

TEST(OptimizerStepTime, MegatronUpdatesItsFp32MainParamsOrTheirPieces) {
  // mlp:layers=2,dim=100 in bf16 on 3 GPUs (tests/megatron_ddp_test.cc): Psi = 20,200 in 4
  // tensors. Float16OptimizerWithFloat16Params: FusedAdam over every fp32 main param, 4 tensors,
  // 80,800 bytes. The distributed optimizer: rank 0's pieces of the padded buffer, 100 + 6,656
  // = 6,756 elements in 2 tensors (MegatronBuffer.DistributedOptimizerPadsEachStartTo64...).
  EstimateOptions o;
  o.model = "mlp:layers=2,dim=100";
  o.batch = 4;
  o.precision = Precision::Bf16;
  o.parallel.gpus = 3;
  o.parallel.megatron = true;
  o.keep_program = true;
  expect_update(update_of(program(o)), 20200, 4 * 20200, 4, UpdateKernels::Fused, false);
  o.parallel.zero_stage = 1;
  const ParamUpdate u = update_of(program(o));
  expect_update(u, 6756, 4 * 6756, 2, UpdateKernels::Fused, false);
  // 7 x 27,024 = 189,168 B at 1e11 B/s = 0.00189168 ms + one launch.
  EXPECT_NEAR(round_model().update_ms(u, OptimizerKind::Adam), 0.00189168 + 0.006, 1e-12);
}

TEST(OptimizerStepTime, AnEmptyUpdateCostsNothing) {
  EXPECT_EQ(round_model().update_ms(ParamUpdate{}, OptimizerKind::Adam), 0.0);
}

TEST(OptimizerStepTime, LayoutSearchTimesTheZeroPartitionsStep) {
  // gpt2 (Psi = 124,439,808, the tied lm_head once) on 4 T4s, fp32 Adam: a ZeRO family's
  // optimizer time is FusedAdam over Psi / 4 = 31,109,952 fp32 elements in one tensor on the T4's
  // roofline, and DDP's is torch.optim over all of them: 4 times the bytes.
  RunArgs a;
  a.model = "gpt2";
  a.batch = "16";
  a.gpu = "T4";
  a.margin = "0%";
  const LayoutPlan p = testing::search_layouts_for(a, 4);
  const CostModel t4(DeviceCatalog::builtin().find("T4"));
  constexpr int64_t kGpt2 = 124439808, kQuarter = kGpt2 / 4;
  const ParamUpdate zero{.elements = kQuarter, .bytes = 4 * kQuarter, .tensors = 1, .kernels = UpdateKernels::Fused, .on_host = false};
  int zero_families = 0;
  for (const LayoutOption& l : p.ranked) {
    if (l.parallel.tensor_parallel > 1 || l.parallel.pipeline_parallel > 1 || !l.parallel.zero_stage || l.parallel.megatron) continue;
    ++zero_families;
    EXPECT_GT(l.optimizer_ms, 0) << l.engine;
    EXPECT_DOUBLE_EQ(l.optimizer_ms, t4.update_ms(zero, OptimizerKind::Adam)) << l.engine;
    EXPECT_LE(l.optimizer_ms, l.compute_ms) << l.engine;
  }
  EXPECT_GT(zero_families, 0);
  for (const LayoutOption& l : p.ranked) {
    if (l.engine != "DDP") continue;
    EXPECT_GT(l.optimizer_ms, 3 * t4.update_ms(zero, OptimizerKind::Adam));
  }
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
