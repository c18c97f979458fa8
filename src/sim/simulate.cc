#include "sim/simulate.h"

#include <algorithm>

#include "util/checked.h"
#include "util/error.h"

namespace headroom {

void check_program_size(const Program& program) {
  int64_t sum = 0;
  for (const Buffer& b : program.buffers) {
    HEADROOM_CHECK(b.bytes >= 0, "negative buffer size of " + b.name);
    sum = checked_add(sum, b.bytes, "the total size of the program's buffers");
  }
  if (sum > kMaxProgramBytes) {
    throw InputError("the model's buffers add up to " + std::to_string(sum) +
                     " bytes, over headroom's limit of 2^60 bytes (1 EiB); the sizes are not "
                     "realistic");
  }
}

SimResult simulate(const Program& program, HeapAlgorithm* algorithm) {
  check_program_size(program);
  SimResult r;
  CategoryBytes live{};
  int64_t total = 0;
  std::vector<Category> cat(program.buffers.size());
  for (size_t si = 0; si < program.steps.size(); ++si) {
    const Step& st = program.steps[si];
    IterationPeaks* it = nullptr;
    if (st.iteration > 0) {
      if (r.iterations.empty() || r.iterations.back().iteration != st.iteration) {
        r.iterations.push_back(IterationPeaks{st.iteration, {}, {}});
      }
      it = &r.iterations.back();
    }
    PeakPoint* phase_peak = nullptr;  // it->by_phase[st.phase], found at the step's first allocation
    for (int32_t ei = st.first_event; ei < st.end_event; ++ei) {
      const Event& e = program.events[static_cast<size_t>(ei)];
      const Buffer& b = program.buffers[static_cast<size_t>(e.buffer)];
      size_t c;
      switch (e.kind) {
        case Event::Kind::Alloc:
          cat[static_cast<size_t>(e.buffer)] = b.category;
          c = static_cast<size_t>(b.category);
          live[c] += b.bytes;
          total += b.bytes;
          if (algorithm) {
            algorithm->alloc(e.buffer, b.bytes);
            r.footprint_peak = std::max(r.footprint_peak, algorithm->footprint());
          }
          if (total > r.peak.bytes) {
            r.peak = {total, static_cast<int32_t>(si), ei};
            r.at_peak = live;
          }
          if (it) {
            if (total > it->peak.bytes) it->peak = {total, static_cast<int32_t>(si), ei};
            if (!phase_peak) phase_peak = &it->by_phase[st.phase];
            if (total > phase_peak->bytes) *phase_peak = {total, static_cast<int32_t>(si), ei};
          }
          break;
        case Event::Kind::Free:
          c = static_cast<size_t>(cat[static_cast<size_t>(e.buffer)]);
          live[c] -= b.bytes;
          total -= b.bytes;
          if (algorithm) algorithm->free(e.buffer);
          break;
        case Event::Kind::Retag: {
          size_t from = static_cast<size_t>(cat[static_cast<size_t>(e.buffer)]);
          live[from] -= b.bytes;
          cat[static_cast<size_t>(e.buffer)] = e.category;
          live[static_cast<size_t>(e.category)] += b.bytes;
          break;
        }
      }
    }
  }
  r.end_bytes = total;
  return r;
}

int64_t live_peak_bytes(const Program& program) {
  check_program_size(program);
  int64_t total = 0, peak = 0;
  for (const Event& e : program.events) {
    // A retag moves bytes between categories: the total does not change.
    if (e.kind == Event::Kind::Retag) continue;
    const int64_t bytes = program.buffers[static_cast<size_t>(e.buffer)].bytes;
    if (e.kind == Event::Kind::Alloc) {
      total += bytes;
      peak = std::max(peak, total);
    } else {
      total -= bytes;
    }
  }
  return peak;
}

std::vector<BufferId> live_after(const Program& program, int32_t event) {
  std::vector<int32_t> born(program.buffers.size(), -1);
  std::vector<bool> alive(program.buffers.size(), false);
  for (int32_t ei = 0; ei <= event && ei < static_cast<int32_t>(program.events.size()); ++ei) {
    const Event& e = program.events[static_cast<size_t>(ei)];
    if (e.kind == Event::Kind::Alloc) {
      alive[static_cast<size_t>(e.buffer)] = true;
      born[static_cast<size_t>(e.buffer)] = ei;
    } else if (e.kind == Event::Kind::Free) {
      alive[static_cast<size_t>(e.buffer)] = false;
    }
  }
  std::vector<BufferId> out;
  for (size_t b = 0; b < alive.size(); ++b) {
    if (alive[b]) out.push_back(static_cast<BufferId>(b));
  }
  std::sort(out.begin(), out.end(), [&](BufferId a, BufferId b) {
    return born[static_cast<size_t>(a)] < born[static_cast<size_t>(b)];
  });
  return out;
}

}  // namespace headroom
