// The GPU catalog: memory, bandwidth and peak FLOP/s of the GPUs headroom knows, read from
// data/gpus.json (compiled into the library; see cmake/gpu_catalog.cmake). Every number there comes
// with its source: a vendor datasheet value, or how it was derived (the file says which).
// Also: parse_memory_size for "24GiB", "80 GB", "16000MiB".
//
// Lookup is by name or alias, case-insensitive, ignoring spaces, '-' and '_' and a leading
// "NVIDIA", "Tesla" or "GeForce": "a100-sxm4-80gb", "NVIDIA A100-SXM4-80GB" and "A100 80GB" find
// the same entry. An unknown name is an InputError with suggestions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace headroom {

struct HostLink {
  std::string kind;                  // "pcie" or "nvlink-c2c"
  int generation = 0;                // PCIe generation (3, 4, 5); 0 for NVLink-C2C
  int lanes = 0;                     // PCIe lanes; 0 for NVLink-C2C
  double bandwidth_bytes_per_s = 0;  // per direction
};

struct GpuSpec {
  std::string name;                  // canonical, e.g. "A100-SXM4-80GB"
  std::vector<std::string> aliases;  // e.g. "NVIDIA A100-SXM4-80GB" (nvidia-smi's name)
  std::string architecture;          // volta, turing, ampere, ada, hopper, blackwell
  // cudaDeviceProp's multiProcessorCount and maxThreadsPerMultiProcessor: ATen's CUDA reductions
  // size their grids by them (training/cuda_reduce.h), so a reduction's staging differs by GPU.
  int multiprocessors = 0;
  int max_threads_per_multiprocessor = 0;
  int64_t memory_bytes = 0;          // total as nvidia-smi reports it (MiB * 2^20)
  std::string memory_nominal;        // datasheet capacity, e.g. "80 GB HBM2e"
  double memory_bandwidth_bytes_per_s = 0;
  double fp32_flops = 0;  // non-tensor peak
  // Dense tensor-core peaks (FP32 accumulate); nullopt = not supported in tensor cores.
  std::optional<double> tf32_flops;
  std::optional<double> fp16_flops;
  std::optional<double> bf16_flops;
  std::optional<double> fp8_flops;
  HostLink host_link;
  // NVLink to the other GPUs of the board, per direction; unset: GPU-to-GPU copies go over PCIe
  // at host_link's rate.
  std::optional<double> gpu_link_bytes_per_s;
  std::string source;  // the vendor document
  std::string notes;
};

class DeviceCatalog {
 public:
  // The catalog compiled in from data/gpus.json (parsed once).
  static const DeviceCatalog& builtin();
  // Parses catalog JSON; `origin` names it in errors. Throws InputError on malformed input,
  // missing fields, or two entries answering to the same name.
  static DeviceCatalog from_json(std::string_view text, std::string_view origin);
  static DeviceCatalog from_file(const std::string& path);

  // Throws InputError naming `name` and suggesting close names when nothing matches.
  const GpuSpec& find(std::string_view name) const;
  // nullptr when nothing matches.
  const GpuSpec* try_find(std::string_view name) const;
  const std::vector<GpuSpec>& gpus() const { return gpus_; }

 private:
  std::vector<GpuSpec> gpus_;
  std::vector<std::pair<std::string, size_t>> index_;  // normalized name -> gpus_ index, sorted
};

// The lookup key of a GPU name: lower case, without spaces, '-', '_', and without a leading
// "nvidia", "tesla" or "geforce".
std::string normalize_gpu_name(std::string_view name);

// Parses a memory size: a non-negative decimal number, optional spaces, and an optional unit
// (case-insensitive): B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024).
// No unit means bytes. Fractions round to the nearest byte ("1.5GiB" = 1610612736).
// Throws InputError naming the text when it is not such a size or overflows int64.
int64_t parse_memory_size(std::string_view text);

}  // namespace headroom
