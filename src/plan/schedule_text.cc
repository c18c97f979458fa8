#include "plan/schedule_text.h"

#include <sstream>

#include "util/format.h"

namespace headroom {

std::string ms_text(double v) {
  std::ostringstream os;
  os.precision(6);
  os << v;
  return os.str();
}

std::string budget_lines(int64_t budget_bytes, int slots, int64_t unit_bytes, int64_t store_all_bytes,
                         double no_checkpoint_makespan_ms) {
  std::ostringstream os;
  os << "budget " << human_bytes(budget_bytes) << " (" << with_commas(budget_bytes) << " bytes), " << slots
     << " slots of " << with_commas(unit_bytes) << " bytes\n";
  os << "store everything needs " << human_bytes(store_all_bytes) << " (" << with_commas(store_all_bytes)
     << " bytes); no-checkpoint makespan " << ms_text(no_checkpoint_makespan_ms) << " ms\n";
  return os.str();
}

std::string makespan_line(double makespan_ms, double no_checkpoint_makespan_ms) {
  std::ostringstream os;
  const double overhead = makespan_ms - no_checkpoint_makespan_ms;
  os << "makespan " << ms_text(makespan_ms) << " ms (+" << ms_text(overhead) << " ms recomputed";
  if (no_checkpoint_makespan_ms > 0) os << ", +" << ms_text(100.0 * overhead / no_checkpoint_makespan_ms) << "%";
  os << ")\n";
  return os.str();
}

std::string peak_and_schedule_lines(int64_t peak_bytes, int64_t budget_bytes, const std::vector<std::string>& schedule) {
  std::ostringstream os;
  os << "peak " << human_bytes(peak_bytes) << " (" << with_commas(peak_bytes) << " bytes) of " << human_bytes(budget_bytes)
     << "\n";
  os << "schedule (" << schedule.size() << " ops):";
  for (size_t k = 0; k < schedule.size(); ++k) os << (k % 16 == 0 ? "\n  " : " ") << schedule[k];
  os << "\n";
  return os.str();
}

}  // namespace headroom
