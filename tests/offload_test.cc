// Engine offloading (--offload-optimizer cpu|nvme, --offload-params cpu): what one rank keeps on
// the device and on the host, each number derived in its comment from the parameter count Psi,
// the data-parallel size N and the engine code cited in schedule/interpreter_offload.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "estimate/estimate.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::CliRun;
using testing::expect_usage_error;
using testing::run_cli;

// mlp:layers=4,dim=256: 4 Linears of 65,536 + 256 parameters, Psi = 263,168, in tensor order
// layer0.weight, layer0.bias, layer1.weight, ... On 4 GPUs every shard is exact:
// Psi/4 = 65,792 (16,384 per weight, 64 per bias).
constexpr int64_t kPsi = 263168;
constexpr int64_t kPart = kPsi / 4;
const char* kModel = "mlp:layers=4,dim=256";

EstimateOptions deepspeed(int zero, std::optional<OffloadDevice> optimizer, bool params = false) {
  EstimateOptions o;
  o.model = kModel;
  o.batch = 1;
  o.precision = Precision::Bf16;
  o.parallel.gpus = 4;
  o.parallel.zero_stage = zero;
  o.parallel.offload_optimizer = optimizer;
  o.parallel.offload_params = params;
  o.parallel.reduce_bucket_elements = 1000;  // a 2,000-byte ipg bucket, so the states dominate
  o.keep_program = true;
  return o;
}

Estimate run(const EstimateOptions& o) {
  Result<Estimate> r = estimate(o);
  EXPECT_TRUE(r.ok()) << r.error();
  return r.ok() ? r.value() : Estimate{};
}

// The bytes of the program's device buffers whose name contains `name` (one per step may exist;
// all of the same size), -1 when there is none.
int64_t device_buffer(const Program& p, const std::string& name) {
  int64_t bytes = -1;
  for (const Buffer& b : p.buffers) {
    if (b.name.find(name) == std::string::npos) continue;
    if (bytes != -1) {
      EXPECT_EQ(bytes, b.bytes) << "buffers named " << name << " differ";
    }
    bytes = b.bytes;
  }
  return bytes;
}

bool has_device_buffer(const Program& p, const std::string& name) {
  return std::any_of(p.buffers.begin(), p.buffers.end(), [&](const Buffer& b) { return b.name.find(name) != std::string::npos; });
}

TEST(Offload, ZeroTwoCpuKeepsSixteenBitParametersOnTheDevice) {
  // ZeRO-Offload (stage 2, offload_optimizer cpu), bf16 on 4 GPUs.
  // Device states when the step begins: the 16-bit parameters 2 Psi = 526,336; no
  // grads_in_partition (copy_grads_in_partition copies to the host and returns), no fp32 master
  // or moments. Without offload the same layout holds 2 Psi + 14 Psi/N = 526,336 + 921,088.
  Estimate e = run(deepspeed(2, OffloadDevice::Cpu));
  ASSERT_TRUE(e.per_gpu);
  EXPECT_EQ(e.per_gpu->model_states_bytes, 2 * kPsi);
  EXPECT_EQ(run(deepspeed(2, std::nullopt)).per_gpu->model_states_bytes, 2 * kPsi + 14 * kPart);
  // Host: fp32 master 4 * 65,792 = 263,168, its fp32 gradient 263,168, exp_avg and exp_avg_sq
  // 526,336, temp_grad_buffer_for_cpu_offload = largest parameter 65,536 * 2 = 131,072:
  // 1,052,672 + 131,072 = 1,183,744. Nothing on NVMe.
  EXPECT_EQ(e.per_gpu->host_bytes, 16 * kPart + 65536 * 2);
  EXPECT_EQ(e.per_gpu->host_bytes, 1183744);
  EXPECT_EQ(e.per_gpu->nvme_bytes, 0);
  // On the device: temp_grad_buffer_for_gpu_offload (65,536 * 2), and in the step the fp32
  // partition copied back (fp32_partition.to(device): 4 * 65,792 = 263,168).
  EXPECT_EQ(device_buffer(e.program, "temp_grad_buffer_for_gpu_offload"), 131072);
  EXPECT_EQ(device_buffer(e.program, "fp32 partition copied to the device"), 263168);
  EXPECT_FALSE(has_device_buffer(e.program, "grads_in_partition"));
  EXPECT_FALSE(has_device_buffer(e.program, "exp_avg"));
}

TEST(Offload, ZeroTwoCpuAccumulatesInHostBuffersOfRankZerosParameters) {
  // With 2 micro-batches, async_accumulate_grad_in_cpu_via_gpu gives each parameter of the
  // partition a host buffer of its full numel in bf16. Rank 0's partition [0, 65,792) holds
  // layer0.weight (offset 0) and layer0.bias (offset 65,536): 65,792 * 2 = 131,584 more bytes.
  EstimateOptions o = deepspeed(2, OffloadDevice::Cpu);
  o.batch = 2;
  o.micro_batch = 1;
  EXPECT_EQ(run(o).per_gpu->host_bytes, 1183744 + 131584);
}

TEST(Offload, ZeroOneCpuKeepsFullGradientsAndGetsTheBucket) {
  // Stage 1 keeps param.grad (2 Psi) until the step: device states 4 Psi = 1,052,672. ZeRO-Offload
  // forces contiguous_gradients, so backward() allocates the ipg bucket: 1,000 * 2 bytes.
  Estimate e = run(deepspeed(1, OffloadDevice::Cpu));
  EXPECT_EQ(e.per_gpu->model_states_bytes, 4 * kPsi);
  EXPECT_EQ(device_buffer(e.program, "ipg bucket"), 2000);
  EXPECT_EQ(e.per_gpu->host_bytes, 1183744);
}

TEST(Offload, ZeroThreeCpuParametersAndOptimizerLeaveNothingOnTheDevice) {
  // Stage 3, offload_optimizer and offload_param cpu: the 16-bit partitions (2 Psi/N = 131,584)
  // move to the host; the device keeps no parameter, gradient or optimizer state between ops.
  // Host: partitions 131,584 + grad_partitions_flat_buffer (bf16, 2 Psi/N) 131,584 + fp32 master,
  // its gradient and the moments 16 Psi/N = 1,052,672 -> 1,315,840.
  Estimate e = run(deepspeed(3, OffloadDevice::Cpu, true));
  EXPECT_EQ(e.per_gpu->model_states_bytes, 0);
  EXPECT_EQ(e.per_gpu->host_bytes, 2 * kPart + 2 * kPart + 16 * kPart);
  EXPECT_EQ(e.per_gpu->host_bytes, 1315840);
  // Each op still gathers its full parameters on the device (fetch_sub_module).
  EXPECT_TRUE(has_device_buffer(e.program, "(gathered)"));
  // Without offload_param the partitions stay on the device: 2 Psi/N = 131,584 of model states.
  EXPECT_EQ(run(deepspeed(3, OffloadDevice::Cpu)).per_gpu->model_states_bytes, 2 * kPart);
}

TEST(Offload, ZeroInfinityNvmeHoldsTheStatesAndTheHostItsSwapBuffers) {
  // offload_optimizer nvme: fp32 master, gradient and moments (16 Psi/N = 1,052,672) on NVMe; the
  // host keeps grad_partitions_flat_buffer (131,584) and the swapper's 4 pinned buffers of the
  // largest sub-group, 65,792 elements (already a multiple of 256) * 4 bytes each = 1,052,672.
  Estimate e = run(deepspeed(3, OffloadDevice::Nvme));
  EXPECT_EQ(e.per_gpu->nvme_bytes, 16 * kPart);
  EXPECT_EQ(e.per_gpu->host_bytes, 2 * kPart + 4 * 4 * kPart);
  EXPECT_EQ(e.per_gpu->model_states_bytes, 2 * kPart);  // the 16-bit partitions, on the device
}

TEST(Offload, FsdpCpuOffloadMovesTheFlatShardsGradientsAndAdamToTheHost) {
  // FSDP FULL_SHARD, MixedPrecision(bf16), CPUOffload(offload_params=True): the fp32 flat shards
  // (4 Psi/N = 263,168), their pinned _cpu_grad (263,168) and torch.optim.Adam's state on the
  // host (moments 8 Psi/N = 526,336 and 8 `step` tensors of 4 bytes, counted per parameter under
  // CPU offload): 1,052,704 bytes. Without offload the device holds the same shards as one flat
  // shard per Linear (65,792 / 4 elements, no padding); the 4 `step`s are CPU tensors there too
  // (torch.tensor(0.)): 1,052,672.
  EstimateOptions o = deepspeed(0, std::nullopt, true);
  o.parallel.zero_stage.reset();
  o.parallel.fsdp = FsdpStrategy::Full;
  o.parallel.reduce_bucket_elements.reset();
  Estimate e = run(o);
  EXPECT_EQ(e.per_gpu->model_states_bytes, 0);
  EXPECT_EQ(e.per_gpu->host_bytes, 16 * kPart + 32);
  o.parallel.offload_params = false;
  EXPECT_EQ(run(o).per_gpu->model_states_bytes, 16 * kPart);
}

// The ZeRO paper's model (docs/distributed.md): mlp:layers=447,dim=4096, Psi = 7,501,246,464,
// N = 64. ZeRO-Offload on stage 2 keeps 2 Psi of bf16 parameters on each GPU (15.0 GB: the
// ZeRO-Offload paper's "fp16 parameters on the GPU"); the host holds 16 Psi/N plus the
// largest parameter's 16-bit staging buffer: 16 * 117,206,976 + 16,777,216 * 2 = 1,908,866,048.
TEST(Offload, ZeroPaperModelUnderZeroOffload) {
  EstimateOptions o = deepspeed(2, OffloadDevice::Cpu);
  o.model = "mlp:layers=447,dim=4096";
  o.parallel.gpus = 64;
  o.parallel.reduce_bucket_elements.reset();
  o.keep_program = false;
  Estimate e = run(o);
  EXPECT_EQ(e.per_gpu->model_states_bytes, 2 * 7501246464);
  EXPECT_EQ(e.per_gpu->host_bytes, 1908866048);
}

TEST(OffloadCli, JsonReportsHostBytes) {
  CliRun r = run_cli("estimate mlp:layers=4,dim=256 --gpus 4 --zero 3 --precision bf16 --offload-optimizer nvme "
                     "--reduce-bucket-size 1000 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["per_gpu"]["host_bytes"], 2 * kPart + 4 * 4 * kPart);
  EXPECT_EQ(j["per_gpu"]["nvme_bytes"], 16 * kPart);
  r = run_cli("estimate mlp:layers=4,dim=256 --gpus 4 --zero 2 --precision bf16 --offload-optimizer cpu --reduce-bucket-size 1000");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("offloaded per rank: host memory"), std::string::npos) << r.out;
}

TEST(OffloadCli, OffloadThatTheEngineDoesNotHaveIsOneLine) {
  const std::string m = "estimate mlp:layers=2,dim=64 --precision bf16 ";
  expect_usage_error(m + "--offload-optimizer cpu", "need --gpus");
  expect_usage_error(m + "--gpus 4 --offload-optimizer cpu", "needs --zero 1, 2 or 3");
  expect_usage_error(m + "--gpus 4 --zero 0 --offload-optimizer cpu", "needs --zero 1, 2 or 3");
  expect_usage_error(m + "--gpus 4 --zero 2 --offload-optimizer nvme", "needs --zero 3");
  expect_usage_error(m + "--gpus 4 --zero 2 --offload-optimizer disk", "must be cpu or nvme");
  expect_usage_error(m + "--gpus 4 --zero 2 --offload-optimizer cpu --optimizer sgd", "DeepSpeedCPUAdam");
  expect_usage_error(m + "--gpus 4 --fsdp full --offload-optimizer cpu", "--offload-params cpu");
  expect_usage_error(m + "--gpus 4 --zero 2 --offload-params cpu", "needs --zero 3");
  expect_usage_error(m + "--gpus 4 --offload-params cpu", "needs --zero 3 or --fsdp");
  expect_usage_error(m + "--gpus 4 --zero 3 --offload-params nvme", "must be cpu");
  expect_usage_error(m + "--gpus 4 --fsdp full --offload-params cpu --batch 4 --micro-batch 2 --grad-accum 2", "no_sync");
  expect_usage_error(m + "--gpus 4 --fsdp full --offload-params cpu --optimizer adamw8bit", "on the host");
  expect_usage_error("plan mlp:layers=2,dim=64 --gpus 4 --gpu H100-SXM --offload-optimizer cpu", "searches the layout itself");
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
