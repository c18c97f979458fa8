// The GPU catalog compiled in from data/gpus.json, lookup by name and alias, and memory sizes.
#include "sim/device_catalog.h"

#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "util/error.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

constexpr int64_t MiB = 1LL << 20;

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(DeviceCatalog, ListsTheRequiredGpus) {
  const DeviceCatalog& c = DeviceCatalog::builtin();
  for (const char* name :
       {"V100-SXM2-16GB", "V100-SXM2-32GB", "T4", "A10G", "L4", "L40S", "A100-SXM4-40GB",
        "A100-SXM4-80GB", "H100-SXM", "H100-PCIe", "H200", "RTX-3090", "RTX-4090", "RTX-A6000"}) {
    EXPECT_NE(c.try_find(name), nullptr) << name;
  }
  for (const GpuSpec& g : c.gpus()) {
    EXPECT_FALSE(g.source.empty()) << g.name;
    EXPECT_GT(g.memory_bytes, 0) << g.name;
    EXPECT_GT(g.memory_bandwidth_bytes_per_s, 0) << g.name;
    EXPECT_GT(g.fp32_flops, 0) << g.name;
    EXPECT_GT(g.host_link.bandwidth_bytes_per_s, 0) << g.name;
  }
}

TEST(DeviceCatalog, PinnedEntries) {
  const DeviceCatalog& c = DeviceCatalog::builtin();
  // A100 80GB SXM: nvidia-smi 81920 MiB; datasheet 2,039 GB/s, 19.5 FP32, 156 TF32, 312 BF16.
  const GpuSpec& a100 = c.find("A100-SXM4-80GB");
  EXPECT_EQ(a100.memory_bytes, 81920 * MiB);
  EXPECT_EQ(a100.architecture, "ampere");
  EXPECT_DOUBLE_EQ(a100.memory_bandwidth_bytes_per_s, 2039e9);
  EXPECT_DOUBLE_EQ(a100.fp32_flops, 19.5e12);
  EXPECT_DOUBLE_EQ(*a100.tf32_flops, 156e12);
  EXPECT_DOUBLE_EQ(*a100.bf16_flops, 312e12);
  EXPECT_FALSE(a100.fp8_flops.has_value());
  EXPECT_EQ(a100.host_link.kind, "pcie");
  EXPECT_EQ(a100.host_link.generation, 4);
  EXPECT_EQ(a100.host_link.lanes, 16);
  // H100 SXM: 81559 MiB; 3.35 TB/s; FP8 3,958 TFLOPS with sparsity -> 1,979 dense; PCIe Gen5.
  const GpuSpec& h100 = c.find("H100-SXM");
  EXPECT_EQ(h100.memory_bytes, 81559 * MiB);
  EXPECT_DOUBLE_EQ(h100.memory_bandwidth_bytes_per_s, 3350e9);
  EXPECT_DOUBLE_EQ(*h100.fp8_flops, 1979e12);
  EXPECT_EQ(h100.host_link.generation, 5);
  // T4: 15360 MiB; no BF16 tensor cores.
  const GpuSpec& t4 = c.find("T4");
  EXPECT_EQ(t4.memory_bytes, 15360 * MiB);
  EXPECT_EQ(t4.architecture, "turing");
  EXPECT_FALSE(t4.bf16_flops.has_value());
  EXPECT_DOUBLE_EQ(*t4.fp16_flops, 65e12);
  // V100: Volta, no TF32.
  EXPECT_FALSE(c.find("V100-SXM2-32GB").tf32_flops.has_value());
  EXPECT_EQ(c.find("V100-SXM2-32GB").memory_bytes, 32510 * MiB);
  // RTX 4090: 24564 MiB, 1008 GB/s.
  EXPECT_EQ(c.find("RTX-4090").memory_bytes, 24564 * MiB);
  EXPECT_DOUBLE_EQ(c.find("RTX-4090").memory_bandwidth_bytes_per_s, 1008e9);
  // SM counts as torch.cuda.get_device_properties reports them; threads per SM by compute
  // capability (2048 on 8.0 and 9.0, 1024 on 7.5, 1536 on 8.6 and 8.9).
  EXPECT_EQ(a100.multiprocessors, 108);
  EXPECT_EQ(a100.max_threads_per_multiprocessor, 2048);
  EXPECT_EQ(h100.multiprocessors, 132);
  EXPECT_EQ(c.find("H100-PCIe").multiprocessors, 114);
  EXPECT_EQ(t4.multiprocessors, 40);
  EXPECT_EQ(t4.max_threads_per_multiprocessor, 1024);
  EXPECT_EQ(c.find("A10G").multiprocessors, 80);
  EXPECT_EQ(c.find("L40S").max_threads_per_multiprocessor, 1536);
}

TEST(DeviceCatalog, LookupIgnoresCaseSpacesDashesAndVendorPrefixes) {
  const DeviceCatalog& c = DeviceCatalog::builtin();
  const GpuSpec* a100 = &c.find("A100-SXM4-80GB");
  EXPECT_EQ(&c.find("a100-sxm4-80gb"), a100);
  EXPECT_EQ(&c.find("NVIDIA A100-SXM4-80GB"), a100);  // nvidia-smi's name
  EXPECT_EQ(&c.find("a100 80gb"), a100);              // alias
  EXPECT_EQ(&c.find("A100_80GB"), a100);
  EXPECT_EQ(&c.find("Tesla T4"), &c.find("t4"));
  EXPECT_EQ(&c.find("NVIDIA GeForce RTX 4090"), &c.find("rtx-4090"));
  EXPECT_EQ(&c.find("NVIDIA H100 80GB HBM3"), &c.find("H100-SXM"));
  EXPECT_EQ(c.try_find("A100"), nullptr);  // ambiguous: 40 GB or 80 GB
}

TEST(DeviceCatalog, UnknownNamesSuggestCloseOnes) {
  const DeviceCatalog& c = DeviceCatalog::builtin();
  std::string e = error_of([&] { c.find("A100"); });
  EXPECT_NE(e.find("unknown GPU 'A100'"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean"), std::string::npos) << e;
  EXPECT_NE(e.find("'A100-SXM4-40GB'"), std::string::npos) << e;
  e = error_of([&] { c.find("h100-sxn"); });
  EXPECT_NE(e.find("'H100-SXM'"), std::string::npos) << e;
  e = error_of([&] { c.find("quantum-9000"); });
  EXPECT_NE(e.find("unknown GPU 'quantum-9000'"), std::string::npos) << e;
  EXPECT_NE(e.find("known GPUs:"), std::string::npos) << e;
}

TEST(DeviceCatalog, RejectsMalformedCatalogs) {
  EXPECT_NE(
      error_of([] { DeviceCatalog::from_json("{", "x.json"); }).find("x.json: not valid JSON"),
      std::string::npos);
  EXPECT_NE(error_of([] {
              DeviceCatalog::from_json(R"({"gpus": [{"name": "G"}]})", "x.json");
            }).find("missing field 'aliases'"),
            std::string::npos);
  const char* twice = R"({"gpus": [
    {"name": "G1", "aliases": ["same"], "architecture": "ampere", "multiprocessors": 1,
     "max_threads_per_multiprocessor": 1, "memory_mib": 1,
     "memory_nominal": "", "memory_bandwidth_gb_per_s": 1, "fp32_tflops": 1, "tf32_tflops": null,
     "fp16_tflops": null, "bf16_tflops": null, "fp8_tflops": null,
     "host_link": {"kind": "pcie", "generation": 4, "lanes": 16, "bandwidth_gb_per_s": 1},
     "source": "s"},
    {"name": "G2", "aliases": ["SAME"], "architecture": "ampere", "multiprocessors": 1,
     "max_threads_per_multiprocessor": 1, "memory_mib": 1,
     "memory_nominal": "", "memory_bandwidth_gb_per_s": 1, "fp32_tflops": 1, "tf32_tflops": null,
     "fp16_tflops": null, "bf16_tflops": null, "fp8_tflops": null,
     "host_link": {"kind": "nvlink-c2c", "bandwidth_gb_per_s": 450}, "source": "s"}]})";
  EXPECT_NE(error_of([&] { DeviceCatalog::from_json(twice, "x.json"); }).find("names both"),
            std::string::npos);
  // The SM counts size reductions' grids: required, positive and whole.
  const std::string one = R"({"gpus": [
    {"name": "G1", "aliases": [], "architecture": "ampere", "multiprocessors": SMS,
     "max_threads_per_multiprocessor": 2048, "memory_mib": 1,
     "memory_nominal": "", "memory_bandwidth_gb_per_s": 1, "fp32_tflops": 1, "tf32_tflops": null,
     "fp16_tflops": null, "bf16_tflops": null, "fp8_tflops": null,
     "host_link": {"kind": "nvlink-c2c", "bandwidth_gb_per_s": 450}, "source": "s"}]})";
  auto with_sms = [&](const std::string& sms) {
    std::string text = one;
    text.replace(text.find("SMS"), 3, sms);
    return error_of([&] { DeviceCatalog::from_json(text, "x.json"); });
  };
  EXPECT_EQ(with_sms("108"), "");
  EXPECT_NE(with_sms("0").find("'multiprocessors' must be positive"), std::string::npos) << with_sms("0");
  EXPECT_NE(with_sms("10.5").find("'multiprocessors' must be a whole number"), std::string::npos) << with_sms("10.5");
  std::string missing = one;
  missing.replace(missing.find("\"multiprocessors\": SMS,"), 23, "");
  EXPECT_NE(error_of([&] { DeviceCatalog::from_json(missing, "x.json"); }).find("missing field 'multiprocessors'"),
            std::string::npos);
}

TEST(DeviceCatalog, AliasesAreUnique) {
  std::set<std::string> seen;
  for (const GpuSpec& g : DeviceCatalog::builtin().gpus()) {
    EXPECT_TRUE(seen.insert(normalize_gpu_name(g.name)).second) << g.name;
  }
}

TEST(ParseMemorySize, UnitsAndSpacing) {
  EXPECT_EQ(parse_memory_size("24GiB"), 24LL << 30);
  EXPECT_EQ(parse_memory_size("24 GB"), 24'000'000'000LL);
  EXPECT_EQ(parse_memory_size("80GB"), 80'000'000'000LL);
  EXPECT_EQ(parse_memory_size("16000MiB"), 16000LL << 20);
  EXPECT_EQ(parse_memory_size("16000mib"), 16000LL << 20);
  EXPECT_EQ(parse_memory_size(" 512 B "), 512);
  EXPECT_EQ(parse_memory_size("0"), 0);  // zero needs no unit (--cublas-workspace 0)
  EXPECT_EQ(parse_memory_size("512B"), 512);
  EXPECT_EQ(parse_memory_size("1.5GiB"), 1610612736);
  EXPECT_EQ(parse_memory_size("0.5 KiB"), 512);
  EXPECT_EQ(parse_memory_size("2TiB"), 2LL << 40);
  EXPECT_EQ(parse_memory_size("1.0000001KB"), 1000);  // rounds to the nearest byte
}

TEST(ParseMemorySize, GarbageIsAnInputErrorNamingIt) {
  for (const char* bad : {"", "GB", "abc", "-5GB", "24 XB", "24G", "24GiB extra", "1e9", "1..5GB",
                          ".GB", "24 G iB"}) {
    std::string e = error_of([&] { parse_memory_size(bad); });
    EXPECT_NE(e.find(std::string("'") + bad + "'"), std::string::npos) << bad << ": " << e;
  }
  // A bare number was read as bytes: `--gpu-memory 24` said "does not fit: 3.29 GiB short".
  std::string bare = error_of([] { parse_memory_size("24"); });
  EXPECT_NE(bare.find("'24' has no unit: write e.g. 24GiB or 24GB"), std::string::npos) << bare;
  EXPECT_NE(error_of([] { parse_memory_size("9999999999TiB"); }).find("too large"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_memory_size("99999999999999999999"); }).find("too large"),
            std::string::npos);
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
