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

constexpr int64_t kContext = 254LL << 20;  // kContextLazyBytes

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
  // Residency counts each model's device need: its inference program alone on the caching
  // allocator, reserved peak - weights. Each model's fc runs on cuBLAS, whose workspace (8,519,680
  // B, the pre-Hopper default) is between 1 and 10 MiB: the allocator gives it a 20 MiB large-pool
  // segment. Every other block (at most 15 weight tensors, the 192 B input, activations, each
  // rounded up to 512 B) is under 1 MiB and fits one 2 MiB small-pool segment. Reserved peak:
  // 22 MiB = 23,068,672. So need_a = need_c = 23,068,672 - 696 = 23,067,976 and need_b =
  // 23,068,672 - 716 = 23,067,956: a set holding a or c needs need_a besides its weights.
  PackReport probe = trio(t, {t.a, t.b, t.c}, int64_t{1} << 30);
  for (const PackModel& m : probe.models) EXPECT_EQ(m.reserved_peak_bytes, 22LL << 20) << m.label;
  const int64_t need_a = probe.models[0].device_need_bytes;
  EXPECT_EQ(need_a, (22LL << 20) - 696);
  EXPECT_EQ(probe.models[1].device_need_bytes, (22LL << 20) - 716);
  EXPECT_EQ(probe.models[2].device_need_bytes, need_a);  // c is a copy of a
  const int64_t act_a = need_a, act_b = need_a;  // the largest need of any set holding a
  // Memory for all three with free sharing and every merge, exactly: context + 724 + need_a.
  const int64_t mem = kContext + 724 + act_b;
  PackReport r = trio(t, {t.a, t.b, t.c}, mem);
  const Residency& rs = *r.residency;
  EXPECT_EQ(rs.all_unshared.weights_bytes, 2108);
  EXPECT_EQ(rs.all_unshared.total_bytes, kContext + 2108 + act_b);
  EXPECT_FALSE(rs.all_unshared.fits);
  EXPECT_EQ(rs.all_free.weights_bytes, 788);
  EXPECT_EQ(rs.all_free.total_bytes, kContext + 788 + act_b);
  EXPECT_FALSE(rs.all_free.fits);
  EXPECT_EQ(rs.all_shared.weights_bytes, 724);
  EXPECT_EQ(rs.all_shared.total_bytes, mem);
  EXPECT_TRUE(rs.all_shared.fits);
  // Greedy, no sharing: a (696 + need_a = 22 MiB, tie with b's 716 + need_b and with c: lowest
  // index); any pair needs >= 1392 > 724: {a}.
  EXPECT_EQ(rs.greedy_unshared.models, (std::vector<int32_t>{0}));
  EXPECT_EQ(rs.greedy_unshared.total_bytes, kContext + 696 + act_a);
  // Free: a (696 - 64 = 632 with its twin batch norms; b alone 652 + need_b ties: lowest index),
  // then c (648 < 772 with b), then b would
  // need 788 > 724: {a, c}, context + 648 + act_a.
  EXPECT_EQ(rs.greedy_free.models, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(rs.greedy_free.weights_bytes, 648);
  EXPECT_EQ(rs.greedy_free.total_bytes, kContext + 648 + act_a);
  // Free + merges: a (632), c (648), b (724 = what fits): all three.
  EXPECT_EQ(rs.greedy_shared.models, (std::vector<int32_t>{0, 2, 1}));
  EXPECT_EQ(rs.greedy_shared.total_bytes, mem);

  nlohmann::json j = nlohmann::json::parse(pack_json(r));
  EXPECT_EQ(j["residency"]["all_unshared"]["weights_bytes"], 2108);
  EXPECT_EQ(j["residency"]["all_free"]["weights_bytes"], 788);
  EXPECT_EQ(j["residency"]["all_shared"]["weights_bytes"], 724);
  EXPECT_EQ(j["residency"]["greedy_free"]["weights_bytes"], 648);
  EXPECT_EQ(j["residency"]["greedy_free"]["total_bytes"], kContext + 648 + act_a);
  EXPECT_EQ(j["residency"]["all_free"]["fits"], false);

  std::string text = pack_text(r);
  for (const std::string& line :
       {"  no sharing    all 3 together: " + human_bytes(kContext + 2108 + act_b) + " (does not fit)",
        "  free only     all 3 together: " + human_bytes(kContext + 788 + act_b) + " (does not fit)",
        "  free + merges all 3 together: " + human_bytes(mem) + " (fits)"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }

  // The page's residency table: one row per choice, all and greedy, weights in bytes.
  std::string html = pack_html(r);
  EXPECT_NE(html.find("<td>all, free sharing</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"n\">788 B</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"n\">724 B</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>greedy, free sharing</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"n\">648 B</td>"), std::string::npos);
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

}  // namespace
}  // namespace headroom
