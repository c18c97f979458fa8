#include "schedule/transformer_blocks.h"

#include "schedule/grad_flow.h"

#include <cctype>
#include <map>
#include <optional>
#include <utility>

namespace headroom {
namespace {

// The outermost `PREFIX.<digits>` of a module path: ("transformer.h", 3) for
// "transformer.h.3.attn.c_attn". The index must be a whole dot-separated component.
std::optional<std::pair<std::string, long>> block_of(const std::string& name) {
  size_t start = 0;
  while (start < name.size()) {
    size_t dot = name.find('.', start);
    const size_t end = dot == std::string::npos ? name.size() : dot;
    if (start > 0 && end > start && end - start <= 9) {
      bool digits = true;
      for (size_t i = start; i < end; ++i) digits = digits && std::isdigit(static_cast<unsigned char>(name[i]));
      if (digits) return std::make_pair(name.substr(0, start - 1), std::stol(name.substr(start, end - start)));
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return std::nullopt;
}

}  // namespace

TransformerBlocks transformer_blocks(const Graph& g) {
  // Per container: each index's first and last model op.
  std::map<std::string, std::map<long, std::pair<OpId, OpId>>> found;
  for (const Op& op : g.ops) {
    if (op.stage != OpStage::Model) continue;
    auto b = block_of(op.name);
    if (!b) continue;
    auto [it, fresh] = found[b->first].try_emplace(b->second, op.id, op.id);
    if (!fresh) it->second.second = op.id;
  }
  const std::map<long, std::pair<OpId, OpId>>* best = nullptr;
  std::string container;
  for (const auto& [prefix, blocks] : found) {
    if (!best || blocks.size() > best->size()) {
      best = &blocks;
      container = prefix;
    }
  }
  TransformerBlocks r;
  if (!best || best->size() < 2) return r;
  const std::vector<bool> rg = forward_requires_grad(g);
  OpId previous_last = kNone;
  for (const auto& [index, range] : *best) {
    // Blocks that interleave (a shared module called from several) are no chain of segments.
    if (previous_last != kNone && range.first <= previous_last) return {};
    previous_last = range.second;
    if (checkpoint_gets_gradients(g, rg, range.first, range.second)) r.segments.push_back({range.first, range.second});
  }
  if (r.segments.size() < 2) return {};
  r.container = container;
  return r;
}

std::vector<CheckpointSegment> attention_cores(const Graph& g) {
  auto ends_with = [](const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  std::vector<CheckpointSegment> cores;
  const std::vector<bool> rg = forward_requires_grad(g);
  for (const CheckpointSegment& block : transformer_blocks(g).segments) {
    OpId scores = kNone, context = kNone;
    for (OpId id = block.first; id <= block.last; ++id) {
      const std::string& name = g.op(id).name;
      if (scores == kNone && ends_with(name, ".matmul_scores")) scores = id;
      if (scores != kNone && ends_with(name, ".matmul_context")) context = id;
    }
    if (scores == kNone || context == kNone || !checkpoint_gets_gradients(g, rg, scores, context)) return {};
    cores.push_back({scores, context});
  }
  return cores;
}

}  // namespace headroom
