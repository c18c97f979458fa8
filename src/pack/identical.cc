#include "pack/identical.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "util/checked.h"
#include "util/error.h"
#include "util/hash.h"

namespace headroom {
namespace {

struct Hashed {
  IdenticalMember at;
  std::vector<const TensorBytes*> tensors;
};

bool same_layer(const Hashed& a, const Hashed& b) {
  if (a.tensors.size() != b.tensors.size()) return false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    if (!same_bytes(*a.tensors[i], *b.tensors[i])) return false;
  }
  return true;
}

}  // namespace

std::string_view weight_check_name(WeightCheckStatus s) {
  switch (s) {
    case WeightCheckStatus::NoValues: return "no_values";
    case WeightCheckStatus::Absent: return "absent";
    case WeightCheckStatus::Partial: return "partial";
    case WeightCheckStatus::Complete: return "complete";
  }
  return "?";
}

std::string weight_check_text(const WeightCheck& c) {
  switch (c.status) {
    case WeightCheckStatus::NoValues:
      return "no weight values (built-in architecture): identical-weight check skipped";
    case WeightCheckStatus::Absent:
      return "weights not present: identical-weight check skipped (" + c.reason + ")";
    case WeightCheckStatus::Partial:
      return fmt::format("weights hashed for {} of {} layers; {} weights without bytes ({})", c.hashed_layers, c.layers,
                         c.missing_tensors, c.reason);
    case WeightCheckStatus::Complete:
      return fmt::format("weights hashed for all {} layers", c.layers);
  }
  return "";
}

IdenticalPlan find_identical_layers(const std::vector<ModelLayers>& models,
                                    const std::vector<const WeightData*>& weights) {
  HEADROOM_CHECK(weights.size() == models.size(), "one weight table per model");
  IdenticalPlan plan;
  // 1. Hash every layer whose weights all have bytes: tensor count, then per tensor its dtype,
  //    shape, size and content hash. Buckets keep members in (model, layer) order.
  std::map<uint64_t, std::vector<Hashed>> buckets;
  for (size_t mi = 0; mi < models.size(); ++mi) {
    const ModelLayers& m = models[mi];
    plan.unshared_bytes = checked_add(plan.unshared_bytes, m.weights_bytes, "weights of all models");
    WeightCheck c;
    c.layers = static_cast<int32_t>(m.layers.size());
    const WeightData* w = weights[mi];
    if (w == nullptr) {
      plan.checks.push_back(c);
      continue;
    }
    for (size_t li = 0; li < m.layers.size(); ++li) {
      const Layer& l = m.layers[li];
      Hashed h{{static_cast<int32_t>(mi), static_cast<int32_t>(li)}, {}};
      std::string why;
      int64_t bytes = 0;
      for (const std::string& name : l.weight_names) {
        auto it = w->tensors.find(name);
        if (it == w->tensors.end()) {
          ++c.missing_tensors;
          if (why.empty()) {
            auto miss = w->missing.find(name);
            why = miss != w->missing.end() ? "'" + name + "': " + miss->second : "'" + name + "': no initializer data";
          }
          continue;
        }
        h.tensors.push_back(&it->second);
        bytes += it->second.size;
      }
      if (why.empty() && bytes != l.bytes) {
        why = fmt::format("'{}': values hold {} bytes, the graph declares {}", l.name, bytes, l.bytes);
      }
      if (!why.empty()) {
        if (c.reason.empty()) c.reason = why;
        continue;
      }
      Hasher64 key;
      key.update_u64(h.tensors.size());
      for (const TensorBytes* t : h.tensors) {
        key.update_u64(static_cast<uint64_t>(t->dtype));
        key.update_u64(t->shape.size());
        for (int64_t d : t->shape) key.update_u64(static_cast<uint64_t>(d));
        key.update_u64(static_cast<uint64_t>(t->size));
        key.update_u64(t->hash);
      }
      buckets[key.digest()].push_back(std::move(h));
      ++c.hashed_layers;
    }
    c.status = c.hashed_layers == c.layers ? WeightCheckStatus::Complete
               : c.hashed_layers == 0      ? WeightCheckStatus::Absent
                                           : WeightCheckStatus::Partial;
    plan.checks.push_back(c);
  }

  // 2. Within a bucket, split into classes of confirmed-equal bytes (against each class's first
  //    member); classes of two or more are groups.
  for (auto& [key, members] : buckets) {
    if (members.size() < 2) continue;
    std::vector<std::vector<const Hashed*>> classes;
    for (const Hashed& h : members) {
      auto cls = std::find_if(classes.begin(), classes.end(),
                              [&](const std::vector<const Hashed*>& c) { return same_layer(*c.front(), h); });
      if (cls == classes.end()) classes.push_back({&h});
      else cls->push_back(&h);
    }
    for (const auto& cls : classes) {
      if (cls.size() < 2) continue;
      const Layer& first = models[static_cast<size_t>(cls.front()->at.model)].layers[static_cast<size_t>(cls.front()->at.layer)];
      if (first.bytes == 0) continue;
      IdenticalGroup g;
      g.kind = first.kind;
      g.layer_bytes = first.bytes;
      g.tensors = first.tensors;
      for (const Hashed* h : cls) g.members.push_back(h->at);
      g.bytes_saved = checked_mul(static_cast<int64_t>(cls.size() - 1), g.layer_bytes, "bytes saved");
      plan.groups.push_back(std::move(g));
    }
  }
  std::sort(plan.groups.begin(), plan.groups.end(), [](const IdenticalGroup& a, const IdenticalGroup& b) {
    if (a.bytes_saved != b.bytes_saved) return a.bytes_saved > b.bytes_saved;
    const IdenticalMember &x = a.members.front(), &y = b.members.front();
    return std::tie(x.model, x.layer) < std::tie(y.model, y.layer);
  });
  for (const IdenticalGroup& g : plan.groups) plan.saved_bytes = checked_add(plan.saved_bytes, g.bytes_saved, "bytes saved");
  plan.shared_bytes = plan.unshared_bytes - plan.saved_bytes;
  return plan;
}

}  // namespace headroom
