#include "plan/rotor_regions.h"

#include <algorithm>

namespace headroom {

std::vector<SegmentRange> rotor_regions(const std::vector<ChainOp>& schedule) {
  std::vector<SegmentRange> out;
  bool open = false;
  SegmentRange cur;
  for (const ChainOp& op : schedule) {
    if (open && op.kind == ChainOpKind::Fn && op.stage == cur.last + 1) {
      cur.last = op.stage;
      continue;
    }
    if (open) out.push_back(cur);
    open = op.kind == ChainOpKind::Fck;
    if (open) cur = {op.stage, op.stage};
  }
  if (open) out.push_back(cur);
  std::sort(out.begin(), out.end(), [](const SegmentRange& a, const SegmentRange& b) {
    return a.first != b.first ? a.first < b.first : a.last > b.last;
  });
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace headroom
