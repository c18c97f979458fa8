// The program of a resident set (pack/set_program.h): a set of one is its model's program, pooled
// weights are allocated once, the process's cuBLAS handle workspace once, and each request's
// buffers are freed before the next. Every byte count is from the trio of pack_onnx_models.h
// (weights a = c = 696 B, b = 716 B) or from the programs themselves.
#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "estimate/device_memory.h"
#include "estimate/estimate.h"
#include "pack/pack.h"
#include "pack/set_program.h"
#include "pack/sharing.h"
#include "pack_onnx_models.h"
#include "schedule/build_program.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

Program inference_program(const Graph& g, const GpuOptions& go) {
  EstimateOptions eo;
  eo.mode = RunMode::Inference;
  eo.gpu = go;
  return build_program(g, schedule_options(eo));
}

// Buffers allocated and never freed, by category.
std::vector<BufferId> held_at_end(const Program& p) {
  std::vector<int> state(p.buffers.size(), 0);
  for (const Event& e : p.events) {
    if (e.kind == Event::Kind::Alloc) state[static_cast<size_t>(e.buffer)] = 1;
    if (e.kind == Event::Kind::Free) state[static_cast<size_t>(e.buffer)] = 0;
  }
  std::vector<BufferId> held;
  for (size_t b = 0; b < state.size(); ++b)
    if (state[b]) held.push_back(static_cast<BufferId>(b));
  return held;
}

// Bytes of the buffers of category c held at the end (never freed).
int64_t held_bytes(const Program& p, Category c) {
  int64_t sum = 0;
  for (BufferId b : held_at_end(p))
    if (p.buffers[static_cast<size_t>(b)].category == c) sum += p.buffers[static_cast<size_t>(b)].bytes;
  return sum;
}

int64_t allocated_bytes(const Program& p, Category c) {
  int64_t sum = 0;
  for (const Event& e : p.events)
    if (e.kind == Event::Kind::Alloc && p.buffers[static_cast<size_t>(e.buffer)].category == c)
      sum += p.buffers[static_cast<size_t>(e.buffer)].bytes;
  return sum;
}

TEST(SetProgram, OneMemberReplaysAsItsModelsProgram) {
  // A set of one is the model's program plus the end of its request (its input and output freed
  // after the last step): the same peaks on the caching allocator, so pack's one-model total is
  // estimate's device total.
  const LoadedModel lm = load_builtin_model("mlp:layers=3,dim=300", 2);
  GpuOptions go;
  go.gpu = "T4";
  const Program p = inference_program(lm.graph, go);
  const Program q = resident_set_program({{&p, "mlp", {}}});
  const DeviceMemory dp = device_memory(p, go), dq = device_memory(q, go);
  EXPECT_EQ(dq.reserved_peak_bytes, dp.reserved_peak_bytes);
  EXPECT_EQ(dq.allocated_peak_bytes, dp.allocated_peak_bytes);
  ASSERT_GT(q.events.size(), p.events.size());
  // At the end only the weights and the cuBLAS handle's workspace are held.
  for (BufferId b : held_at_end(q)) {
    const Category c = q.buffers[static_cast<size_t>(b)].category;
    EXPECT_TRUE(c == Category::Weights || c == Category::Workspaces) << q.buffers[static_cast<size_t>(b)].name;
  }
  EXPECT_EQ(allocated_bytes(q, Category::Weights), lm.graph.weights_bytes());
}

TEST(SetProgram, TrioAllocatesEachPoolOnceAndOneHandleWorkspace) {
  testing::Trio t = testing::write_trio("set_program_trio");
  std::vector<LoadedModel> models;
  for (const std::string& f : {t.a, t.b, t.c}) models.push_back(testing::load_onnx(f, 1));
  std::vector<ModelLayers> layers;
  std::vector<const WeightData*> values;
  for (const LoadedModel& m : models) {
    layers.push_back(extract_layers(m.graph));
    values.push_back(m.weights ? &*m.weights : nullptr);
  }
  const MergePlan plan = plan_merges(layers);
  const IdenticalPlan identical = find_identical_layers(layers, values);
  GpuOptions go;
  go.gpu_memory = int64_t{1} << 30;
  std::vector<Program> programs;
  for (const LoadedModel& m : models) programs.push_back(inference_program(m.graph, go));
  // Each model's program holds its cuBLAS handle's workspaces to the end (its fc), 8,519,680 B on
  // a pre-Hopper GPU, + 1,048,576 B of cuBLASLt workspace (the fc's Gemm has a 1-D bias, so
  // PyTorch 2.x runs it through cublasLt) = 9,568,256 (its per-op workspaces are freed after
  // their ops).
  for (const Program& p : programs) EXPECT_EQ(held_bytes(p, Category::Workspaces), 8'519'680 + 1'048'576);

  const std::vector<std::vector<int32_t>> subsets = {{0}, {1}, {0, 1}, {0, 2}, {2, 0}, {0, 1, 2}, {1, 2, 0}};
  for (Sharing sh : kSharingChoices) {
    for (const std::vector<int32_t>& subset : subsets) {
      SCOPED_TRACE(std::string(sharing_label(sh)) + " " + std::to_string(subset.size()) + " models from " +
                   std::to_string(subset.front()));
      const std::vector<SharedPool> pools = shared_pools(layers, plan, identical, sh, subset);
      const std::vector<std::set<std::string>> borrowed = borrowed_weights(layers, pools, subset);
      std::vector<SetMember> set;
      for (size_t k = 0; k < subset.size(); ++k)
        set.push_back({&programs[static_cast<size_t>(subset[k])], layers[static_cast<size_t>(subset[k])].model, borrowed[k]});
      const Program q = resident_set_program(set);
      // The weights the set allocates are the sharing rule's exact bytes (all three: 2108 B
      // unshared, 788 B free, 724 B free + merges; pack_residency_test.cc derives each).
      EXPECT_EQ(allocated_bytes(q, Category::Weights), weights_with_sharing(layers, plan, identical, sh, subset));
      // One process, one cuBLAS handle: its workspaces once, however many models use it.
      EXPECT_EQ(held_bytes(q, Category::Workspaces), 8'519'680 + 1'048'576);
      // Each request's buffers are freed before the next: only weights and that workspace stay.
      for (BufferId b : held_at_end(q)) {
        const Category c = q.buffers[static_cast<size_t>(b)].category;
        EXPECT_TRUE(c == Category::Weights || c == Category::Workspaces) << q.buffers[static_cast<size_t>(b)].name;
      }
      // Replayed: the cuBLAS workspace's 20 MiB large-pool segment and one 2 MiB small-pool
      // segment for everything else, the 1 MiB Lt workspace included (a small-pool request:
      // pack_residency_test.cc, TrioThreeWaysByHand).
      EXPECT_EQ(device_memory(q, go).reserved_peak_bytes, 22LL << 20);
    }
  }
  EXPECT_EQ(weights_with_sharing(layers, plan, identical, Sharing::Merged, {0, 1, 2}), 724);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
