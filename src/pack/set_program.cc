#include "pack/set_program.h"

#include <algorithm>
#include <map>

#include "util/error.h"

namespace headroom {
namespace {

// Buffers a program never frees.
std::vector<bool> never_freed(const Program& p) {
  std::vector<bool> kept(p.buffers.size(), true);
  for (const Event& e : p.events)
    if (e.kind == Event::Kind::Free) kept[static_cast<size_t>(e.buffer)] = false;
  return kept;
}

bool setup_step(const Step& s) { return s.phase == Phase::Setup; }

}  // namespace

Program resident_set_program(const std::vector<SetMember>& members) {
  Program q;
  // remap[m][b]: b's id in q, or kNone when its events are dropped (a borrowed weight; a second
  // cuBLAS handle workspace, which maps to the first).
  std::vector<std::vector<BufferId>> remap(members.size());
  std::vector<std::vector<bool>> dropped(members.size());
  std::map<std::string, BufferId> handle_workspace;  // by name: one per handle in the process
  for (size_t m = 0; m < members.size(); ++m) {
    const Program& p = *members[m].program;
    HEADROOM_CHECK(p.transfers.empty() && p.host.empty(), "a set member's program is a plain inference run");
    // One process: its CUDA context holds what any member loaded.
    q.context_use.forward = q.context_use.forward || p.context_use.forward;
    q.context_use.convolution = q.context_use.convolution || p.context_use.convolution;
    const auto reductions_at = static_cast<int32_t>(q.cuda_reductions.size());
    q.cuda_reductions.insert(q.cuda_reductions.end(), p.cuda_reductions.begin(), p.cuda_reductions.end());
    HEADROOM_CHECK(!p.steps.empty() && setup_step(p.steps.front()), "a program starts with its setup");
    const std::vector<bool> kept = never_freed(p);
    remap[m].assign(p.buffers.size(), kNone);
    dropped[m].assign(p.buffers.size(), false);
    for (size_t b = 0; b < p.buffers.size(); ++b) {
      const Buffer& buf = p.buffers[b];
      if (buf.category == Category::Weights && kept[b] && members[m].borrowed.count(buf.name) > 0) {
        dropped[m][b] = true;
        continue;
      }
      if (buf.category == Category::Workspaces && kept[b]) {
        auto it = handle_workspace.find(buf.name);
        if (it != handle_workspace.end() && q.buffers[static_cast<size_t>(it->second)].bytes >= buf.bytes) {
          dropped[m][b] = true;
          remap[m][b] = it->second;
          continue;
        }
        handle_workspace[buf.name] = static_cast<BufferId>(q.buffers.size());
      }
      remap[m][b] = static_cast<BufferId>(q.buffers.size());
      q.buffers.push_back(buf);
      if (buf.reduction >= 0) q.buffers.back().reduction += reductions_at;
    }
  }

  auto emit = [&](size_t m, const Event& e) {
    if (dropped[m][static_cast<size_t>(e.buffer)]) return;
    Event c = e;
    c.buffer = remap[m][static_cast<size_t>(e.buffer)];
    q.events.push_back(c);
  };
  auto open_step = [&](Step s, const std::string& label) {
    s.label = label;
    s.first_event = static_cast<int32_t>(q.events.size());
    q.steps.push_back(s);
  };
  auto close_step = [&]() { q.steps.back().end_event = static_cast<int32_t>(q.events.size()); };
  auto is_weight = [&](size_t m, BufferId b) {
    return members[m].program->buffers[static_cast<size_t>(b)].category == Category::Weights;
  };

  // Setup: the first member's as it is, then the other members' weights.
  open_step(members.front().program->steps.front(), "weights of the set and " + members.front().label + "'s inputs");
  for (size_t m = 0; m < members.size(); ++m) {
    const Program& p = *members[m].program;
    const Step& s = p.steps.front();
    for (int32_t k = s.first_event; k < s.end_event; ++k) {
      const Event& e = p.events[static_cast<size_t>(k)];
      if (m == 0 || is_weight(m, e.buffer)) emit(m, e);
    }
  }
  close_step();

  // One request per member, in set order.
  for (size_t m = 0; m < members.size(); ++m) {
    const Program& p = *members[m].program;
    const std::string& label = members[m].label;
    if (m > 0) {
      const Step& s = p.steps.front();
      open_step(s, label + ": inputs");
      for (int32_t k = s.first_event; k < s.end_event; ++k) {
        const Event& e = p.events[static_cast<size_t>(k)];
        if (!is_weight(m, e.buffer)) emit(m, e);
      }
      close_step();
    }
    std::vector<bool> live(p.buffers.size(), false);
    for (size_t si = 0; si < p.steps.size(); ++si) {
      const Step& s = p.steps[si];
      if (si > 0) open_step(s, label + ": " + s.label);
      for (int32_t k = s.first_event; k < s.end_event; ++k) {
        const Event& e = p.events[static_cast<size_t>(k)];
        if (e.kind == Event::Kind::Alloc) live[static_cast<size_t>(e.buffer)] = true;
        if (e.kind == Event::Kind::Free) live[static_cast<size_t>(e.buffer)] = false;
        if (si > 0) emit(m, e);
      }
      if (si > 0) close_step();
    }
    // The request ends: what it left allocated besides the model's weights and the handle's
    // workspace (inputs, outputs) is freed before the next request.
    Step done = p.steps.back();
    done.op = kNone;
    open_step(done, label + ": request done");
    for (size_t b = 0; b < p.buffers.size(); ++b) {
      const Category c = p.buffers[b].category;
      if (!live[b] || dropped[m][b] || c == Category::Weights || c == Category::Workspaces) continue;
      q.events.push_back({Event::Kind::Free, c, remap[m][b]});
    }
    close_step();
  }
  validate_program(q);
  return q;
}

std::vector<std::set<std::string>> borrowed_weights(const std::vector<ModelLayers>& layers,
                                                    const std::vector<SharedPool>& pools,
                                                    const std::vector<int32_t>& subset) {
  std::vector<std::set<std::string>> borrowed(subset.size());
  for (const SharedPool& pool : pools) {
    for (size_t k = 1; k < pool.members.size(); ++k) {
      const IdenticalMember& mb = pool.members[k];
      const auto pos = static_cast<size_t>(std::find(subset.begin(), subset.end(), mb.model) - subset.begin());
      HEADROOM_CHECK(pos < subset.size(), "a pool member outside the set");
      const Layer& l = layers[static_cast<size_t>(mb.model)].layers[static_cast<size_t>(mb.layer)];
      borrowed[pos].insert(l.weight_names.begin(), l.weight_names.end());
    }
  }
  return borrowed;
}

}  // namespace headroom
