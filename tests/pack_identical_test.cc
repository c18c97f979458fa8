// headroom pack, the free part: layers whose weights are bit-identical share one copy without
// retraining (src/pack/identical.h), read from ONNX files that carry their weights
// (src/frontends/onnx/onnx_weights.h). The models are written here with the protobuf API, with
// known values; the expected groups and bytes are derived by hand in the comments.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "frontends/onnx/onnx_import.h"
#include "frontends/onnx/onnx_weights.h"
#include "onnx_test_models.h"
#include "pack_onnx_models.h"
#include "pack/identical.h"
#include "pack/pack.h"
#include "pack/pack_report.h"
#include "util/hash.h"

namespace headroom {
namespace {

namespace fs = std::filesystem;
using testing::OnnxModel;
using testing::Weights;
using onnx::TensorProto;
using testing::fresh_dir;
using testing::le_bytes;
using testing::load_onnx;
using testing::set_values;
using testing::Store;
using testing::Trio;
using testing::values;
using testing::write_trio;
using testing::find_initializer;

std::string member_names(const PackReport& r, const IdenticalGroup& g) {
  std::string s;
  for (const IdenticalMember& m : g.members) {
    s += (s.empty() ? "" : " ") + r.models[static_cast<size_t>(m.model)].label + ":" +
         r.models[static_cast<size_t>(m.model)].layers.layers[static_cast<size_t>(m.layer)].name;
  }
  return s;
}

TEST(PackIdentical, BitIdenticalLayersAcrossAndWithinModels) {
  Trio t = write_trio("trio_lib");
  PackOptions o;
  o.models = {t.a, t.b, t.c};
  Result<PackReport> r = pack(o, load_onnx);
  ASSERT_TRUE(r.ok()) << r.error();
  const PackReport& rep = r.value();
  const IdenticalPlan& id = rep.identical;
  for (const WeightCheck& c : id.checks) {
    EXPECT_EQ(c.status, WeightCheckStatus::Complete);
    EXPECT_EQ(c.hashed_layers, 5);  // conv1, bn1, conv2, bn2, fc
  }
  ASSERT_EQ(id.groups.size(), 4u);
  // 1. The six fresh batch norms (two per model, also within one model): one copy of 64 bytes
  //    kept, 5 x 64 = 320 saved.
  // 2. conv1 in all three (b stores it in typed float_data, c in external data: same bytes):
  //    (108 + 4) x 4 = 448 bytes, 2 x 448 = 896 saved.
  // 3. conv2 in a and c only (b's differs by one bit): 16 x 4 = 64 bytes, 64 saved.
  // 4. fc in a and c (b's head has 3 classes): (8 + 2) x 4 = 40 bytes, 40 saved.
  // Greedy order by bytes saved: 896, 320, 64, 40.
  auto a = fs::path(t.a).string(), b = fs::path(t.b).string(), c = fs::path(t.c).string();
  EXPECT_EQ(member_names(rep, id.groups[0]), a + ":conv1 " + b + ":conv1 " + c + ":conv1");
  EXPECT_EQ(id.groups[0].layer_bytes, 448);
  EXPECT_EQ(id.groups[0].bytes_saved, 896);
  EXPECT_EQ(member_names(rep, id.groups[1]),
            a + ":bn1 " + a + ":bn2 " + b + ":bn1 " + b + ":bn2 " + c + ":bn1 " + c + ":bn2");
  EXPECT_EQ(id.groups[1].layer_bytes, 64);
  EXPECT_EQ(id.groups[1].bytes_saved, 320);
  EXPECT_EQ(member_names(rep, id.groups[2]), a + ":conv2 " + c + ":conv2");
  EXPECT_EQ(id.groups[2].bytes_saved, 64);
  EXPECT_EQ(member_names(rep, id.groups[3]), a + ":fc " + c + ":fc");
  EXPECT_EQ(id.groups[3].bytes_saved, 40);
  // 896 + 320 + 64 + 40 = 1320 bytes for free. Weights: a and c 448 + 2 x 64 + 64 + 40 = 680
  // in layers + 2 x 8 for the batch norms' num_batches_tracked (int64 counters the importer adds,
  // no op reads them) = 696 each; b 448 + 128 + 64 + 60 + 16 = 716: 2108 in all, 2108 - 1320 =
  // 788 with free sharing only.
  EXPECT_EQ(id.saved_bytes, 1320);
  EXPECT_EQ(id.unshared_bytes, 2108);
  EXPECT_EQ(id.shared_bytes, 788);
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

// ---- a hash match is only a candidate ----

ModelLayers one_layer_model(const std::string& model, const std::string& weight, int64_t bytes) {
  ModelLayers m;
  m.model = model;
  Layer l;
  l.name = "lin";
  l.kind = OpKind::Linear;
  l.weight_names = {weight};
  l.bytes = bytes;
  l.tensors = 1;
  m.layers.push_back(l);
  m.weights_bytes = m.layer_bytes = bytes;
  return m;
}

WeightData one_tensor(const std::string& name, const std::string& bytes, uint64_t hash) {
  WeightData w;
  TensorBytes t;
  t.dtype = DType::F32;
  t.shape = {static_cast<int64_t>(bytes.size() / 4)};
  t.size = static_cast<int64_t>(bytes.size());
  t.hash = hash;  // forced: the grouping must compare the bytes
  t.memory = std::make_shared<const std::string>(bytes);
  w.tensors[name] = t;
  return w;
}

TEST(PackIdentical, EqualHashesWithDifferentBytesDoNotShare) {
  // Three 8-byte layers whose tensors all claim hash 42: x and z hold equal bytes, y differs in
  // one byte. Only x and z share: 8 bytes saved.
  std::string bytes(8, '\x01'), other = bytes;
  other[7] = '\x02';
  std::vector<ModelLayers> models = {one_layer_model("x", "w", 8), one_layer_model("y", "w", 8),
                                     one_layer_model("z", "w", 8)};
  WeightData wx = one_tensor("w", bytes, 42), wy = one_tensor("w", other, 42), wz = one_tensor("w", bytes, 42);
  IdenticalPlan p = find_identical_layers(models, {&wx, &wy, &wz});
  ASSERT_EQ(p.groups.size(), 1u);
  ASSERT_EQ(p.groups[0].members.size(), 2u);
  EXPECT_EQ(p.groups[0].members[0].model, 0);
  EXPECT_EQ(p.groups[0].members[1].model, 2);
  EXPECT_EQ(p.saved_bytes, 8);
  // The real hashes of the two byte strings differ (what the reader would store).
  EXPECT_NE(hash64(bytes), hash64(other));
}

TEST(PackIdentical, ModelsWithoutValuesAreReportedNotGuessed) {
  std::vector<ModelLayers> models = {one_layer_model("x", "w", 8), one_layer_model("y", "w", 8)};
  WeightData stripped;
  stripped.missing["w"] = "external data file 'y.weights' is empty";
  IdenticalPlan p = find_identical_layers(models, {nullptr, &stripped});
  EXPECT_TRUE(p.groups.empty());
  EXPECT_EQ(p.saved_bytes, 0);
  EXPECT_EQ(p.shared_bytes, 16);
  EXPECT_EQ(p.checks[0].status, WeightCheckStatus::NoValues);
  EXPECT_EQ(p.checks[1].status, WeightCheckStatus::Absent);
  EXPECT_EQ(weight_check_text(p.checks[1]),
            "weights not present: identical-weight check skipped ('w': external data file 'y.weights' is empty)");
}

// ---- the reader: canonical bytes, and bad external data skipped with a reason ----

TEST(OnnxWeights, TypedAndRawDataReadAsTheSameBytes) {
  OnnxModel raw, typed;
  raw.initializer("w", {2, 2});
  typed.initializer("w", {2, 2});
  std::vector<float> v = {1.5f, -2.0f, 0.25f, 3.0f};
  set_values(raw, "w", v, Store::Raw);
  set_values(typed, "w", v, Store::Typed);
  Result<WeightData> a = read_onnx_weights_bytes(raw.bytes(), "");
  Result<WeightData> b = read_onnx_weights_bytes(typed.bytes(), "");
  ASSERT_TRUE(a.ok() && b.ok());
  const TensorBytes& ta = a.value().tensors.at("w");
  const TensorBytes& tb = b.value().tensors.at("w");
  EXPECT_EQ(ta.size, 16);  // 4 floats x 4 bytes
  EXPECT_EQ(*ta.memory, le_bytes(v));
  EXPECT_EQ(ta.hash, tb.hash);
  EXPECT_TRUE(same_bytes(ta, tb));
}

TEST(OnnxWeights, BadExternalDataIsSkippedWithAReason) {
  std::string dir = fresh_dir("bad_external");
  std::ofstream(dir + "/data.bin", std::ios::binary) << std::string(64, '\x07');  // 64 bytes
  std::ofstream(dir + "/empty.bin", std::ios::binary);
  OnnxModel m;
  // Each tensor is [4] floats = 16 bytes.
  struct Case {
    const char* name;
    std::vector<std::pair<std::string, std::string>> kv;
    const char* why;
  };
  std::vector<Case> cases = {
      {"ok", {{"location", "data.bin"}, {"offset", "48"}, {"length", "16"}}, ""},
      {"past_end", {{"location", "data.bin"}, {"offset", "56"}, {"length", "16"}}, "past the end of 'data.bin' (64 bytes)"},
      {"far_offset", {{"location", "data.bin"}, {"offset", "9223372036854775807"}}, "offset 9223372036854775807 is past the end"},
      {"bad_offset", {{"location", "data.bin"}, {"offset", "-16"}}, "offset '-16' is not a decimal byte count"},
      {"bad_length", {{"location", "data.bin"}, {"length", "16 bytes"}}, "length '16 bytes' is not a decimal byte count"},
      {"wrong_length", {{"location", "data.bin"}, {"length", "12"}}, "length 12 bytes, its shape needs 16"},
      {"escapes", {{"location", "../data.bin"}}, "is not a path inside the model's folder"},
      {"absolute", {{"location", "/etc/passwd"}}, "is not a path inside the model's folder"},
      {"missing", {{"location", "nope.bin"}}, "external data file 'nope.bin' does not exist"},
      {"empty", {{"location", "empty.bin"}}, "external data file 'empty.bin' is empty"},
      {"no_location", {{"offset", "0"}}, "external data without a location"},
  };
  for (const Case& c : cases) {
    m.initializer(c.name, {4});
    TensorProto* t = find_initializer(m, c.name);
    t->clear_raw_data();
    t->set_data_location(TensorProto::EXTERNAL);
    for (const auto& [k, v] : c.kv) {
      auto* e = t->add_external_data();
      e->set_key(k);
      e->set_value(v);
    }
  }
  m.initializer("short_inline", {4});
  find_initializer(m, "short_inline")->set_raw_data(std::string(12, '\0'));
  std::string path = dir + "/m.onnx";
  m.save(path);
  Result<WeightData> w = read_onnx_weights(path);
  ASSERT_TRUE(w.ok()) << w.error();
  ASSERT_EQ(w.value().tensors.size(), 1u);
  const TensorBytes& ok = w.value().tensors.at("ok");
  EXPECT_EQ(ok.offset, 48);
  EXPECT_EQ(ok.hash, hash64(std::string(16, '\x07')));
  for (const Case& c : cases) {
    if (std::string(c.name) == "ok") continue;
    ASSERT_EQ(w.value().missing.count(c.name), 1u) << c.name;
    EXPECT_NE(w.value().missing.at(c.name).find(c.why), std::string::npos) << c.name << ": " << w.value().missing.at(c.name);
  }
  EXPECT_EQ(w.value().missing.at("short_inline"), "holds 12 bytes of data, its shape needs 16");
  // Not an ONNX file at all: one line naming it.
  std::ofstream(dir + "/junk.onnx") << "not protobuf";
  Result<WeightData> junk = read_onnx_weights(dir + "/junk.onnx");
  ASSERT_FALSE(junk.ok());
  EXPECT_EQ(junk.error().find('\n'), std::string::npos);
  EXPECT_EQ(junk.error().rfind(dir + "/junk.onnx: ", 0), 0u) << junk.error();
}

// ---- the CLI: stripped files are reported, the trio's JSON carries the free groups ----

using headroom::testing::CliRun;
using headroom::testing::run_cli;

TEST(PackIdenticalCli, StrippedWeightsAreSkippedClearly) {
  std::string f = std::string(HEADROOM_SOURCE_DIR) + "/tests/data/onnx/resnet18_training.onnx";
  CliRun r = run_cli("pack " + f + " resnet18");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("weights not present: identical-weight check skipped ('conv1.weight': external data file "
                       "'resnet18_training.weights' is empty)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("no weight values (built-in architecture): identical-weight check skipped"), std::string::npos);
  EXPECT_NE(r.out.find("0 groups of bit-identical layers (0 layers), saving 0 B"), std::string::npos);
}

TEST(PackIdenticalCli, JsonHasTheFreeGroupsApart) {
  Trio t = write_trio("trio_cli");
  CliRun r = run_cli("pack " + t.a + " " + t.b + " " + t.c + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  // The same groups as BitIdenticalLayersAcrossAndWithinModels: 896 + 320 + 64 + 40 = 1320 bytes.
  EXPECT_EQ(j["identical_saved_bytes"], 1320);
  EXPECT_EQ(j["identical_shared_weights_bytes"], 2108 - 1320);
  ASSERT_EQ(j["identical_groups"].size(), 4u);
  EXPECT_EQ(j["identical_groups"][0]["bytes_saved"], 896);
  EXPECT_EQ(j["identical_groups"][0]["members"].size(), 3u);
  EXPECT_EQ(j["identical_groups"][0]["members"][1]["model"], t.b);
  EXPECT_EQ(j["identical_groups"][0]["members"][1]["layer"], "conv1");
  EXPECT_EQ(j["identical_groups"][2]["members"].size(), 2u);  // conv2: not b's, one bit differs
  EXPECT_EQ(j["models"][1]["weight_values"]["status"], "complete");
  EXPECT_EQ(j["models"][1]["weight_values"]["hashed_layers"], 5);
  // The merge plan (retraining) keeps its names and numbers: conv1, bn1, bn2 and conv2 in 3
  // models, fc in a and c: 2 x 448 + 3 x (2 x 64) + 40 = 1320.
  EXPECT_EQ(j["saved_bytes"], 1320);
  EXPECT_EQ(j["unshared_weights_bytes"], 2108);
}

}  // namespace
}  // namespace headroom
