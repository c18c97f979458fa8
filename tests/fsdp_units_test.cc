// FSDP with one FlatParameter per block (--fsdp-wrap block, schedule/fsdp_units.h): the units of
// a tiny GPT-2 and the unsharded FlatParameters one rank holds when. Every expected number is
// derived in the comment from the model's shapes; nothing is read off a run.
//
// gpt2:layers=2,hidden=64,heads=2,vocab=128,n_positions=16 (h = 64):
//   one block (GPT2Block): ln_1 2h = 128, c_attn h*3h + 3h = 12,480, attn.c_proj h*h + h = 4,160,
//     ln_2 2h = 128, c_fc h*4h + 4h = 16,640, mlp.c_proj 4h*h + h = 16,448: B = 49,984 elements;
//   root: wte vocab*h = 8,192 (lm_head is tied to it), wpe n_positions*h = 1,024, ln_f 2h = 128:
//     R = 9,344 elements.
// In bf16 (MixedPrecision(param_dtype=bf16)) an unsharded FlatParameter is 2 bytes per element,
// padded to a multiple of the data-parallel size (flat_param.py _get_shard).
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "estimate/estimate.h"
#include "frontends/zoo/registry.h"
#include "schedule/fsdp_units.h"
#include "sim/simulate.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::CliRun;
using testing::expect_usage_error;
using testing::run_cli;

const char* kTinyGpt = "gpt2:layers=2,hidden=64,heads=2,vocab=128,n_positions=16";
constexpr int64_t kBlock = 49984;
constexpr int64_t kRoot = 9344;

EstimateOptions fsdp(int64_t gpus, FsdpStrategy strategy, std::optional<FsdpWrap> wrap) {
  EstimateOptions o;
  o.model = kTinyGpt;
  o.batch = 1;
  o.seq = 16;
  o.precision = Precision::Bf16;
  o.parallel.gpus = gpus;
  o.parallel.fsdp = strategy;
  o.parallel.fsdp_wrap = wrap;
  o.keep_program = true;
  return o;
}

Estimate run(const EstimateOptions& o) {
  Result<Estimate> r = estimate(o);
  EXPECT_TRUE(r.ok()) << r.error();
  return r.ok() ? r.value() : Estimate{};
}

bool is_unit(const Buffer& b) { return b.name.find("FlatParameter (unsharded)") != std::string::npos; }

// Bytes of unsharded FlatParameters alive: at most at once, when the first forward ends, and at
// the program's peak.
struct Units {
  int64_t max_bytes = 0;
  int64_t at_forward_end = 0;
  int64_t at_peak = 0;           // at the program's peak
  int64_t at_backward_peak = 0;  // at the last iteration's backward peak
  int64_t largest_flat_grad = 0;  // the largest unsharded flat gradient made
};

Units units(const Program& p) {
  Units u;
  int64_t live = 0;
  for (const Step& st : p.steps) {
    for (int32_t i = st.first_event; i < st.end_event; ++i) {
      const Event& ev = p.events[static_cast<size_t>(i)];
      const Buffer& b = p.buffers[static_cast<size_t>(ev.buffer)];
      if (ev.kind == Event::Kind::Alloc && b.name.find("FlatParameter.grad (unsharded)") != std::string::npos) {
        u.largest_flat_grad = std::max(u.largest_flat_grad, b.bytes);
      }
      if (!is_unit(b) || ev.kind == Event::Kind::Retag) continue;
      live += ev.kind == Event::Kind::Alloc ? b.bytes : -b.bytes;
      u.max_bytes = std::max(u.max_bytes, live);
    }
    if (st.phase == Phase::Backward && st.label == "loss.backward() seed" && st.iteration == 1) u.at_forward_end = live;
  }
  const SimResult sim = simulate(p);
  auto units_at = [&](int32_t event) {
    int64_t bytes = 0;
    for (BufferId b : live_after(p, event)) {
      if (is_unit(p.buffers[static_cast<size_t>(b)])) bytes += p.buffers[static_cast<size_t>(b)].bytes;
    }
    return bytes;
  };
  u.at_peak = units_at(sim.peak.event);
  u.at_backward_peak = units_at(sim.iterations.back().by_phase.at(Phase::Backward).event);
  return u;
}

TEST(FsdpUnits, TinyGptHasTwoBlocksAndTheRoot) {
  BuildConfig cfg;
  cfg.batch = 1;
  cfg.seq = 16;
  Graph g = build_model(kTinyGpt, cfg);
  FsdpUnits u = fsdp_block_units(g);
  ASSERT_EQ(u.units.size(), 3u);
  EXPECT_EQ(u.units[0].name, "transformer.h.0");
  EXPECT_EQ(u.units[1].name, "transformer.h.1");
  EXPECT_EQ(u.root, 2);
  EXPECT_EQ(u.units[0].elements, kBlock);
  EXPECT_EQ(u.units[1].elements, kBlock);
  EXPECT_EQ(u.units[2].elements, kRoot);
  // Every op of a block runs in it; the embeddings (first op) and the LM head are the root's.
  for (OpId o = u.units[1].first; o <= u.units[1].last; ++o) EXPECT_EQ(u.op_unit[static_cast<size_t>(o)], 1);
  EXPECT_EQ(g.op(u.units[2].first).name, "transformer.wte");
  EXPECT_GT(u.units[2].last, u.units[1].last);
}

TEST(FsdpUnits, PaddingToTheWorldSize) {
  // 49,984 = 4 * 12,496: no padding at 2 or 4 ranks; at 3, ceil(49,984 / 3) = 16,662 per rank,
  // 49,986 in all.
  EXPECT_EQ(fsdp_padded_elements(kBlock, 4), kBlock);
  EXPECT_EQ(fsdp_padded_elements(kBlock, 3), 49986);
  EXPECT_EQ(fsdp_padded_elements(7, 1), 7);
}

TEST(FsdpUnits, FullShardHoldsTheRootAndTwoBlocksAtTheBackwardsPeak) {
  // FULL_SHARD, block wrap, dp 2 and 4 (both divide B and R: no padding):
  //   forward end: every block resharded after its forward; the root is not ("Do not free the
  //     root's parameters in the post-forward"): R * 2 = 18,688 bytes;
  //   at most: the root, the block whose backward runs and the next one (BACKWARD_PRE):
  //     (R + 2B) * 2 = (9,344 + 99,968) * 2 = 218,624 bytes;
  //   the unsharded flat gradient of a block: B * 2 = 99,968 bytes.
  // The backward's peak is in block 1's post-backward (block 0 prefetched, the root kept), at
  // one of two moments (S: what else is live):
  //   the split node's cat: S + block 1 + its parameters' gradients + the flat gradient
  //     = S + 3 * 99,968 = S + 299,904, with R + 2B unsharded;
  //   after _reshard freed block 1: S + flat gradient + F.pad copy (P * 2 = 99,968) + the
  //     reduce-scatter output (P / dp * 2) + its fp32 cast (P / dp * 4) = S + 199,936 + 6B / dp
  //     (the 16-bit output is freed after the cast: the peak is with both), i.e. S + 274,912 at
  //     dp 4 and S + 349,888 at dp 2, with R + B unsharded.
  // So dp 4 peaks at the cat and dp 2 after the reshard. The rank's peak is that backward moment
  // at both: Adam's step (twice the shards and moments at dp 2, nothing unsharded) stays below it
  // with PyTorch 2.x's foreach update, which keeps one fp32 list the size of the shards; 1.13's
  // second list (P / dp * 4 = 109,312 / 2 * 4 = 218,624 bytes at dp 2) put the step above it.
  for (int64_t dp : {2, 4}) {
    Estimate e = run(fsdp(dp, FsdpStrategy::Full, std::nullopt));
    ASSERT_TRUE(e.per_gpu.has_value());
    EXPECT_EQ(e.per_gpu->fsdp_wrap, "block") << "block is the default for a model with blocks";
    Units u = units(e.program);
    EXPECT_EQ(u.at_forward_end, kRoot * 2) << dp;
    EXPECT_EQ(u.max_bytes, (kRoot + 2 * kBlock) * 2) << dp;
    EXPECT_EQ(u.at_backward_peak, dp == 4 ? (kRoot + 2 * kBlock) * 2 : (kRoot + kBlock) * 2) << dp;
    EXPECT_EQ(u.at_peak, u.at_backward_peak) << dp;
    EXPECT_EQ(e.peak_phase, Phase::Backward) << dp;
    EXPECT_EQ(u.largest_flat_grad, kBlock * 2) << dp;
  }
}

TEST(FsdpUnits, ShardGradOpKeepsEveryBlockFromTheForward) {
  // SHARD_GRAD_OP never reshards after the forward: root and both blocks, (R + 2B) * 2 =
  // 218,624 bytes, are alive when the backward starts.
  Units u = units(run(fsdp(4, FsdpStrategy::GradOp, FsdpWrap::Block)).program);
  EXPECT_EQ(u.at_forward_end, (kRoot + 2 * kBlock) * 2);
  EXPECT_EQ(u.max_bytes, (kRoot + 2 * kBlock) * 2);
}

TEST(FsdpUnits, PaddedUnitsAtThreeRanks) {
  // dp 3: a block pads to 49,986 elements, the root (9,344 = 3 * 3,114 + 2) to 9,345:
  // (9,345 + 2 * 49,986) * 2 = 218,634 bytes at most.
  Units u = units(run(fsdp(3, FsdpStrategy::Full, FsdpWrap::Block)).program);
  EXPECT_EQ(u.max_bytes, (9345 + 2 * 49986) * 2);
}

TEST(FsdpUnits, FlatShardsArePerUnit) {
  // dp 3, FULL_SHARD, bf16: each unit keeps one flat fp32 shard of ceil(elements / 3) elements
  // (_get_shard: chunks[0].numel()): a block 16,662 (49,984 / 3 = 16,661.3), the root 3,115
  // (9,344 / 3 = 3,114.7), 2 x 16,662 + 3,115 = 36,439 elements. Parameter shards (fp32, 4 bytes),
  // gradient shards (fp32, 4) and Adam's two moments (8) on them (Adam's `step` counters are CPU
  // tensors), and the model's buffers, two 16 x 16 bool causal masks and two 0-dim bf16
  // masked_bias (516 bytes): 16 x 36,439 + 516 = 583,540 bytes.
  // Counted per parameter, ceil(numel / 3) each, a block would be 16,668 (its six 64-element
  // norms and biases 22 each, c_attn 4,096 + 64, attn.c_proj 1,366, c_fc 5,462 + 86, mlp.c_proj
  // 5,462) and the root 3,117 (wte 2,731, wpe 342, ln_f 22 + 22): 36,453 elements, 14 more:
  // 16 x 36,453 + 516 = 583,764 bytes.
  const Estimate e = run(fsdp(3, FsdpStrategy::Full, FsdpWrap::Block));
  ASSERT_TRUE(e.per_gpu);
  constexpr int64_t kBuffers = 2 * 16 * 16 + 2 * 2;
  EXPECT_EQ(e.per_gpu->model_states_bytes, 16 * (2 * 16662 + 3115) + kBuffers);
  EXPECT_EQ(16 * (2 * 16668 + 3117) + kBuffers - e.per_gpu->model_states_bytes, 16 * 14);
}

TEST(FsdpUnits, ParamWrapGathersLessThanBlockWrap) {
  // --fsdp-wrap param gathers one op's parameters at a time (plus the next op's): its largest
  // gathered set is below a block's. The flat shards hold the same elements (every unit's
  // elements divide by 4: a block 49,984, the root 9,344, each op's parameters too), but param
  // wrap has 15 flat parameters (per block ln_1, c_attn, attn.c_proj, ln_2, c_fc, mlp.c_proj; wte,
  // wpe and ln_f) against block wrap's 3, each with Adam's `step`, a CPU tensor: the same model
  // states. The block-wrapped rank's peak is higher by what it holds unsharded at once.
  Estimate block = run(fsdp(4, FsdpStrategy::Full, FsdpWrap::Block));
  Estimate param = run(fsdp(4, FsdpStrategy::Full, FsdpWrap::Param));
  ASSERT_TRUE(block.per_gpu && param.per_gpu);
  EXPECT_EQ(param.per_gpu->fsdp_wrap, "param");
  EXPECT_EQ(units(param.program).max_bytes, 0);  // param wrap names its buffers "(gathered)"
  EXPECT_EQ(block.per_gpu->model_states_bytes, param.per_gpu->model_states_bytes);
  EXPECT_GT(block.per_gpu->peak_bytes, param.per_gpu->peak_bytes);
}

TEST(FsdpUnitsCli, WrapOptionErrors) {
  // mlp has no repeated blocks: block is refused when asked, param is its default.
  expect_usage_error("estimate mlp:layers=2,dim=64 --gpus 2 --fsdp full --precision bf16 --fsdp-wrap block", "no repeated blocks");
  expect_usage_error(std::string("estimate ") + kTinyGpt + " --seq 16 --gpus 2 --fsdp-wrap block", "--fsdp-wrap applies to --fsdp");
  expect_usage_error(std::string("estimate ") + kTinyGpt + " --seq 16 --gpus 2 --zero 3 --fsdp-wrap param", "--fsdp-wrap applies to --fsdp");
  expect_usage_error(std::string("estimate ") + kTinyGpt + " --seq 16 --gpus 2 --fsdp full --fsdp-wrap layer", "--fsdp-wrap must be block or param");
  CliRun r = run_cli("estimate mlp:layers=2,dim=64 --gpus 2 --fsdp full --precision bf16 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["per_gpu"]["layout"]["fsdp_wrap"], "param");
}

TEST(FsdpUnitsCli, JsonNamesTheWrap) {
  CliRun r = run_cli(std::string("estimate ") + kTinyGpt + " --seq 16 --gpus 4 --fsdp full --precision bf16 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["per_gpu"]["layout"]["fsdp_wrap"], "block");
  EXPECT_NE(j["per_gpu"]["layout"]["description"].get<std::string>().find("one unit per block"), std::string::npos);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
