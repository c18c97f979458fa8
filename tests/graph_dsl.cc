#include "graph_dsl.h"

#include <map>
#include <sstream>
#include <stdexcept>

#include "sim/simulate.h"

namespace headroom::testing {

std::string random_alloc_script(uint64_t seed) {
  constexpr int64_t KiB = 1024, MiB = 1024 * KiB;
  uint64_t state = seed;
  auto next = [&state]() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 33;
  };
  std::string script;
  std::vector<int> live;
  for (int i = 0; i < 300; ++i) {
    if (!live.empty() && next() % 3 == 0) {
      size_t k = next() % live.size();
      script += " -b" + std::to_string(live[k]);
      live.erase(live.begin() + static_cast<long>(k));
    } else {
      const int64_t sizes[] = {0, 300, 4096, 700 * KiB, 3 * MiB, 9 * MiB, 15 * MiB, 33 * MiB};
      int64_t bytes = sizes[next() % 8] + static_cast<int64_t>(next() % 4096);
      script += " +b" + std::to_string(i) + ":" + std::to_string(bytes);
      live.push_back(i);
    }
  }
  return script;
}

Program program_from_script(const std::string& script) {
  Program p;
  std::map<std::string, BufferId> ids;
  std::istringstream in(script);
  std::string tok;
  p.steps.push_back(Step{Phase::Forward, 1, 1, kNone, "step0", 0, 0, false, {}});
  while (in >> tok) {
    if (tok == "|") {
      p.steps.back().end_event = static_cast<int32_t>(p.events.size());
      p.steps.push_back(Step{Phase::Forward, 1, 1, kNone, "step" + std::to_string(p.steps.size()),
                             static_cast<int32_t>(p.events.size()), 0, false, {}});
      continue;
    }
    if (tok[0] == '+') {
      size_t colon = tok.find(':');
      std::string name = tok.substr(1, colon - 1);
      int64_t bytes = std::stoll(tok.substr(colon + 1));
      p.buffers.push_back(Buffer{bytes, Category::Activations, name, kNone});
      ids[name] = static_cast<BufferId>(p.buffers.size()) - 1;
      p.events.push_back({Event::Kind::Alloc, Category::Activations, ids[name]});
    } else if (tok[0] == '-') {
      p.events.push_back({Event::Kind::Free, Category::Activations, ids.at(tok.substr(1))});
    } else {
      throw std::invalid_argument("bad script token " + tok);
    }
  }
  p.steps.back().end_event = static_cast<int32_t>(p.events.size());
  return p;
}

std::string check_oracles(const Program& p) {
  try {
    validate_program(p);
  } catch (const std::exception& e) {
    return e.what();
  }
  SimResult r = simulate(p);
  int64_t live = 0;
  for (size_t i = 0; i < p.events.size(); ++i) {
    const Event& e = p.events[i];
    if (e.kind == Event::Kind::Alloc) live += p.buffers[static_cast<size_t>(e.buffer)].bytes;
    if (e.kind == Event::Kind::Free) live -= p.buffers[static_cast<size_t>(e.buffer)].bytes;
    if (live > r.peak.bytes) return "live bytes exceed the reported peak at event " + std::to_string(i);
    if (live < 0) return "negative live bytes at event " + std::to_string(i);
  }
  if (live != r.end_bytes) return "end bytes disagree";
  return "";
}

}  // namespace headroom::testing
