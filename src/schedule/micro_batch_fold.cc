#include "schedule/micro_batch_fold.h"

#include <map>
#include <tuple>
#include <vector>

#include "util/error.h"

namespace headroom {

namespace {

constexpr int32_t kOutside = 0;  // the owner of a buffer allocated outside every action

bool action_step(const Step& s) {
  return (s.phase == Phase::Forward || s.phase == Phase::Backward) && s.iteration > 0 && s.micro_batch > 0;
}

// A run of steps: one action of the built order, or steps outside every action.
struct Segment {
  int32_t first_step = 0, end_step = 0;
  int32_t iteration = 0;
  int32_t action = -1;  // index in the built order; -1 outside the actions
};

}  // namespace

std::vector<PipelineAction> accumulation_order(int micro_batches) {
  std::vector<PipelineAction> order;
  for (int m = 1; m <= micro_batches; ++m) {
    order.push_back({true, m, 0});
    order.push_back({false, m, 0});
  }
  return order;
}

std::optional<Program> expand_micro_batches(const Program& built, const std::vector<PipelineAction>& built_order, int built_micro_batches,
                                            const std::vector<PipelineAction>& order, int micro_batches) {
  HEADROOM_CHECK(micro_batches > built_micro_batches && built_micro_batches > kFoldTemplateMicroBatch, "expand_micro_batches: nothing to fold");
  if (!built.transfers.empty()) return std::nullopt;
  // Two actions in a row of the same kind and micro-batch could not be told apart in the steps.
  for (size_t i = 1; i < built_order.size(); ++i) {
    if (built_order[i].forward == built_order[i - 1].forward && built_order[i].micro == built_order[i - 1].micro) return std::nullopt;
  }
  // The built program's steps as runs: each action of each iteration, in the built order.
  std::vector<Segment> segments;
  std::vector<int32_t> segment_of(built.steps.size());
  std::map<int32_t, std::vector<int32_t>> action_segments;  // iteration -> segment of each action
  for (size_t i = 0; i < built.steps.size(); ++i) {
    const Step& s = built.steps[i];
    const auto step = static_cast<int32_t>(i);
    if (action_step(s)) {
      const bool forward = s.phase == Phase::Forward;
      Segment* last = segments.empty() ? nullptr : &segments.back();
      const bool continues = last && last->action >= 0 && last->iteration == s.iteration && last->end_step == step &&
                             built_order[static_cast<size_t>(last->action)].forward == forward &&
                             built_order[static_cast<size_t>(last->action)].micro == s.micro_batch;
      if (!continues) {
        std::vector<int32_t>& seen = action_segments[s.iteration];
        if (seen.size() >= built_order.size()) return std::nullopt;
        const PipelineAction& a = built_order[seen.size()];
        if (a.forward != forward || a.micro != s.micro_batch) return std::nullopt;
        // An iteration's actions follow each other with nothing outside them in between.
        if (!seen.empty() && (!last || last->action != static_cast<int32_t>(seen.size()) - 1 || last->iteration != s.iteration)) return std::nullopt;
        seen.push_back(static_cast<int32_t>(segments.size()));
        segments.push_back({step, step, s.iteration, static_cast<int32_t>(seen.size()) - 1});
      }
    } else if (segments.empty() || segments.back().action >= 0) {
      segments.push_back({step, step, s.iteration, -1});
    }
    segments.back().end_step = step + 1;
    segment_of[i] = static_cast<int32_t>(segments.size()) - 1;
  }
  for (const auto& [iteration, seen] : action_segments) {
    if (seen.size() != built_order.size()) return std::nullopt;
  }
  std::map<std::tuple<bool, int, int>, int32_t> built_action;  // (forward, micro-batch, chunk) -> index
  for (size_t i = 0; i < built_order.size(); ++i) {
    built_action[{built_order[i].forward, built_order[i].micro, built_order[i].chunk}] = static_cast<int32_t>(i);
  }

  // Who allocated each buffer (a micro-batch, or kOutside), whether an action frees it, and the
  // ids each segment allocates.
  std::vector<int32_t> owner(built.buffers.size(), kOutside), owner_iteration(built.buffers.size(), 0);
  std::vector<bool> freed_by_action(built.buffers.size(), false);
  std::vector<BufferId> first_id(segments.size(), 0), end_id(segments.size(), 0);
  std::vector<int32_t> allocated(segments.size(), 0);
  for (size_t i = 0; i < built.steps.size(); ++i) {
    const auto j = static_cast<size_t>(segment_of[i]);
    const Segment& g = segments[j];
    for (int32_t e = built.steps[i].first_event; e < built.steps[i].end_event; ++e) {
      const Event& ev = built.events[static_cast<size_t>(e)];
      const auto b = static_cast<size_t>(ev.buffer);
      if (ev.kind == Event::Kind::Alloc) {
        owner[b] = g.action >= 0 ? built_order[static_cast<size_t>(g.action)].micro : kOutside;
        owner_iteration[b] = g.iteration;
        first_id[j] = allocated[j] > 0 ? std::min(first_id[j], ev.buffer) : ev.buffer;
        end_id[j] = allocated[j] > 0 ? std::max(end_id[j], ev.buffer + 1) : ev.buffer + 1;
        ++allocated[j];
      } else if (ev.kind == Event::Kind::Free && g.action >= 0) {
        freed_by_action[b] = true;
      }
    }
  }
  // The buffers each segment allocates are one block of ids, the blocks in the segments' order:
  // the interpreter numbers buffers as it makes them, so the result numbers each segment's block
  // where it writes the segment.
  {
    BufferId next = 0;
    for (size_t j = 0; j < segments.size(); ++j) {
      if (allocated[j] == 0) continue;
      if (first_id[j] != next || end_id[j] - first_id[j] != allocated[j]) return std::nullopt;
      next = end_id[j];
    }
    if (static_cast<size_t>(next) != built.buffers.size()) return std::nullopt;
  }
  // The micro-batch of the result a built micro-batch stands for alone (-1: a middle one, which
  // stands for many or none), and the built micro-batch that stands for one of the result.
  auto stands_for = [&](int32_t built_micro) -> int32_t {
    if (built_micro == kOutside || built_micro < kFoldTemplateMicroBatch) return built_micro;
    return built_micro == built_micro_batches ? micro_batches : -1;
  };
  auto template_of = [&](int32_t micro) -> int32_t {
    if (micro < kFoldTemplateMicroBatch) return micro;
    return micro == micro_batches ? built_micro_batches : kFoldTemplateMicroBatch;
  };

  Program out;
  // A buffer of the result: a built buffer and the micro-batch of the result it belongs to (0
  // for a buffer outside the actions). A segment's buffers are one block of ids, written as one
  // block for each micro-batch it is written for: the block's first id there, -1 before.
  std::vector<int32_t> segment_of_buffer(built.buffers.size(), 0);
  for (size_t j = 0; j < segments.size(); ++j) {
    for (BufferId b = first_id[j]; b < end_id[j]; ++b) segment_of_buffer[static_cast<size_t>(b)] = static_cast<int32_t>(j);
  }
  const size_t instances = static_cast<size_t>(micro_batches) + 1;
  std::vector<BufferId> block_at(segments.size() * instances, -1);
  auto instance = [&](size_t b, int32_t micro) -> BufferId {
    const auto j = static_cast<size_t>(segment_of_buffer[b]);
    const BufferId first = block_at[j * instances + static_cast<size_t>(micro)];
    return first < 0 ? -1 : first + (static_cast<BufferId>(b) - first_id[j]);
  };
  // One event of the built program written for micro-batch `micro` (0: outside the actions),
  // whose actions are those of built micro-batch `from`.
  auto write_event = [&](Event ev, int32_t iteration, int32_t from, int32_t micro) -> bool {
    const auto b = static_cast<size_t>(ev.buffer);
    int32_t belongs = 0;
    if (owner[b] != kOutside && owner[b] == from && owner_iteration[b] == iteration) {
      belongs = micro;
    } else {
      belongs = stands_for(owner[b]);
      if (belongs < 0) return false;  // another micro-batch's: which copy is ambiguous
      // Micro-batch 3's actions stand for many: another micro-batch's buffer is the same one for
      // each of them only if no action frees it (the gradients).
      if (from == kFoldTemplateMicroBatch && (ev.kind == Event::Kind::Free || freed_by_action[b])) return false;
    }
    const BufferId id = instance(b, belongs);
    if (id < 0) return false;
    ev.buffer = id;
    out.events.push_back(ev);
    return true;
  };
  // Numbers the buffers segment j allocates, written for micro-batch `micro` (0 outside).
  auto number_buffers = [&](size_t j, int32_t micro) -> bool {
    if (end_id[j] == first_id[j]) return true;  // allocates nothing
    BufferId& first = block_at[j * instances + static_cast<size_t>(micro)];
    if (first >= 0) return false;  // written twice for one micro-batch
    first = static_cast<BufferId>(out.buffers.size());
    out.buffers.insert(out.buffers.end(), built.buffers.begin() + first_id[j], built.buffers.begin() + end_id[j]);
    return true;
  };
  auto write_step = [&](const Step& s, int32_t from, int32_t micro) -> bool {
    Step t = s;
    if (from != kOutside) t.micro_batch = micro;
    t.first_event = static_cast<int32_t>(out.events.size());
    for (int32_t e = s.first_event; e < s.end_event; ++e) {
      if (!write_event(built.events[static_cast<size_t>(e)], s.iteration, from, micro)) return false;
    }
    t.end_event = static_cast<int32_t>(out.events.size());
    out.steps.push_back(std::move(t));
    return true;
  };

  // Room for the result, grown from the built program by the ratio of actions (approximate).
  const size_t actions_built = std::max<size_t>(1, built_order.size()), actions_out = order.size();
  auto scaled = [&](size_t n) { return n + n / actions_built * (actions_out - std::min(actions_out, actions_built)); };
  out.steps.reserve(scaled(built.steps.size()));
  out.events.reserve(scaled(built.events.size()));
  out.buffers.reserve(scaled(built.buffers.size()));
  for (size_t j = 0; j < segments.size(); ++j) {
    const Segment& g = segments[j];
    if (g.action < 0) {
      if (!number_buffers(j, kOutside)) return std::nullopt;
      for (int32_t i = g.first_step; i < g.end_step; ++i) {
        if (!write_step(built.steps[static_cast<size_t>(i)], kOutside, kOutside)) return std::nullopt;
      }
      continue;
    }
    if (g.action != 0) continue;  // written with the iteration's first action
    const std::vector<int32_t>& actions = action_segments.at(g.iteration);
    for (const PipelineAction& a : order) {
      const int32_t from = template_of(a.micro);
      auto found = built_action.find({a.forward, from, a.chunk});
      if (found == built_action.end()) return std::nullopt;
      const auto src_index = static_cast<size_t>(actions[static_cast<size_t>(found->second)]);
      const Segment& src = segments[src_index];
      if (!number_buffers(src_index, a.micro)) return std::nullopt;
      for (int32_t i = src.first_step; i < src.end_step; ++i) {
        if (!write_step(built.steps[static_cast<size_t>(i)], from, a.micro)) return std::nullopt;
      }
    }
  }
  out.host = built.host;
  out.context_use = built.context_use;
  out.cuda_reductions = built.cuda_reductions;
  return out;
}

}  // namespace headroom
