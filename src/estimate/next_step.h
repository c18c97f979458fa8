// A next step when nothing fits: one change to the user's own run (what they would type),
// evaluated by the same estimate or plan as the run itself. Plain data; options/next_steps.h
// evaluates them, report/fit_report.h prints them.
#pragma once

#include <cstdint>
#include <string>

namespace headroom {

struct NextStep {
  std::string what;        // "mixed precision", "checkpointing", "4 GPUs, ZeRO-3"
  std::string change;      // what to type: "--precision amp-bf16", "headroom plan (checkpoint)"
  bool fits = false;
  int64_t device_total_bytes = 0;  // predicted device total (one rank's with a layout)
  std::string note;        // the price: "changes numerics", "+31% step time", "adapters only"
};

}  // namespace headroom
