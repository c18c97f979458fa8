#include "validation_cases.h"

#include <cmath>

#include "sim/device_catalog.h"

namespace headroom::testing {

EstimateOptions options_for_case(const nlohmann::json& c, const std::string& device) {
  EstimateOptions o;
  o.model = c.at("model").get<std::string>();
  o.batch = c.at("batch").get<int64_t>();
  if (!c.at("seq").is_null()) o.seq = c.at("seq").get<int64_t>();
  o.mode = c.at("mode") == "train" ? RunMode::Training : RunMode::Inference;
  if (o.mode == RunMode::Training) {
    o.optimizer = *parse_optimizer(c.at("optimizer").get<std::string>());
    o.foreach = c.at("foreach").get<bool>();
  }
  o.dropout = c.at("dropout").get<bool>();
  o.precision = *parse_precision(c.at("precision").get<std::string>());
  o.device = device;
  // The captured suite measures some cases with 2 intra-op threads (validation/captured.py).
  if (c.contains("threads")) o.threads = c.at("threads").get<int>();
  // Checkpointing cases: the headroom op ranges equivalent to what the harness checkpoints.
  if (c.contains("checkpoint")) o.checkpoint_ranges = c.at("checkpoint").get<std::vector<std::string>>();
  if (c.contains("checkpoint_impl")) o.plan.checkpoint_impl = *parse_checkpoint_impl(c.at("checkpoint_impl").get<std::string>());
  return o;
}

Result<CudaMeasurements> parse_cuda_measurements(const nlohmann::json& doc) {
  return capture_input_errors([&]() -> CudaMeasurements {
    try {
      CudaMeasurements m;
      const nlohmann::json& h = doc.at("header");
      m.gpu_name = h.at("gpu_name").get<std::string>();
      m.gpu_memory_bytes = h.at("gpu_memory_bytes").get<int64_t>();
      // CUDA_MODULE_LOADING=EAGER in the measured run: the eager context.
      bool eager = h.value("cuda_module_loading", "") == "EAGER";
      GpuOptions gpu;
      if (DeviceCatalog::builtin().try_find(m.gpu_name) != nullptr) gpu.gpu = m.gpu_name;
      gpu.gpu_memory = m.gpu_memory_bytes;
      gpu.lazy_module_loading = !eager;
      for (const nlohmann::json& c : doc.at("cases")) {
        CudaMeasuredCase k;
        k.id = c.at("id").get<std::string>();
        k.options = options_for_case(c, "cuda");
        k.options.gpu = gpu;
        if (c.contains("skipped")) {
          k.skipped = c.at("skipped").get<std::string>();
        } else {
          const nlohmann::json& meas = c.at("measured");
          k.allocated_peak_bytes = meas.at("allocated_peak_bytes").get<int64_t>();
          k.reserved_peak_bytes = meas.at("reserved_peak_bytes").get<int64_t>();
          if (!meas.at("device_total_bytes").is_null()) k.device_total_bytes = meas.at("device_total_bytes").get<int64_t>();
          if (k.allocated_peak_bytes <= 0 || k.reserved_peak_bytes < k.allocated_peak_bytes) {
            throw InputError(k.id + ": measured allocated " + std::to_string(k.allocated_peak_bytes) + " and reserved " +
                             std::to_string(k.reserved_peak_bytes) + " are not a peak pair");
          }
        }
        m.cases.push_back(std::move(k));
      }
      return m;
    } catch (const nlohmann::json::exception& e) {
      throw InputError(std::string("measured_cuda.json: ") + e.what());
    }
  });
}

std::vector<MetricCheck> check_cuda_case(const CudaMeasuredCase& m, const DeviceMemory& p, const CudaBounds& b) {
  std::vector<MetricCheck> out;
  auto add = [&](const char* metric, int64_t measured, int64_t predicted, double bound) {
    MetricCheck c{metric, measured, predicted, 0.0, bound, false};
    c.error = static_cast<double>(predicted - measured) / static_cast<double>(measured);
    c.ok = std::fabs(c.error) <= bound;
    out.push_back(c);
  };
  if (m.skipped) return out;
  add("allocated", m.allocated_peak_bytes, p.allocated_peak_bytes, b.allocated);
  add("reserved", m.reserved_peak_bytes, p.reserved_peak_bytes, b.reserved);
  if (m.device_total_bytes && *m.device_total_bytes > 0) {
    add("device total", *m.device_total_bytes, p.device_total_bytes, b.device_total);
  }
  return out;
}

}  // namespace headroom::testing
