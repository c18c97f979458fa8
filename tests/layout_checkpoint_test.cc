// Activation checkpointing per transformer block, in estimate (--checkpoint blocks) and inside the
// layout search (plan --gpus), and the offload families the search falls back to.
#include <gtest/gtest.h>

#include <string>

#include "cli_runner.h"
#include "estimate/estimate.h"
#include "frontends/zoo/registry.h"
#include "options/run_args.h"
#include "plan/layout_search.h"
#include "plan/offload_traffic.h"
#include "schedule/transformer_blocks.h"

namespace headroom {
namespace {

using testing::CliRun;
using testing::run_cli;

Graph build(const std::string& model, int64_t seq = 64) {
  BuildConfig c;
  c.batch = 1;
  c.seq = seq;
  return build_model(model, c);
}

TEST(TransformerBlocks, OneSegmentPerDecoderLayer) {
  Graph gpt2 = build("gpt2:layers=3");
  TransformerBlocks b = transformer_blocks(gpt2);
  EXPECT_EQ(b.container, "transformer.h");
  ASSERT_EQ(b.segments.size(), 3u);
  for (size_t i = 0; i < b.segments.size(); ++i) {
    const std::string prefix = "transformer.h." + std::to_string(i) + ".";
    EXPECT_EQ(gpt2.op(b.segments[i].first).name.rfind(prefix, 0), 0u) << gpt2.op(b.segments[i].first).name;
    EXPECT_EQ(gpt2.op(b.segments[i].last).name.rfind(prefix, 0), 0u) << gpt2.op(b.segments[i].last).name;
    // The ops right outside the block belong to no other block index.
    if (i + 1 < b.segments.size()) EXPECT_LT(b.segments[i].last, b.segments[i + 1].first);
  }
  EXPECT_EQ(gpt2.block_class, "GPT2Block");
  Graph llama = build("llama:layers=2,hidden=256,heads=4,ffn=512,vocab=1000");
  TransformerBlocks l = transformer_blocks(llama);
  EXPECT_EQ(l.container, "model.layers");
  EXPECT_EQ(l.segments.size(), 2u);
  EXPECT_EQ(llama.block_class, "LlamaDecoderLayer");
}

TEST(TransformerBlocks, CheckpointBlocksIsEverySegment) {
  // estimate --checkpoint blocks is the memory plan of one segment per block: the same program
  // as those segments given by hand, with a lower peak than no checkpointing.
  EstimateOptions o;
  o.model = "gpt2:layers=4";
  o.batch = 4;
  o.seq = 256;
  Result<Estimate> plain = estimate(o);
  o.checkpoint_ranges = {"blocks"};
  Result<Estimate> blocks = estimate(o);
  o.checkpoint_ranges.clear();
  o.plan.checkpoints = transformer_blocks(build("gpt2:layers=4", 256)).segments;
  Result<Estimate> by_hand = estimate(o);
  ASSERT_TRUE(plain.ok() && blocks.ok() && by_hand.ok()) << plain.error() << blocks.error() << by_hand.error();
  EXPECT_EQ(blocks.value().peak_bytes, by_hand.value().peak_bytes);
  EXPECT_LT(blocks.value().peak_bytes, plain.value().peak_bytes);
  CliRun r = run_cli("estimate resnet18 --checkpoint blocks");
  if (r.code != 0) EXPECT_NE(r.err.find("--checkpoint blocks"), std::string::npos) << r.err;
  CliRun none = run_cli("estimate mlp:layers=1,dim=8 --checkpoint blocks");
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("no repeated blocks"), std::string::npos) << none.err;
}

TEST(OffloadTraffic, BytesPerStepByFamily) {
  // 1,000 parameters over 4 ranks: 250 per partition.
  //   ZeRO-2 + optimizer offload: fp32 gradients down, fp32 partition up: 8 * 250 = 2,000.
  //   ZeRO-3 + both, bf16, 3 micro-batches: (2 + 2 + 2) * 250 * 3 = 4,500.
  //   ZeRO-3 + optimizer only, bf16, 3 micro-batches: 2 * 250 * 3 + 2 * 250 = 2,000.
  //   FSDP CPUOffload: fp32 shard up twice, fp32 gradient down: 12 * 250 = 3,000.
  EXPECT_EQ(offload_bytes_per_step(DataParallelEngine::Zero2, true, false, 1000, 4, 3, 2), 2000);
  EXPECT_EQ(offload_bytes_per_step(DataParallelEngine::Zero3, true, true, 1000, 4, 3, 2), 4500);
  EXPECT_EQ(offload_bytes_per_step(DataParallelEngine::Zero3, true, false, 1000, 4, 3, 2), 2000);
  EXPECT_EQ(offload_bytes_per_step(DataParallelEngine::FsdpFull, false, true, 1000, 4, 1, 2), 3000);
  EXPECT_EQ(offload_bytes_per_step(DataParallelEngine::Zero2, false, false, 1000, 4, 1, 2), 0);
}

LayoutPlan search(const std::string& model, const std::string& gpu_memory, int64_t gpus, int64_t batch, const std::string& seq) {
  RunArgs a;
  a.model = model;
  a.batch = std::to_string(batch);
  a.seq = seq;
  a.gpu = "A100-SXM4-40GB";
  a.gpu_memory = gpu_memory;
  a.margin = "0%";
  a.precision = "bf16";
  Result<EstimateOptions> o = to_estimate_options(a, RunCommand::Plan);
  EXPECT_TRUE(o.ok()) << o.error();
  LayoutRequest r;
  r.run = o.value();
  r.gpus = gpus;
  Result<LayoutPlan> p = search_layouts(r);
  EXPECT_TRUE(p.ok()) << p.error();
  return p.value();
}

// Every ranked layout, checkpointed or offloaded, is what estimate says for that layout.
void expect_each_is_its_estimate(const LayoutPlan& p) {
  for (const LayoutOption& l : p.ranked) {
    Result<Estimate> e = estimate(layout_options(p, l));
    ASSERT_TRUE(e.ok()) << e.error();
    EXPECT_EQ(e.value().device->device_total_bytes, l.peak_bytes) << l.engine;
    EXPECT_LE(l.peak_bytes, p.budget_bytes) << l.engine;
    EXPECT_DOUBLE_EQ(l.step_ms, l.compute_ms + l.exposed_comm_ms + l.offload_ms) << l.engine;
    EXPECT_EQ(l.checkpointed, !l.plan.checkpoints.empty()) << l.engine;
  }
}

}  // namespace
}  // namespace headroom
