// The workload file of `headroom pack --workload FILE`: which models receive requests, how often,
// at which batch and latency target, over what window, with which seed; optionally the load cost
// model and the memory available. Format (JSON; sizes are bytes or strings such as "6GiB"):
//
//   {
//     "window_s": 10,                 // arrivals in [0, window)            (required, > 0)
//     "seed": 1,                      // Poisson arrivals                   (default 1)
//     "gpu_memory": "16GiB",          // device memory; default: --gpu's
//     "weights_capacity": "300MiB",   // memory for weights; default: device memory - CUDA
//                                     //   context - the largest activation peak of the models
//     "exec_efficiency": 0.5,         // fraction of the roofline the kernels reach (default 0.5)
//     "load": {"fixed_ms": 0.1, "per_tensor_us": 2, "bandwidth_gb_per_s": 11.8,
//              "pinned": true, "pageable_factor": 0.5},
//     "models": [
//       {"model": "resnet50",         // one of the MODEL arguments (as written; "#2" for a repeat)
//        "rate": 20,                  // Poisson requests per second, or
//        "fps": 30, "phase_ms": 0,    // one request every 1/fps seconds from phase_ms, or
//        "arrivals_ms": [0, 5],       // explicit arrival times (sorted)
//        "batch": 1,                  // items per request (default 1)
//        "latency_ms": 100,           // latency target (required)
//        "exec_ms": 6.5}              // execution time of one request; default: roofline on --gpu
//     ]
//   }
//
// Unknown keys are errors (a misspelt key would otherwise be silently ignored).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.h"

namespace headroom {

struct WorkloadModel {
  std::string model;
  std::optional<double> rate;  // Poisson requests per second
  std::optional<double> fps;   // periodic
  double phase_s = 0;
  std::optional<std::vector<double>> arrivals_s;
  int64_t batch = 1;
  double latency_target_s = 0;
  std::optional<double> exec_s;
};

struct WorkloadLoad {
  std::optional<double> fixed_s, per_tensor_s, bandwidth_bytes_per_s, pageable_factor;
  std::optional<bool> pinned;
};

struct Workload {
  std::string origin;  // file name for messages
  double window_s = 0;
  uint64_t seed = 1;
  std::optional<int64_t> gpu_memory;
  std::optional<int64_t> weights_capacity;
  std::optional<double> exec_efficiency;
  WorkloadLoad load;
  std::vector<WorkloadModel> models;
};

// InputError (as a failed Result) naming the file and the field.
Result<Workload> parse_workload(std::string_view json_text, const std::string& origin);
Result<Workload> read_workload_file(const std::string& path);

}  // namespace headroom
