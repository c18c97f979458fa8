#include "schedule/micro_batch_fold.h"

#include <algorithm>
#include <vector>

#include "util/error.h"

namespace headroom {

namespace {

constexpr int32_t kRepeated = 3;  // the micro-batch written out again
constexpr int32_t kLast = kFoldedMicroBatches;

bool in_micro_batch(const Step& s) {
  return s.phase == Phase::Forward || s.phase == Phase::Backward;
}

// One iteration's micro-batch 3: its steps, its events and the buffers it allocates.
struct Repeat {
  int32_t first_step = 0, end_step = 0;
  int32_t first_event = 0, end_event = 0;
  BufferId first_buffer = 0, end_buffer = 0;
  int32_t buffers() const { return end_buffer - first_buffer; }
};

// Micro-batch 3 of `iteration`, where it is self-contained (the header's invariants).
std::optional<Repeat> find_repeat(const Program& p, int32_t iteration) {
  Repeat r;
  bool found = false;
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const Step& s = p.steps[i];
    if (s.iteration != iteration || !in_micro_batch(s) || s.micro_batch != kRepeated) continue;
    if (!found) {
      r.first_step = static_cast<int32_t>(i);
      found = true;
    } else if (r.end_step != static_cast<int32_t>(i)) {
      return std::nullopt;  // not one run of steps
    }
    r.end_step = static_cast<int32_t>(i) + 1;
  }
  if (!found) return std::nullopt;
  r.first_event = p.steps[static_cast<size_t>(r.first_step)].first_event;
  r.end_event = p.steps[static_cast<size_t>(r.end_step - 1)].end_event;
  // Its buffers: allocated and freed inside it, one block of ids.
  std::vector<BufferId> allocated;
  std::vector<bool> local(p.buffers.size(), false), freed(p.buffers.size(), false);
  for (int32_t e = r.first_event; e < r.end_event; ++e) {
    const Event& ev = p.events[static_cast<size_t>(e)];
    const auto b = static_cast<size_t>(ev.buffer);
    if (ev.kind == Event::Kind::Alloc) {
      allocated.push_back(ev.buffer);
      local[b] = true;
    } else if (ev.kind == Event::Kind::Free) {
      if (!local[b]) return std::nullopt;  // frees a buffer of an earlier micro-batch
      freed[b] = true;
    }
  }
  if (allocated.empty()) {
    r.first_buffer = r.end_buffer = 0;
    return r;
  }
  const auto [lo, hi] = std::minmax_element(allocated.begin(), allocated.end());
  if (static_cast<size_t>(*hi - *lo) + 1 != allocated.size()) return std::nullopt;
  for (BufferId b : allocated) {
    if (!freed[static_cast<size_t>(b)]) return std::nullopt;  // outlives the micro-batch
  }
  r.first_buffer = *lo;
  r.end_buffer = *hi + 1;
  return r;
}

}  // namespace

std::optional<Program> expand_micro_batches(const Program& four, int micro_batches) {
  HEADROOM_CHECK(micro_batches > kFoldedMicroBatches, "expand_micro_batches needs more micro-batches than were built");
  if (!four.transfers.empty()) return std::nullopt;
  int32_t iterations = 0;
  for (const Step& s : four.steps) iterations = std::max(iterations, s.iteration);
  std::vector<Repeat> repeats;
  for (int32_t it = 1; it <= iterations; ++it) {
    std::optional<Repeat> r = find_repeat(four, it);
    if (!r) return std::nullopt;
    repeats.push_back(*r);
  }
  const int32_t copies = micro_batches - kFoldedMicroBatches;

  // A buffer's id after expansion: every copy of an earlier iteration's block comes before it.
  std::vector<BufferId> new_id(four.buffers.size());
  {
    BufferId shift = 0;
    size_t next = 0;
    for (size_t b = 0; b < four.buffers.size(); ++b) {
      for (; next < repeats.size() && repeats[next].end_buffer <= static_cast<BufferId>(b); ++next) {
        shift += copies * repeats[next].buffers();
      }
      new_id[b] = static_cast<BufferId>(b) + shift;
    }
  }

  Program out;
  out.buffers.reserve(four.buffers.size() + static_cast<size_t>(copies) * repeats.size() * static_cast<size_t>(repeats.front().buffers()));
  {
    size_t next = 0;
    auto insert_copies = [&](size_t b) {
      for (; next < repeats.size() && repeats[next].end_buffer <= static_cast<BufferId>(b); ++next) {
        const Repeat& r = repeats[next];
        if (r.buffers() == 0) continue;
        for (int32_t c = 0; c < copies; ++c) {
          out.buffers.insert(out.buffers.end(), four.buffers.begin() + r.first_buffer, four.buffers.begin() + r.end_buffer);
        }
      }
    };
    for (size_t b = 0; b < four.buffers.size(); ++b) {
      insert_copies(b);
      out.buffers.push_back(four.buffers[b]);
    }
    insert_copies(four.buffers.size());
  }

  out.events.reserve(four.events.size() + static_cast<size_t>(copies) * repeats.size() * static_cast<size_t>(repeats.front().end_event - repeats.front().first_event));
  out.steps.reserve(four.steps.size() + static_cast<size_t>(copies) * repeats.size() * static_cast<size_t>(repeats.front().end_step - repeats.front().first_step));
  auto emit = [&](const Step& s, int32_t micro, const Repeat* copy_of, int32_t copy) {
    Step t = s;
    t.micro_batch = micro;
    t.first_event = static_cast<int32_t>(out.events.size());
    for (int32_t e = s.first_event; e < s.end_event; ++e) {
      Event ev = four.events[static_cast<size_t>(e)];
      const BufferId b = ev.buffer;
      ev.buffer = new_id[static_cast<size_t>(b)];
      if (copy_of && b >= copy_of->first_buffer && b < copy_of->end_buffer) ev.buffer += copy * copy_of->buffers();
      out.events.push_back(ev);
    }
    t.end_event = static_cast<int32_t>(out.events.size());
    out.steps.push_back(std::move(t));
  };
  size_t next = 0;
  for (size_t i = 0; i < four.steps.size(); ++i) {
    const Step& s = four.steps[i];
    const bool last = in_micro_batch(s) && s.iteration > 0 && s.micro_batch == kLast;
    emit(s, last ? micro_batches : s.micro_batch, nullptr, 0);
    if (next < repeats.size() && static_cast<int32_t>(i) + 1 == repeats[next].end_step) {
      const Repeat& r = repeats[next++];
      for (int32_t c = 1; c <= copies; ++c) {
        for (int32_t j = r.first_step; j < r.end_step; ++j) emit(four.steps[static_cast<size_t>(j)], kRepeated + c, &r, c);
      }
    }
  }
  out.host = four.host;
  out.context_use = four.context_use;
  return out;
}

}  // namespace headroom
