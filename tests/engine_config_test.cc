// --emit deepspeed|fsdp|accelerate FILE: each emitted config is parsed (JSON with nlohmann, the
// Python snippet with /usr/bin/python3's compile() and its torch names looked up in torch 1.13's
// source, tests/check_snippet_imports.py; the YAML line by line) and its batch arithmetic checked: global batch = micro x accumulation x dp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

using testing::CliRun;
using testing::run_cli;

std::string temp(const std::string& name) {
  const std::string path = ::testing::TempDir() + "/headroom_emit_" + name;
  std::remove(path.c_str());
  return path;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream s(text);
  for (std::string l; std::getline(s, l);) out.push_back(l);
  return out;
}

bool has_line(const std::vector<std::string>& ls, const std::string& line) { return std::find(ls.begin(), ls.end(), line) != ls.end(); }

bool python_with_torch() { return std::ifstream("/usr/bin/python3").good(); }

TEST(EmitFsdp, SnippetCompilesAndCarriesTheBatchArithmetic) {
  // gpt2 on 16 GPUs, FSDP FULL_SHARD, micro-batch 2 x 4 accumulation steps: 2 * 4 * 16 = 128
  // samples per optimizer step.
  const std::string py = temp("fsdp.py"), yaml = temp("accelerate.yaml");
  CliRun r = run_cli("estimate gpt2 --precision bf16 --gpus 16 --fsdp full --micro-batch 2 --grad-accum 4 --emit fsdp " + py +
                     " --emit accelerate " + yaml);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string code = slurp(py);
  std::vector<std::string> ls = lines(code);
  EXPECT_TRUE(has_line(ls, "MICRO_BATCH_SIZE = 2"));
  EXPECT_TRUE(has_line(ls, "GRADIENT_ACCUMULATION_STEPS = 4"));
  EXPECT_TRUE(has_line(ls, "WORLD_SIZE = 16"));
  EXPECT_TRUE(has_line(ls, "# 2 x 4 x 16 = 128 samples per optimizer step."));
  EXPECT_TRUE(has_line(ls, "BLOCK_CLASS_NAME = \"GPT2Block\""));
  EXPECT_TRUE(has_line(ls, "        sharding_strategy=ShardingStrategy.FULL_SHARD,"));
  EXPECT_TRUE(has_line(ls, "        cpu_offload=CPUOffload(offload_params=False),"));
  EXPECT_TRUE(has_line(ls, "        mixed_precision=MixedPrecision(param_dtype=torch.bfloat16),"));
  EXPECT_EQ(code.find("apply_activation_checkpointing"), std::string::npos);  // no checkpoints simulated
  if (!python_with_torch()) GTEST_SKIP() << "/usr/bin/python3 missing";
  // compile() parses it, every name it imports from torch is defined in torch 1.13's source, and
  // its constants evaluate to the batch arithmetic (tests/check_snippet_imports.py).
  const std::string check = "/usr/bin/python3 " + std::string(HEADROOM_SOURCE_DIR) + "/tests/check_snippet_imports.py " + py +
                            " GLOBAL_BATCH_SIZE=128 MICRO_BATCH_SIZE=2 GRADIENT_ACCUMULATION_STEPS=4 WORLD_SIZE=16";
  EXPECT_EQ(std::system(check.c_str()), 0) << code;

  // The accelerate YAML of the same layout: 16 processes on 2 machines of 8.
  std::vector<std::string> y = lines(slurp(yaml));
  EXPECT_TRUE(has_line(y, "distributed_type: FSDP"));
  EXPECT_TRUE(has_line(y, "num_processes: 16"));
  EXPECT_TRUE(has_line(y, "num_machines: 2"));
  EXPECT_TRUE(has_line(y, "mixed_precision: bf16"));
  EXPECT_TRUE(has_line(y, "  fsdp_sharding_strategy: 1"));
  EXPECT_TRUE(has_line(y, "  fsdp_offload_params: false"));
  EXPECT_TRUE(has_line(y, "  fsdp_transformer_layer_cls_to_wrap: GPT2Block"));
  EXPECT_TRUE(has_line(y, "# Accumulation: Accelerator(gradient_accumulation_steps=4) in the training script."));
  // Every non-comment line is `key: value` or an indented one under fsdp_config.
  for (const std::string& l : y) {
    if (l.empty() || l[0] == '#') continue;
    if (l.back() == ':') {
      EXPECT_EQ(l, "fsdp_config:");  // the one section
    } else {
      EXPECT_NE(l.find(": "), std::string::npos) << l;
    }
  }
}

TEST(EmitFsdp, CheckpointedOffloadedLayoutWrapsBlocksAndOffloads) {
  const std::string py = temp("fsdp_ckpt.py");
  CliRun r = run_cli("estimate llama:layers=2,hidden=256,heads=4,ffn=512,vocab=1000 --seq 64 --precision bf16 --gpus 4 --fsdp grad-op "
                     "--offload-params cpu --checkpoint blocks --emit fsdp " + py);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string code = slurp(py);
  std::vector<std::string> ls = lines(code);
  EXPECT_TRUE(has_line(ls, "        sharding_strategy=ShardingStrategy.SHARD_GRAD_OP,"));
  EXPECT_TRUE(has_line(ls, "        cpu_offload=CPUOffload(offload_params=True),"));
  EXPECT_TRUE(has_line(ls, "    apply_activation_checkpointing("));
  EXPECT_TRUE(has_line(ls, "BLOCK_CLASS_NAME = \"LlamaDecoderLayer\""));
  if (!python_with_torch()) GTEST_SKIP() << "/usr/bin/python3 missing";
  const std::string check = "/usr/bin/python3 " + std::string(HEADROOM_SOURCE_DIR) + "/tests/check_snippet_imports.py " + py;
  EXPECT_EQ(std::system(check.c_str()), 0) << code;
}

TEST(EmitFsdp, ParamWrapEmitsASizeBasedPolicy) {
  // --fsdp-wrap param simulates one unit per op's parameters: the snippet wraps every module
  // holding parameters (size_based_auto_wrap_policy, min_num_params=1) and names no block class;
  // the accelerate YAML says SIZE_BASED_WRAP. mlp has no blocks: param is its default.
  const std::string py = temp("fsdp_param.py"), yaml = temp("accelerate_param.yaml");
  CliRun r = run_cli("estimate gpt2:layers=2 --seq 32 --precision bf16 --gpus 4 --fsdp full --fsdp-wrap param --emit fsdp " + py +
                     " --emit accelerate " + yaml);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string code = slurp(py);
  std::vector<std::string> ls = lines(code);
  EXPECT_TRUE(has_line(ls, "        auto_wrap_policy=functools.partial(size_based_auto_wrap_policy, min_num_params=1),"));
  EXPECT_EQ(code.find("BLOCK_CLASS_NAME"), std::string::npos);
  std::vector<std::string> y = lines(slurp(yaml));
  EXPECT_TRUE(has_line(y, "  fsdp_auto_wrap_policy: SIZE_BASED_WRAP"));
  EXPECT_TRUE(has_line(y, "  fsdp_min_num_params: 1"));
  CliRun mlp = run_cli("estimate mlp:layers=2,dim=64 --precision bf16 --gpus 4 --fsdp full --emit fsdp " + py);
  ASSERT_EQ(mlp.code, 0) << mlp.err;
  EXPECT_TRUE(has_line(lines(slurp(py)), "        auto_wrap_policy=functools.partial(size_based_auto_wrap_policy, min_num_params=1),"));
  if (!python_with_torch()) GTEST_SKIP() << "/usr/bin/python3 missing";
  const std::string check = "/usr/bin/python3 " + std::string(HEADROOM_SOURCE_DIR) + "/tests/check_snippet_imports.py " + py;
  EXPECT_EQ(std::system(check.c_str()), 0) << code;
}

TEST(EmitDeepSpeed, EmitAndTheAliasWriteTheSameConfigWithOffload) {
  // 8 GPUs, ZeRO-3, optimizer on NVMe and parameters on the CPU; micro-batch 1 x 2: 1 * 2 * 8 = 16.
  const std::string a = temp("ds_a.json"), b = temp("ds_b.json"), yaml = temp("ds_accelerate.yaml");
  const std::string layout = "estimate gpt2 --precision bf16 --gpus 8 --zero 3 --offload-optimizer nvme --offload-params cpu "
                             "--micro-batch 1 --grad-accum 2 --reduce-bucket-size 1000 ";
  CliRun r = run_cli(layout + "--emit deepspeed " + a + " --emit accelerate " + yaml);
  ASSERT_EQ(r.code, 0) << r.err;
  CliRun alias = run_cli(layout + "--emit-deepspeed " + b);
  ASSERT_EQ(alias.code, 0) << alias.err;
  EXPECT_EQ(slurp(a), slurp(b));
  nlohmann::json j = nlohmann::json::parse(slurp(a));
  EXPECT_EQ(j["train_batch_size"], 16);
  EXPECT_EQ(j["train_batch_size"].get<int64_t>(),
            j["train_micro_batch_size_per_gpu"].get<int64_t>() * j["gradient_accumulation_steps"].get<int64_t>() * 8);
  EXPECT_EQ(j["zero_optimization"]["stage"], 3);
  EXPECT_EQ(j["zero_optimization"]["offload_optimizer"]["device"], "nvme");
  EXPECT_EQ(j["zero_optimization"]["offload_optimizer"]["buffer_count"], 4);
  EXPECT_EQ(j["zero_optimization"]["offload_param"]["device"], "cpu");
  std::vector<std::string> y = lines(slurp(yaml));
  EXPECT_TRUE(has_line(y, "distributed_type: DEEPSPEED"));
  EXPECT_TRUE(has_line(y, "  zero_stage: 3"));
  EXPECT_TRUE(has_line(y, "  gradient_accumulation_steps: 2"));
  EXPECT_TRUE(has_line(y, "  offload_optimizer_device: nvme"));
  EXPECT_TRUE(has_line(y, "  offload_param_device: cpu"));
  EXPECT_TRUE(has_line(y, "num_processes: 8"));
  EXPECT_TRUE(has_line(y, "num_machines: 1"));
}

TEST(EmitAccelerate, DdpIsMultiGpu) {
  const std::string yaml = temp("ddp.yaml");
  CliRun r = run_cli("estimate mlp:layers=2,dim=64 --gpus 4 --batch 8 --micro-batch 4 --grad-accum 2 --emit accelerate " + yaml);
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> y = lines(slurp(yaml));
  EXPECT_TRUE(has_line(y, "distributed_type: MULTI_GPU"));
  EXPECT_TRUE(has_line(y, "mixed_precision: 'no'"));
  EXPECT_TRUE(has_line(y, "# Batch: micro-batch 4 per GPU x 2 accumulation steps x 4 data-parallel ranks = 32 samples per step."));
}

TEST(EmitErrors, AKindTheLayoutCannotExpressWritesNothing) {
  const std::string a = temp("never_a.json"), b = temp("never_b.py");
  // A ZeRO layout has no FSDP snippet: the DeepSpeed config is not written either.
  CliRun r = run_cli("estimate gpt2 --precision bf16 --gpus 4 --zero 2 --emit deepspeed " + a + " --emit fsdp " + b);
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.out.empty());
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("--emit fsdp needs an FSDP layout"), std::string::npos) << r.err;
  EXPECT_FALSE(std::ifstream(a).good());
  EXPECT_FALSE(std::ifstream(b).good());
  for (const std::string& args : {std::string("--gpus 4 --zero 2 --emit yaml ") + a, "--gpus 4 --zero 2 --emit deepspeed " + a + " --emit deepspeed " + b,
                                  "--gpus 4 --zero 2 --emit-deepspeed " + a + " --emit deepspeed " + b, "--emit accelerate " + a,
                                  "--gpus 12 --zero 1 --emit accelerate " + a}) {
    CliRun bad = run_cli("estimate gpt2 --precision bf16 " + args);
    EXPECT_EQ(bad.code, 2) << args;
    EXPECT_TRUE(bad.out.empty()) << args;
    EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << args << ": " << bad.err;
    EXPECT_FALSE(std::ifstream(a).good()) << args;
  }
}

TEST(EmitPlan, PlanEmitsEachEnginesFastestLayout) {
  // plan --gpus 8: deepspeed takes the fastest ZeRO layout, fsdp the fastest FSDP one, accelerate
  // the fastest without tensor or pipeline parallelism; each carries the plan's global batch 64 = micro x accum x 8.
  const std::string ds = temp("plan.json"), py = temp("plan.py"), yaml = temp("plan.yaml");
  CliRun r = run_cli("plan gpt2 --seq 256 --precision bf16 --gpus 8 --gpu A100-SXM4-40GB --global-batch 64 --emit deepspeed " + ds +
                     " --emit fsdp " + py + " --emit accelerate " + yaml + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(slurp(ds));
  EXPECT_EQ(j["train_batch_size"], 64);
  std::vector<std::string> ls = lines(slurp(py));
  EXPECT_TRUE(has_line(ls, "GLOBAL_BATCH_SIZE = MICRO_BATCH_SIZE * GRADIENT_ACCUMULATION_STEPS * WORLD_SIZE"));
  EXPECT_TRUE(has_line(ls, "WORLD_SIZE = 8"));
  std::vector<std::string> y = lines(slurp(yaml));
  EXPECT_TRUE(has_line(y, "num_processes: 8"));
  nlohmann::json plan = nlohmann::json::parse(r.out);
  // accelerate runs no tensor or pipeline parallelism: the fastest layout without them.
  std::string first;
  for (const auto& l : plan["ranked"]) {
    const std::string name = l["layout"];
    if (name.rfind("TP", 0) != 0 && name.rfind("PP", 0) != 0) {
      first = name;
      break;
    }
  }
  const char* type = first.rfind("ZeRO", 0) == 0 ? "distributed_type: DEEPSPEED" : first.rfind("FSDP", 0) == 0 ? "distributed_type: FSDP" : "distributed_type: MULTI_GPU";
  EXPECT_TRUE(has_line(y, type)) << first;
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
