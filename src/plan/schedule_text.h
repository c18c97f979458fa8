// The text both checkpoint solvers print (`plan --chain`, `plan --graph`): the budget and its
// slots, the store-everything baseline, the makespan against it, the peak, and the schedule's
// tokens. One place, so the two reports read the same.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace headroom {

// Milliseconds with 6 significant digits ("27", "97.3756").
std::string ms_text(double v);
// "budget ... slots of ... bytes" and "store everything needs ...; no-checkpoint makespan ...".
std::string budget_lines(int64_t budget_bytes, int slots, int64_t unit_bytes, int64_t store_all_bytes,
                         double no_checkpoint_makespan_ms);
// "makespan M ms (+R ms recomputed, +P%)".
std::string makespan_line(double makespan_ms, double no_checkpoint_makespan_ms);
// "peak ... of <budget>" and "schedule (N ops):" with the tokens, 16 per line.
std::string peak_and_schedule_lines(int64_t peak_bytes, int64_t budget_bytes, const std::vector<std::string>& schedule);

}  // namespace headroom
