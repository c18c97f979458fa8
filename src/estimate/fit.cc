#include "estimate/fit.h"

#include <algorithm>
#include <map>

namespace headroom {
namespace {

// Points from a whole estimate() at each size.
class Searcher final : public FitPoints {
 public:
  explicit Searcher(const FitOptions& o) : o_(o) {}

  // The point at size v, or nullptr when the model does not accept that size (a sequence past
  // its positions); the first size's error is the user's and is raised.
  const FitPoint* at(int64_t v, bool first = false) override {
    auto it = cache_.find(v);
    if (it != cache_.end()) return &it->second;
    EstimateOptions e = o_.estimate;
    if (o_.axis == FitAxis::Batch) e.batch = v;
    else e.seq = v;
    e.top_tensors = 0;
    Result<Estimate> r = estimate(e);
    ++evaluations_;
    if (!r.ok()) {
      if (first) throw InputError(r.error());
      invalid_ = r.error();
      return nullptr;
    }
    FitPoint p{v, r.value().peak_bytes, *r.value().device};
    return &cache_.emplace(v, p).first->second;
  }
  const std::string& invalid() const override { return invalid_; }
  int evaluations() const override { return evaluations_; }

 private:
  const FitOptions& o_;
  std::map<int64_t, FitPoint> cache_;
  int evaluations_ = 0;
  std::string invalid_;
};

}  // namespace

Result<FitResult> fit(const FitOptions& o) {
  return capture_input_errors([&]() -> FitResult {
    if (!o.estimate.gpu) throw InputError("fit needs a GPU: --gpu NAME or --gpu-memory SIZE");
    if (o.limit < 1) throw InputError("fit limit must be positive");
    Searcher s(o);
    return fit_search(o, s);
  });
}

FitResult fit_search(const FitOptions& o, FitPoints& s) {
  FitResult r;
  r.axis = o.axis;
  // A next-token loss needs two positions: sequence search starts at 2.
  const int64_t start = o.axis == FitAxis::Seq ? 2 : 1;
  const FitPoint* first = s.at(start, /*first=*/true);
  r.gpu = first->device.gpu;
  if (!first->device.fits) {
    r.next = *first;
    r.evaluations = s.evaluations();
    return r;
  }
  int64_t lo = start, hi = 0;  // lo fits; hi (when set) does not, or is not a valid size
  while (hi == 0) {
    int64_t v = lo * 2 > o.limit ? o.limit : lo * 2;
    if (v == lo) {
      r.limited = true;
      break;
    }
    if (s.fits(v)) lo = v;
    else hi = v;
  }
  while (hi != 0 && hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    if (s.fits(mid)) lo = mid;
    else hi = mid;
  }
  r.max_value = lo;
  r.at_max = *s.at(lo);
  if (!r.limited) {
    const FitPoint* next = s.at(lo + 1);
    if (next) r.next = *next;
    else r.limit_reason = s.invalid();
  }
  for (int64_t v = std::max(start, lo - kFitCheckBelow); v < lo; ++v) {
    if (!s.fits(v)) {
      r.fails_below = v;
      break;
    }
  }
  r.evaluations = s.evaluations();
  return r;
}

}  // namespace headroom
