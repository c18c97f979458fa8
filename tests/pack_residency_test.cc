// headroom pack: residency and the swap simulation with free sharing (src/pack/sharing.h). The
// trio of tests/pack_onnx_models.h carries its weights, so its bit-identical layers are known; every
// byte count below is derived by hand in the comments.
//
// The trio's layers (fp32): conv1 448 B (2 tensors), bn1 and bn2 64 B (4 tensors each), conv2 64 B
// (1 tensor), fc 40 B in a and c, 60 B in b (2 tensors); plus 2 x 8 B of num_batches_tracked (2
// tensors, outside layers, never shared). Weights: a = c = 696 B, b = 716 B, 2108 B in all.
// Identical groups (pack_identical_test.cc): conv1 {a,b,c}; the six batch norms {a1,a2,b1,b2,c1,c2};
// conv2 {a,c} (b's differs by one bit); fc {a,c}.
// Merge groups (equal configurations, one layer per model): conv1 {a,b,c}; bn#0 {a1,b1,c1};
// bn#1 {a2,b2,c2}; conv2 {a,b,c}; fc {a,c}.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pack/pack.h"
#include "pack/pack_report.h"
#include "pack/sharing.h"
#include "pack_onnx_models.h"
#include "report/pack_html.h"
#include "util/format.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

// The lazy context of the trio's inference (convolutions and a Gemm): 518 + 158 + 10 MiB on the
// measured stack (estimate/cuda_context.h).
constexpr int64_t kContext = 686LL << 20;

// `files` is unused but keeps the caller's model files alive (they are deleted with it).
PackReport trio([[maybe_unused]] const testing::Trio& files, const std::vector<std::string>& models, std::optional<int64_t> memory,
                std::optional<Workload> w = std::nullopt) {
  PackOptions o;
  o.models = models;
  o.gpu_memory = memory;
  o.workload = std::move(w);
  Result<PackReport> r = pack(o, testing::load_onnx);
  EXPECT_TRUE(r.ok()) << r.error();
  return r.value();
}

std::vector<ModelLayers> layers_of(const PackReport& r) {
  std::vector<ModelLayers> l;
  for (const PackModel& m : r.models) l.push_back(m.layers);
  return l;
}

TEST(PackSharingPools, TrioWeightsPerChoiceCountEachLayerOnce) {
  testing::Trio t = testing::write_trio("residency_pools");
  PackReport r = trio(t, {t.a, t.b, t.c}, std::nullopt);
  const std::vector<ModelLayers> L = layers_of(r);
  auto w = [&](Sharing s, std::vector<int32_t> set) { return weights_with_sharing(L, r.plan, r.identical, s, set); };
  // Merge plan alone: 2 x 448 + 2 x 64 + 2 x 64 + 2 x 64 + 40 = 1320 saved: 788.
  ASSERT_EQ(r.plan.saved_bytes, 1320);
  // All three.
  //   none   696 + 716 + 696 = 2108
  //   free   2108 - (896 + 5 x 64 + 64 + 40 = 1320) = 788
  //   merged pools: conv1 {a,b,c} 2 x 448 = 896; batch norms {6 layers} 5 x 64 = 320 (both merge
  //          groups lie inside the identical group: counted once, not 320 + 128 + 128);
  //          conv2 {a,b,c} (identical a~c, merged a~b~c) 2 x 64 = 128; fc {a,c} 40.
  //          1384 saved: 2108 - 1384 = 724. Less than 1320 + 1320 (no double count), more than
  //          either alone.
  EXPECT_EQ(w(Sharing::None, {0, 1, 2}), 2108);
  EXPECT_EQ(w(Sharing::Free, {0, 1, 2}), 788);
  EXPECT_EQ(w(Sharing::Merged, {0, 1, 2}), 724);
  std::vector<SharedPool> pools = shared_pools(L, r.plan, r.identical, Sharing::Merged, {0, 1, 2});
  ASSERT_EQ(pools.size(), 4u);  // by first member: a:conv1, a:bn1, a:conv2, a:fc
  EXPECT_EQ(pools[0].members.size(), 3u);
  EXPECT_EQ(pools[0].layer_bytes, 448);
  EXPECT_EQ(pools[1].members.size(), 6u);
  EXPECT_EQ(pools[1].layer_bytes, 64);
  EXPECT_EQ(pools[2].members.size(), 3u);
  EXPECT_EQ(pools[3].members.size(), 2u);
  EXPECT_EQ(pools[3].layer_bytes, 40);
  // b alone: no merge within a model, but its two fresh batch norms are bit-identical:
  // 716 - 64 = 652 with free sharing (and with merges).
  EXPECT_EQ(w(Sharing::None, {1}), 716);
  EXPECT_EQ(w(Sharing::Free, {1}), 652);
  EXPECT_EQ(w(Sharing::Merged, {1}), 652);
  // a and b: 1412 unshared. Free: conv1 448 + batch norms (4 layers) 3 x 64 = 640: 772.
  // Merged adds conv2 a~b (64): 704 saved, 708.
  EXPECT_EQ(w(Sharing::Free, {0, 1}), 772);
  EXPECT_EQ(w(Sharing::Merged, {0, 1}), 708);
  // a and c: every layer identical: 448 + 3 x 64 + 64 + 40 = 744 saved of 1392: 648 either way.
  EXPECT_EQ(w(Sharing::Free, {0, 2}), 648);
  EXPECT_EQ(w(Sharing::Merged, {0, 2}), 648);
  EXPECT_EQ(w(Sharing::None, {0, 0, 2}), 1392);  // a duplicate index counts once
}

TEST(PackSharingPools, NoLinkThroughAModelThatIsNotInTheSet) {
  // Three one-layer models of 100 B: A0 bit-identical to B0, B0 merged with C0. Together one
  // copy (300 - 2 x 100 = 100); A and C alone share nothing (200): the chain ran through B.
  std::vector<ModelLayers> L(3);
  for (int i = 0; i < 3; ++i) {
    Layer l;
    l.name = "lin";
    l.bytes = 100;
    l.tensors = 1;
    L[static_cast<size_t>(i)].layers = {l};
    L[static_cast<size_t>(i)].weights_bytes = 100;
  }
  IdenticalPlan id;
  id.groups.push_back({OpKind::Linear, 100, 1, {{0, 0}, {1, 0}}, 100});
  MergePlan plan;
  plan.groups.push_back({"k", 0, OpKind::Linear, 100, 1, {{1, 0}, {2, 0}}, 100});
  EXPECT_EQ(weights_with_sharing(L, plan, id, Sharing::Merged, {0, 1, 2}), 100);
  EXPECT_EQ(weights_with_sharing(L, plan, id, Sharing::Merged, {0, 2}), 200);
  EXPECT_EQ(weights_with_sharing(L, plan, id, Sharing::Free, {0, 1, 2}), 200);
  EXPECT_EQ(weights_with_sharing(L, plan, id, Sharing::None, {0, 1}), 200);
}

TEST(PackResidency, TrioThreeWaysByHand) {
  testing::Trio t = testing::write_trio("residency_three");
  // Each model alone: its fc runs on cuBLAS, whose workspace (8,519,680 B, the pre-Hopper default)
  // is between 1 and 10 MiB: the allocator gives it a 20 MiB large-pool segment. Every other block
  // (at most 15 weight tensors, the 192 B input, activations, each rounded up to 512 B, and the
  // fc's 1,048,576 B cuBLASLt workspace) is at most 1 MiB and fits one 2 MiB small-pool segment. Reserved peak: 22 MiB = 23,068,672, so the device
  // need is 22 MiB - 696 for a and c, 22 MiB - 716 for b.
  PackReport probe = trio(t, {t.a, t.b, t.c}, int64_t{1} << 30);
  for (const PackModel& m : probe.models) EXPECT_EQ(m.reserved_peak_bytes, 22LL << 20) << m.label;
  EXPECT_EQ(probe.models[0].device_need_bytes, (22LL << 20) - 696);
  EXPECT_EQ(probe.models[1].device_need_bytes, (22LL << 20) - 716);
  EXPECT_EQ(probe.models[2].device_need_bytes, (22LL << 20) - 696);  // c is a copy of a

  // A set is replayed as one program (pack/set_program.h): the set's weights, then one request per
  // model on one caching allocator. The process has one cuBLAS handle, so its workspace is
  // allocated once (by a's fc) and its 20 MiB segment serves every model; the other blocks of all
  // three models (3 x at most 15 weights + inputs + activations, a few dozen 512 B blocks, each
  // request's freed before the next) stay inside the one 2 MiB small-pool segment. So every
  // non-empty set, whatever it shares, reserves 22 MiB: total = context + 22 MiB. (The former rule
  // added the exact weights of the set to the largest device need, context + 22 MiB + 1412 for all
  // three unshared: it counted the other models' weights outside segments that already hold them.)
  const int64_t mem = kContext + (22LL << 20);
  PackReport r = trio(t, {t.a, t.b, t.c}, mem);
  const Residency& rs = *r.residency;
  for (Sharing sh : kSharingChoices) {
    SCOPED_TRACE(std::string(sharing_label(sh)));
    EXPECT_EQ(rs.all(sh).total_bytes, mem);
    EXPECT_TRUE(rs.all(sh).fits);
    EXPECT_EQ(rs.all(sh).activation_bytes, (22LL << 20) - rs.all(sh).weights_bytes);
    // Greedy: every trial ties at context + 22 MiB, so the lowest index comes first: a, b, c.
    EXPECT_EQ(rs.greedy(sh).models, (std::vector<int32_t>{0, 1, 2}));
    EXPECT_EQ(rs.greedy(sh).total_bytes, mem);
  }
  // The exact weights of the set still follow the sharing rule (pack/sharing.h).
  EXPECT_EQ(rs.all_unshared.weights_bytes, 2108);
  EXPECT_EQ(rs.all_free.weights_bytes, 788);
  EXPECT_EQ(rs.all_shared.weights_bytes, 724);
  // One byte less: no set fits, not even one model.
  PackReport tight = trio(t, {t.a, t.b, t.c}, mem - 1);
  for (Sharing sh : kSharingChoices) {
    EXPECT_FALSE(tight.residency->all(sh).fits);
    EXPECT_TRUE(tight.residency->greedy(sh).models.empty());
  }

  nlohmann::json j = nlohmann::json::parse(pack_json(r));
  EXPECT_EQ(j["residency"]["all_unshared"]["weights_bytes"], 2108);
  EXPECT_EQ(j["residency"]["all_free"]["weights_bytes"], 788);
  EXPECT_EQ(j["residency"]["all_shared"]["weights_bytes"], 724);
  EXPECT_EQ(j["residency"]["all_shared"]["activation_bytes"], (22LL << 20) - 724);
  EXPECT_EQ(j["residency"]["greedy_free"]["total_bytes"], mem);
  EXPECT_EQ(j["residency"]["all_free"]["fits"], true);

  std::string text = pack_text(r);
  for (const std::string& line : {"  no sharing    all 3 together: " + human_bytes(mem) + " (fits)",
                                  "  free only     all 3 together: " + human_bytes(mem) + " (fits)",
                                  "  free + merges all 3 together: " + human_bytes(mem) + " (fits)"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
  std::string tight_text = pack_text(tight);
  EXPECT_NE(tight_text.find("all 3 together: " + human_bytes(mem) + " (does not fit); greedy set: none (none fits)"),
            std::string::npos)
      << tight_text;

  // The page's residency table: one row per choice, all and greedy, weights in bytes.
  std::string html = pack_html(r);
  EXPECT_NE(html.find("<td>all, free sharing</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"n\">788 B</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"n\">724 B</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>greedy, free sharing</td>"), std::string::npos);
}

TEST(PackSwap, ActivationReserveIsTheAllocatorsDeviceNeed) {
  // Without weights_capacity, the simulation keeps room for the largest device need of the
  // simulated models (each alone on the caching allocator of the workload's memory): a and c both
  // reserve 22 MiB (TrioThreeWaysByHand), need 22 MiB - 696. With memory = context + 22 MiB + 1000
  // the weights get 1000 + 696 = 1696 B. (The exact activation peak, a few hundred bytes, left
  // 22 MiB more for weights than the allocator has.)
  testing::Trio t = testing::write_trio("residency_reserve");
  const int64_t mem = kContext + (22LL << 20) + 1000;
  const std::string text = R"({"window_s": 0.1, "gpu_memory": )" + std::to_string(mem) + R"(,
    "models": [{"model": ")" + t.a + R"(", "arrivals_ms": [0], "latency_ms": 15, "exec_ms": 2},
               {"model": ")" + t.c + R"(", "arrivals_ms": [0], "latency_ms": 15, "exec_ms": 2}]})";
  Result<Workload> w = parse_workload(text, "w.json");
  ASSERT_TRUE(w.ok()) << w.error();
  PackReport r = trio(t, {t.a, t.c}, std::nullopt, w.value());
  const SimulationSetup& st = *r.setup;
  EXPECT_EQ(st.models[0].device_need_bytes, (22LL << 20) - 696);
  EXPECT_EQ(st.models[1].device_need_bytes, (22LL << 20) - 696);
  // The exact peak less weights, still reported: the workspaces' exact 8,519,680 + 1,048,576 B
  // (cuBLAS, and cuBLASLt for the fc's biased Gemm) and a few hundred bytes of input and
  // activations, under the 22 MiB of segments the allocator reserves.
  EXPECT_GE(st.models[0].activation_bytes, 8'519'680 + 1'048'576);
  EXPECT_LT(st.models[0].activation_bytes, 10 << 20);
  EXPECT_EQ(st.activation_reserve_bytes, (22LL << 20) - 696);
  EXPECT_EQ(st.weights_capacity_bytes, 1696);
  EXPECT_NE(pack_text(r).find("largest device need " + human_bytes((22LL << 20) - 696)), std::string::npos);
  // A memory the replay of one model alone does not fit in is one clear error.
  const std::string small = R"({"window_s": 0.1, "gpu_memory": "1MiB",
    "models": [{"model": ")" + t.a + R"(", "arrivals_ms": [0], "latency_ms": 15, "exec_ms": 2}]})";
  Result<Workload> ws = parse_workload(small, "w.json");
  ASSERT_TRUE(ws.ok()) << ws.error();
  PackOptions o;
  o.models = {t.a};
  o.workload = ws.value();
  Result<PackReport> bad = pack(o, testing::load_onnx);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), "w.json: model '" + t.a + "' at batch 1 alone runs out of the 1048576 bytes of GPU memory");
}

TEST(PackSwap, FreeSharingSavesALoadByHand) {
  // a and c (every layer bit-identical), 1000 B for weights: without sharing one at a time (696 +
  // 696 > 1000); with free sharing both (648).
  // Load = 1 ms + 0.1 ms per tensor + bytes / 100,000 B/s (10 us per byte). Exec 2 ms each.
  // Arrivals: a at 0 and 30 ms, c at 0 (after a: same time, higher index). Target 15 ms.
  // No sharing (a: 696 B in 15 tensors: 2 + 8 + 1 + 2 + 2 counters): 1 + 1.5 + 6.96 = 9.46 ms.
  //   a@0:  load 0-9.46, exec -11.46                      latency 11.46
  //   c@0:  start 11.46, evicts a, load -20.92, exec -22.92  latency 22.92 (a miss)
  //   a@30: evicts c, load 30-39.46, exec -41.46           latency 11.46
  //   3 loads, 2088 B, 28.38 ms waiting, 2 evictions.
  // Free: blocks conv1 448 B/2 t, batch norms 64 B/4 t (a's two count once), conv2 64 B/1 t,
  // fc 40 B/2 t, and each model's rest (the counters) 16 B/2 t.
  //   a@0:  loads 632 B in 11 tensors: 1 + 1.1 + 6.32 = 8.42 ms, exec -10.42   latency 10.42
  //   c@0:  start 10.42; only c:rest is missing: 16 B, 2 t: 1 + 0.2 + 0.16 = 1.36 ms -11.78,
  //         exec -13.78                                                         latency 13.78
  //   a@30: resident, exec 30-32                                                latency 2
  //   2 loads, 648 B, 9.78 ms waiting, no eviction, no miss.
  // Free + merges: the merge groups of a and c lie inside the identical pools: the same.
  testing::Trio t = testing::write_trio("residency_swap");
  const std::string text = R"({"window_s": 0.1, "weights_capacity": 1000,
    "load": {"fixed_ms": 1, "per_tensor_us": 100, "bandwidth_gb_per_s": 0.0001},
    "models": [{"model": ")" + t.a + R"(", "arrivals_ms": [0, 30], "latency_ms": 15, "exec_ms": 2},
               {"model": ")" + t.c + R"(", "arrivals_ms": [0], "latency_ms": 15, "exec_ms": 2}]})";
  Result<Workload> w = parse_workload(text, "w.json");
  ASSERT_TRUE(w.ok()) << w.error();
  PackReport r = trio(t, {t.a, t.c}, std::nullopt, w.value());
  ASSERT_EQ(r.runs.size(), 9u);
  for (const SimulationRun& run : r.runs) {
    const SwapResult& s = run.result;
    const std::string what = std::string(eviction_policy_name(run.policy)) + " " + std::string(sharing_label(run.sharing));
    ASSERT_EQ(s.trace.size(), 3u) << what;
    if (run.sharing == Sharing::None) {
      EXPECT_EQ(s.bytes_moved, 2088) << what;
      EXPECT_EQ(s.load_wait_ns, 28'380'000) << what;
      EXPECT_EQ(s.evictions, 2) << what;
      EXPECT_EQ(s.trace[1].finish_ns, 22'920'000) << what;
      EXPECT_EQ(s.trace[2].finish_ns, 41'460'000) << what;
      EXPECT_EQ(s.models[0].loads, 2) << what;
      EXPECT_EQ(s.models[1].deadline_misses, 1) << what;
    } else {
      EXPECT_EQ(s.trace[0].bytes_loaded, 632) << what;
      EXPECT_EQ(s.trace[0].load_ns, 8'420'000) << what;
      EXPECT_EQ(s.trace[1].bytes_loaded, 16) << what;
      EXPECT_EQ(s.trace[1].load_ns, 1'360'000) << what;
      EXPECT_EQ(s.trace[1].finish_ns, 13'780'000) << what;
      EXPECT_EQ(s.trace[2].bytes_loaded, 0) << what;
      EXPECT_EQ(s.trace[2].finish_ns, 32'000'000) << what;
      EXPECT_EQ(s.bytes_moved, 648) << what;
      EXPECT_EQ(s.load_wait_ns, 9'780'000) << what;
      EXPECT_EQ(s.evictions, 0) << what;
      EXPECT_EQ(s.models[0].loads, 1) << what;
      EXPECT_EQ(s.models[1].deadline_misses, 0) << what;
    }
  }
  nlohmann::json j = nlohmann::json::parse(pack_json(r));
  EXPECT_EQ(j["simulation"]["lru"]["unshared"]["bytes_moved"], 2088);
  EXPECT_EQ(j["simulation"]["lru"]["free"]["bytes_moved"], 648);
  EXPECT_EQ(j["simulation"]["mru"]["free"]["models"][1]["bytes_moved"], 16);
  EXPECT_EQ(j["simulation"]["belady"]["shared"]["bytes_moved"], 648);
  std::string out = pack_text(r);
  EXPECT_NE(out.find("  lru     free     "), std::string::npos) << out;
  // Per model, the free rows: a moved 632 B, c 16 B.
  size_t row = out.find("  lru     free     ");
  ASSERT_NE(row, std::string::npos) << out;
  std::string a_row = out.substr(row, out.find('\n', row) - row);
  std::string c_row = out.substr(out.find('\n', row) + 1, out.find('\n', out.find('\n', row) + 1) - out.find('\n', row) - 1);
  EXPECT_NE(a_row.find(" 632 B "), std::string::npos) << a_row;
  EXPECT_NE(c_row.find(" 16 B "), std::string::npos) << c_row;
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
