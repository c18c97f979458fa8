#include "pack/swap_sim.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "util/checked.h"
#include "util/error.h"

namespace headroom {
namespace {

int64_t to_ns(double seconds) { return checked_round(seconds * 1e9, "a time in nanoseconds"); }

// splitmix64 finalizer: decorrelates the seeds of the per-model streams.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

int64_t nearest_rank(const std::vector<int64_t>& sorted, int p) {
  if (sorted.empty()) return 0;
  size_t n = sorted.size();
  size_t rank = (static_cast<size_t>(p) * n + 99) / 100;  // ceil(p/100 * n), at least 1
  return sorted[std::max<size_t>(rank, 1) - 1];
}

}  // namespace

std::string_view eviction_policy_name(EvictionPolicy p) {
  switch (p) {
    case EvictionPolicy::Lru: return "lru";
    case EvictionPolicy::Mru: return "mru";
    case EvictionPolicy::Belady: return "belady";
  }
  return "?";
}

int64_t LoadCostModel::nanoseconds(int64_t bytes, int64_t tensors) const {
  if (bytes == 0) return 0;
  HEADROOM_CHECK(bandwidth_bytes_per_s > 0, "load bandwidth must be positive");
  double rate = bandwidth_bytes_per_s * (pinned ? 1.0 : pageable_factor);
  return to_ns(fixed_s + static_cast<double>(tensors) * per_tensor_s + static_cast<double>(bytes) / rate);
}

double unit_interval(uint64_t draw) { return static_cast<double>(draw >> 11) * 0x1.0p-53; }

std::vector<int64_t> poisson_arrivals(double rate_per_s, int64_t window_ns, uint64_t seed, uint64_t stream) {
  std::vector<int64_t> out;
  if (!(rate_per_s > 0)) return out;
  std::mt19937_64 rng(mix(seed ^ mix(stream)));
  double t = 0;
  const double window_s = static_cast<double>(window_ns) * 1e-9;
  for (;;) {
    // Exponential gap by inversion; 1 - u is in (0, 1], so the log is finite.
    t += -std::log(1.0 - unit_interval(rng())) / rate_per_s;
    if (t >= window_s) break;
    int64_t ns = to_ns(t);
    if (ns >= window_ns) break;
    out.push_back(ns);
  }
  return out;
}

std::vector<int64_t> periodic_arrivals(double fps, int64_t window_ns, double phase_s) {
  std::vector<int64_t> out;
  if (!(fps > 0)) return out;
  for (int64_t i = 0;; ++i) {
    int64_t ns = to_ns(phase_s + static_cast<double>(i) / fps);
    if (ns >= window_ns) break;
    out.push_back(ns);
  }
  return out;
}

SwapResult simulate_swaps(const SwapConfig& c) {
  const size_t nm = c.models.size();
  const size_t nb = c.blocks.size();
  for (const SwapModel& m : c.models) {
    int64_t need = 0;
    for (int32_t b : m.blocks) {
      HEADROOM_CHECK(b >= 0 && static_cast<size_t>(b) < nb, "block index out of range");
      need = checked_add(need, c.blocks[static_cast<size_t>(b)].bytes, "model weights");
    }
    if (need > c.capacity_bytes) {
      throw InputError(fmt::format("model {} needs {} bytes of weights, more than the weight capacity of {} bytes",
                                   m.name, need, c.capacity_bytes));
    }
    HEADROOM_CHECK(std::is_sorted(m.arrivals_ns.begin(), m.arrivals_ns.end()), "arrivals must be sorted");
  }

  // Every request in service order: (arrival, model, index within the model).
  struct Request {
    int64_t arrival;
    int32_t model;
  };
  std::vector<Request> reqs;
  for (size_t m = 0; m < nm; ++m) {
    for (int64_t a : c.models[m].arrivals_ns) reqs.push_back({a, static_cast<int32_t>(m)});
  }
  std::stable_sort(reqs.begin(), reqs.end(), [](const Request& a, const Request& b) {
    return a.arrival != b.arrival ? a.arrival < b.arrival : a.model < b.model;
  });
  // next_use[i]: position of the next request of the same model after i (Belady's oracle).
  std::vector<size_t> next_use(reqs.size(), std::numeric_limits<size_t>::max());
  {
    std::vector<size_t> upcoming(nm, std::numeric_limits<size_t>::max());
    for (size_t i = reqs.size(); i-- > 0;) {
      next_use[i] = upcoming[static_cast<size_t>(reqs[i].model)];
      upcoming[static_cast<size_t>(reqs[i].model)] = i;
    }
  }
  // The next request position of each model, maintained as requests are served.
  std::vector<size_t> next_of(nm, std::numeric_limits<size_t>::max());
  for (size_t i = reqs.size(); i-- > 0;) next_of[static_cast<size_t>(reqs[i].model)] = i;

  std::vector<bool> resident(nm, false);
  std::vector<int32_t> block_users(nb, 0);  // resident models using each block
  int64_t resident_bytes = 0;
  std::vector<int64_t> last_use(nm, -1);    // start time of the model's last request
  std::vector<std::vector<int64_t>> latencies(nm);

  SwapResult r;
  r.models.resize(nm);
  for (size_t m = 0; m < nm; ++m) {
    r.models[m].name = c.models[m].name;
    r.models[m].requests = static_cast<int64_t>(c.models[m].arrivals_ns.size());
  }

  // Bytes of `m`'s blocks that no resident model holds.
  auto missing = [&](size_t m, int64_t* tensors) {
    int64_t bytes = 0;
    for (int32_t b : c.models[m].blocks) {
      if (block_users[static_cast<size_t>(b)] > 0) continue;
      bytes += c.blocks[static_cast<size_t>(b)].bytes;
      if (tensors) *tensors += c.blocks[static_cast<size_t>(b)].tensors;
    }
    return bytes;
  };
  auto set_resident = [&](size_t m, bool on) {
    resident[m] = on;
    for (int32_t b : c.models[m].blocks) {
      int32_t& users = block_users[static_cast<size_t>(b)];
      if (on && users++ == 0) resident_bytes += c.blocks[static_cast<size_t>(b)].bytes;
      if (!on && --users == 0) resident_bytes -= c.blocks[static_cast<size_t>(b)].bytes;
    }
  };

  int64_t gpu_free = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const size_t m = static_cast<size_t>(reqs[i].model);
    next_of[m] = next_use[i];
    SwapRequestTrace t;
    t.model = static_cast<int32_t>(m);
    t.arrival_ns = reqs[i].arrival;
    t.start_ns = std::max(gpu_free, reqs[i].arrival);
    if (!resident[m]) {
      // Count what must be loaded, then make m resident first: its blocks (shared ones included)
      // keep a user while others are evicted, so they are never freed and reloaded.
      int64_t tensors = 0;
      t.bytes_loaded = missing(m, &tensors);
      t.load_ns = c.load.nanoseconds(t.bytes_loaded, tensors);
      set_resident(m, true);
      while (resident_bytes > c.capacity_bytes) {
        size_t victim = nm;
        for (size_t v = 0; v < nm; ++v) {
          if (!resident[v] || v == m) continue;
          if (victim == nm) {
            victim = v;
            continue;
          }
          bool better = false;
          switch (c.policy) {
            case EvictionPolicy::Lru: better = last_use[v] < last_use[victim]; break;
            case EvictionPolicy::Mru: better = last_use[v] > last_use[victim]; break;
            case EvictionPolicy::Belady: better = next_of[v] > next_of[victim]; break;
          }
          if (better) victim = v;
        }
        HEADROOM_CHECK(victim < nm, "nothing to evict although the model fits alone");
        set_resident(victim, false);
        t.evicted.push_back(static_cast<int32_t>(victim));
        ++r.evictions;
      }
    }
    last_use[m] = t.start_ns;
    t.finish_ns = checked_add(checked_add(t.start_ns, t.load_ns, "a request's finish time"),
                              c.models[m].exec_ns, "a request's finish time");
    gpu_free = t.finish_ns;

    SwapModelStats& s = r.models[m];
    if (t.bytes_loaded > 0) ++s.loads;
    s.bytes_moved = checked_add(s.bytes_moved, t.bytes_loaded, "the bytes moved");
    s.load_wait_ns = checked_add(s.load_wait_ns, t.load_ns, "the load wait");
    int64_t latency = t.finish_ns - t.arrival_ns;
    latencies[m].push_back(latency);
    if (latency > c.models[m].deadline_ns) ++s.deadline_misses;
    if (t.finish_ns <= c.window_ns) ++s.finished_in_window;
    r.bytes_moved = checked_add(r.bytes_moved, t.bytes_loaded, "the bytes moved");
    r.load_wait_ns = checked_add(r.load_wait_ns, t.load_ns, "the load wait");
    r.exec_ns = checked_add(r.exec_ns, c.models[m].exec_ns, "the execution time");
    r.makespan_ns = t.finish_ns;
    r.trace.push_back(std::move(t));
  }
  for (size_t m = 0; m < nm; ++m) {
    std::vector<int64_t>& l = latencies[m];
    std::sort(l.begin(), l.end());
    SwapModelStats& s = r.models[m];
    s.p50_ns = nearest_rank(l, 50);
    s.p95_ns = nearest_rank(l, 95);
    s.p99_ns = nearest_rank(l, 99);
    s.max_ns = l.empty() ? 0 : l.back();
    s.throughput_rps = c.window_ns > 0 ? static_cast<double>(s.finished_in_window) / (static_cast<double>(c.window_ns) * 1e-9) : 0;
  }
  return r;
}

}  // namespace headroom
