// plan --gpus N: the ring-collective arithmetic by hand, the catalog's links, and the layout
// search: every engine ranked or rejected, each ranked layout's per-GPU total the estimate of
// that layout, the DeepSpeed config's batch arithmetic, and one-line errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli_runner.h"
#include "estimate/estimate.h"
#include "frontends/model_source.h"
#include "layout_search_args.h"
#include "options/run_args.h"
#include "plan/layout_search.h"
#include "plan/tensor_parallel_comm.h"
#include "sim/device_catalog.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::CliRun;
using testing::expect_usage_error;
using testing::run_cli;

Interconnect one_gb_per_s() {
  Interconnect ic;
  ic.intra_node_bytes_per_s = 1e9;
  ic.inter_node_bytes_per_s = 0.5e9;
  return ic;
}

TEST(Collectives, RingVolumesByEngine) {
  // P = 1000 parameter bytes, G = 1000 gradient bytes, 4 GPUs, one micro-batch: DDP all-reduces
  // G (2 x (4-1)/4 x 1000 = 1500 bytes per GPU) at 1 GB/s x 0.8 = 1.875 us, plus one collective
  // call of 20 us.
  StepCommunication ddp = step_communication(DataParallelEngine::Ddp, 1000, 1000, 4, 1, one_gb_per_s());
  EXPECT_EQ(ddp.bytes_per_gpu, 1500);
  EXPECT_EQ(ddp.collectives, 1);
  EXPECT_DOUBLE_EQ(ddp.ms, 1500 / 0.8e9 * 1e3 + 0.02);
  // ZeRO-1: reduce-scatter G + all-gather P once: (1000 + 1000) x 3/4 = 1500.
  EXPECT_EQ(step_communication(DataParallelEngine::Zero1, 1000, 1000, 4, 4, one_gb_per_s()).bytes_per_gpu, 1500);
  // ZeRO-2 with 4 micro-batches: 4 reduce-scatters of G + one all-gather of P: 5000 x 3/4.
  EXPECT_EQ(step_communication(DataParallelEngine::Zero2, 1000, 1000, 4, 4, one_gb_per_s()).bytes_per_gpu, 3750);
  // ZeRO-3 and FSDP full: per micro-batch two gathers of P and a reduce-scatter of G:
  // 4 x 3000 x 3/4 = 9000; grad-op gathers once: 4 x 2000 x 3/4 = 6000.
  EXPECT_EQ(step_communication(DataParallelEngine::Zero3, 1000, 1000, 4, 4, one_gb_per_s()).bytes_per_gpu, 9000);
  EXPECT_EQ(step_communication(DataParallelEngine::FsdpFull, 1000, 1000, 4, 4, one_gb_per_s()).bytes_per_gpu, 9000);
  EXPECT_EQ(step_communication(DataParallelEngine::FsdpGradOp, 1000, 1000, 4, 4, one_gb_per_s()).bytes_per_gpu, 6000);
  // One GPU sends nothing; past 8 GPUs the slower network link sets the rate.
  EXPECT_EQ(step_communication(DataParallelEngine::Ddp, 1000, 1000, 1, 1, one_gb_per_s()).ms, 0.0);
  StepCommunication wide = step_communication(DataParallelEngine::Ddp, 1000, 1000, 16, 1, one_gb_per_s());
  EXPECT_DOUBLE_EQ(wide.ms, 2000.0 * 15 / 16 / 0.4e9 * 1e3 + 0.02);
}

TEST(Collectives, TensorParallelAllReducesPerLayer) {
  // A rank's graph of micro-batch 2, seq 4, hidden 8, 3 layers, bf16: each all-reduce moves
  // 2 * 4 * 8 * 2 = 128 bytes; per micro-batch 4 per layer + the embedding's and the output
  // layer's = 14; 2 micro-batches: 28 calls. Ring over T = 4: 2 * 3/4 * 128 * 28 = 5,376 bytes
  // per GPU at 1 GB/s x 0.8, plus 28 calls of 20 us.
  Graph g;
  g.dims = {{"batch", 2}, {"seq", 4}, {"hidden", 8}, {"layers", 3}};
  StepCommunication c = tensor_parallel_communication(g, 4, 2, 2, one_gb_per_s());
  EXPECT_EQ(c.bytes_per_gpu, 5376);
  EXPECT_EQ(c.collectives, 28);
  EXPECT_DOUBLE_EQ(c.ms, 5376 / 0.8e9 * 1e3 + 28 * 0.02);
  EXPECT_EQ(tensor_parallel_communication(g, 1, 2, 2, one_gb_per_s()).ms, 0.0);
  // Sequence parallelism: each all-reduce is a reduce-scatter and an all-gather of 3/4 * 128
  // bytes: the same 5,376 bytes in 56 calls (Korthikanti et al. 2022: the same bandwidth).
  StepCommunication sp = tensor_parallel_communication(g, 4, 2, 2, one_gb_per_s(), /*sequence_parallel=*/true);
  EXPECT_EQ(sp.bytes_per_gpu, 5376);
  EXPECT_EQ(sp.collectives, 56);
  EXPECT_DOUBLE_EQ(sp.ms, 5376 / 0.8e9 * 1e3 + 56 * 0.02);
}

TEST(Collectives, LinksFromTheCatalog) {
  // A100 SXM: NVLink 600 GB/s bidirectional = 300 per direction; Ampere machines get HDR
  // InfiniBand, 200 Gb/s = 25 GB/s per GPU. T4 has no NVLink: PCIe Gen3 x16, 15.75 GB/s.
  Interconnect a100 = default_interconnect(DeviceCatalog::builtin().find("A100-SXM4-40GB"), std::nullopt);
  EXPECT_DOUBLE_EQ(a100.intra_node_bytes_per_s, 300e9);
  EXPECT_DOUBLE_EQ(a100.inter_node_bytes_per_s, 25e9);
  Interconnect t4 = default_interconnect(DeviceCatalog::builtin().find("T4"), std::nullopt);
  EXPECT_DOUBLE_EQ(t4.intra_node_bytes_per_s, 15.75e9);
  Interconnect given = default_interconnect(DeviceCatalog::builtin().find("T4"), 1e11);
  EXPECT_DOUBLE_EQ(given.intra_node_bytes_per_s, 1e11);
  EXPECT_DOUBLE_EQ(given.inter_node_bytes_per_s, 1e11);
}

TEST(Collectives, Bandwidths) {
  EXPECT_DOUBLE_EQ(parse_bandwidth("--interconnect", "100GB/s"), 1e11);
  EXPECT_DOUBLE_EQ(parse_bandwidth("--interconnect", "400Gb/s"), 5e10);
  EXPECT_THROW(parse_bandwidth("--interconnect", "fast"), InputError);
  EXPECT_THROW(parse_bandwidth("--interconnect", "0GB/s"), InputError);
  EXPECT_THROW(parse_bandwidth("--interconnect", "100"), InputError);
}

LayoutPlan search(const std::string& model, const std::string& gpu, int64_t gpus, int64_t batch) {
  RunArgs a;
  a.model = model;
  a.batch = std::to_string(batch);
  a.gpu = gpu;
  a.margin = "0%";
  return testing::search_layouts_for(a, gpus);
}

TEST(LayoutSearch, EveryEngineRankedOrRejectedAndEachRankedIsItsEstimate) {
  // Six data-parallel engines; tensor-parallel 2 and 4 (gpt2's 12 heads split) with DDP and
  // ZeRO-1, 2 and 3 each; tensor-parallel 8 rejected once (4 GPUs are not a multiple of 8), and
  // tensor parallelism with FSDP once (1.13 has no 2-D FSDP); tensor-parallel 2 and 4 with
  // sequence parallelism, with DDP and ZeRO-1 each (4); pipelines of 2 stages (x TP 1, 2) and
  // 4 stages (x TP 1) of gpt2's 12 layers with ZeRO-1 (3), the TP 2 one sequence-parallel too
  // (1), and the 2-stage ones interleaved with v = 2 (6 layers per stage; v = 4 does not divide
  // them, nor does any v the 3 layers of 4 stages) (2): 26.
  LayoutPlan p = search("gpt2", "T4", 4, 16);
  EXPECT_EQ(p.ranked.size() + p.rejected.size(), 26u);
  EXPECT_TRUE(std::any_of(p.rejected.begin(), p.rejected.end(), [](const LayoutRejection& r) {
    return r.engine == "TP x FSDP" && r.why.find("1.13") != std::string::npos;
  }));
  EXPECT_EQ(p.global_batch, 64);  // --batch 16 per GPU x 4
  ASSERT_FALSE(p.ranked.empty());
  for (size_t i = 0; i < p.ranked.size(); ++i) {
    const LayoutOption& l = p.ranked[i];
    if (i > 0) {
      EXPECT_LE(p.ranked[i - 1].step_ms, l.step_ms);
    }
    EXPECT_LE(l.peak_bytes, p.budget_bytes) << l.engine;
    // A tensor- and pipeline-parallel group of T P GPUs runs the samples of one data-parallel
    // rank: 16 x T x P, in at least P micro-batches under a pipeline.
    EXPECT_EQ(l.micro_batch * l.micro_batches, 16 * l.parallel.tensor_parallel * l.parallel.pipeline_parallel) << l.engine;
    if (l.parallel.pipeline_parallel > 1) {
      EXPECT_GE(l.micro_batches, l.parallel.pipeline_parallel) << l.engine;
    }
    // One source of truth: the per-GPU total is what estimate says for that layout.
    Result<Estimate> e = estimate(layout_options(p, l));
    ASSERT_TRUE(e.ok()) << e.error();
    EXPECT_EQ(e.value().device->device_total_bytes, l.peak_bytes) << l.engine;
    EXPECT_DOUBLE_EQ(l.step_ms, l.compute_ms + l.exposed_comm_ms + l.tensor_comm.ms + l.offload_ms + l.pipeline.bubble_ms + l.pipeline.p2p_ms)
        << l.engine;
    EXPECT_EQ(l.tensor_comm.bytes_per_gpu > 0, l.parallel.tensor_parallel > 1) << l.engine;
    EXPECT_EQ(l.pipeline.p2p_bytes > 0, l.parallel.pipeline_parallel > 1) << l.engine;
  }
}

TEST(LayoutSearch, PicksTheLargestMicroBatchThatFits) {
  // gpt2 with Adam at 64 sequences per GPU does not fit a T4 whole: accumulation makes it up.
  LayoutPlan p = search("gpt2", "T4", 2, 64);
  ASSERT_FALSE(p.ranked.empty());
  for (const LayoutOption& l : p.ranked) {
    // A checkpointed layout may run a larger micro-batch than the plain fit (layout_checkpoint_test.cc).
    if (l.checkpointed) continue;
    EXPECT_GT(l.micro_batches, 1) << l.engine;
    const int64_t rank = 64 * l.parallel.tensor_parallel * l.parallel.pipeline_parallel;
    EXPECT_EQ(l.micro_batch * l.micro_batches, rank) << l.engine;
    // A pipeline tries only micro-batches leaving at least P of them in a step.
    if (l.micro_batch < rank && l.micro_batches / 2 >= l.parallel.pipeline_parallel) {
      // Twice the micro-batch does not fit with the same engine.
      LayoutOption bigger = l;
      bigger.micro_batch *= 2;
      bigger.micro_batches /= 2;
      Result<Estimate> e = estimate(layout_options(p, bigger));
      ASSERT_TRUE(e.ok()) << e.error();
      EXPECT_GT(e.value().device->device_total_bytes, p.budget_bytes) << l.engine;
    }
  }
}

// A pipeline family whose largest micro-batch fits with every block checkpointed has a fit: it is
// not probed at its smallest micro-batch (the costliest candidate, the most micro-batches a step),
// and its answer is the one the probe would have led to. gpt2 on 2 x T4 at 64 sequences per GPU:
// PP 2 (v 2) x ZeRO-1 runs 128 sequences per pipeline in micro-batches of 64 down to 1; it
// simulates 64 plain (over 15 GiB), 64 checkpointed (fits) and 32 plain (fits, and faster),
// where it used to simulate micro-batch 1 first as well (43 simulations in all then, 42 now).
TEST(LayoutSearch, APipelineThatFitsCheckpointedAtItsLargestMicroBatchIsNotProbed) {
  LayoutPlan p = search("gpt2", "T4", 2, 64);
  EXPECT_EQ(p.evaluations, 42);
  auto ranked = [&](const std::string& engine) {
    auto it = std::find_if(p.ranked.begin(), p.ranked.end(), [&](const LayoutOption& l) { return l.engine == engine; });
    EXPECT_NE(it, p.ranked.end()) << engine;
    return it == p.ranked.end() ? LayoutOption{} : *it;
  };
  const LayoutOption interleaved = ranked("PP 2 (v 2) x ZeRO-1");
  EXPECT_EQ(interleaved.micro_batch, 32);
  EXPECT_EQ(interleaved.micro_batches, 4);
  EXPECT_FALSE(interleaved.checkpointed);
  // Its larger micro-batch fits checkpointed only: the estimate of each says so.
  for (bool checkpointed : {false, true}) {
    LayoutOption larger = interleaved;
    larger.micro_batch = 64;
    larger.micro_batches = 2;
    larger.checkpointed = checkpointed;
    larger.recompute = checkpointed ? Recompute::Full : Recompute::None;
    Result<Estimate> e = estimate(layout_options(p, larger));
    ASSERT_TRUE(e.ok()) << e.error();
    EXPECT_EQ(e.value().device->device_total_bytes <= p.budget_bytes, checkpointed);
  }
}

TEST(LayoutSearchCli, RankedTableAndDeepSpeedConfig) {
  const std::string file = ::testing::TempDir() + "headroom_layout_ds.json";
  CliRun r = run_cli("plan gpt2 --gpus 4 --gpu T4 --batch 16 --emit-deepspeed " + file);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("headroom plan: gpt2 on 4 x T4, global batch 64 (16 per GPU)"), std::string::npos) << r.out;
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json ds = nlohmann::json::parse(ss.str());
  // DeepSpeed's start-up check: train_batch_size = micro x accumulation x data-parallel size,
  // the data-parallel size 4 / T for the layout's tensor-parallel T (1, 2 or 4).
  const int64_t per_rank = ds["train_micro_batch_size_per_gpu"].get<int64_t>() * ds["gradient_accumulation_steps"].get<int64_t>();
  EXPECT_EQ(ds["train_batch_size"].get<int64_t>(), 64);
  ASSERT_EQ(64 % per_rank, 0);
  EXPECT_EQ(4 % (64 / per_rank), 0) << per_rank;
  std::remove(file.c_str());
  CliRun j = run_cli("plan gpt2 --gpus 4 --gpu T4 --batch 16 --json");
  ASSERT_EQ(j.code, 0) << j.err;
  nlohmann::json plan = nlohmann::json::parse(j.out);
  // The 26 lines of EveryEngineRankedOrRejectedAndEachRankedIsItsEstimate.
  EXPECT_EQ(plan["ranked"].size() + plan["rejected"].size(), 26u);
}

TEST(LayoutSearch, TensorParallelLayoutsOfASeventyBillionModel) {
  // Llama-3.1-70B: 64 heads, 8 key/value heads; T = 2, 4, 8 all split whole query groups, so
  // on 16 GPUs every tensor-parallel family is ranked or does not fit at micro-batch 1 (none is
  // refused for its split), and 16 Adam bytes per parameter (1.13 TB) do not fit 16 x 40 GB
  // = 640 GB whatever the layout, pipelines included: the largest split still holds 70.6e9 / 8
  // parameters per rank. As no plain family fits, the three offload families are tried too:
  // 6 + 3 x 4 tensor-parallel families (DDP, ZeRO-1, 2, 3) + 10 pipelines (P = 2, 4, 8, 16 divide
  // the 80 layers; with T x P <= 16: 4 + 3 + 2 + 1 shapes with ZeRO-1) + 3 + the one line refusing
  // FSDP with tensor parallelism: 32; and sequence parallelism: 3 x 2 tensor-parallel families
  // (DDP, ZeRO-1) and the 3 + 2 + 1 pipeline shapes with T > 1 (12); the interleaved schedule
  // with v = 2 and 4 on the 40 and 20 layers of 2 and 4 stages, v = 2 on the 10 of 8 stages:
  // 4 x 2 + 3 x 2 + 2 x 1 (16): 60.
  const std::string model = std::string(HEADROOM_SOURCE_DIR) + "/data/hf-configs/llama-3.1-70b.json";
  LayoutPlan p = search(model, "A100-SXM4-40GB", 16, 1);
  EXPECT_EQ(p.ranked.size() + p.rejected.size(), 60u);
  for (const LayoutRejection& r : p.rejected) {
    if (r.engine == "TP x FSDP") continue;
    EXPECT_NE(r.why.find("over the"), std::string::npos) << r.engine << ": " << r.why;
  }
}

TEST(LayoutSearchCli, SeventyBillionOnEightH100sNamesTheTensorParallelRejection) {
  const std::string model = std::string(HEADROOM_SOURCE_DIR) + "/data/hf-configs/llama-3.1-70b.json";
  CliRun h100 = run_cli("plan " + model + " --gpus 8 --gpu H100-SXM");
  ASSERT_EQ(h100.code, 0) << h100.err;
  // Rejected at its first candidate (plan/layout_fit.h): the rank's bf16 parameters, fp32
  // partition and Adam moments at d = 1, 14 bytes for each of about 70.6e9 / 8 parameters, 115 GiB.
  EXPECT_NE(h100.out.find("does not fit: TP 8 x ZeRO-1: 115 GiB per GPU of parameters, gradients and optimizer states kept between steps (at any "
                          "micro-batch), over the 79.6 GiB budget"),
            std::string::npos)
      << h100.out;
}

TEST(LayoutSearchCli, BadRequestsAreOneLine) {
  expect_usage_error("plan gpt2 --gpus 4", "plan --gpus N needs --gpu NAME");
  expect_usage_error("plan gpt2 --gpus 4 --zero 3 --gpu T4", "searches the layout itself");
  expect_usage_error("plan gpt2 --gpus 4 --gpu T4 --interconnect fast", "--interconnect fast is not a bandwidth");
  expect_usage_error("plan gpt2 --gpus 4 --gpu T4 --global-batch 6", "--global-batch 6 is not a multiple of --gpus 4");
  expect_usage_error("plan gpt2 --gpu T4 --global-batch 8", "apply to plan --gpus N");
  expect_usage_error("plan gpt2 --gpus 4 --gpu T4 --strategy checkpoint", "plan --gpus N takes");
  expect_usage_error("plan gpt2 --gpus 4 --gpu T4 --mode infer", "training layouts");
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
