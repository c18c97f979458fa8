// fit: the largest batch (or sequence length) whose run fits a GPU with a margin, found by search
// on the simulator (the same program and caching-allocator replay as `estimate --gpu`): doubling
// from 1 until it does not fit, then bisection. Memory grows with the batch, so the first size
// that does not fit bounds the search. Reports the memory at the largest size that fits and at the
// next one.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "estimate/estimate.h"

namespace headroom {

enum class FitAxis : uint8_t { Batch, Seq };

struct FitOptions {
  EstimateOptions estimate;  // estimate.gpu is required
  FitAxis axis = FitAxis::Batch;
  int64_t limit = 1 << 20;   // search no further
};

struct FitPoint {
  int64_t value = 0;
  int64_t peak_bytes = 0;
  DeviceMemory device;
};

// Sizes just below the answer that are re-checked: allocator segment rounding makes "fits"
// non-monotonic near the limit (a batch can fail while a larger one fits), and a user should know.
inline constexpr int64_t kFitCheckBelow = 16;

struct FitResult {
  FitAxis axis = FitAxis::Batch;
  std::string gpu;
  int64_t max_value = 0;             // 0: does not fit even at the smallest size
  std::optional<FitPoint> at_max;    // the largest size that fits
  std::optional<FitPoint> next;      // max_value + 1 (or the smallest size, when nothing fits)
  bool limited = false;              // the search stopped at `limit`
  std::string limit_reason;          // why max_value + 1 has no point (the model rejects it)
  int evaluations = 0;
  // The smallest size within kFitCheckBelow below max_value that does not fit (0: none).
  int64_t fails_below = 0;
};

Result<FitResult> fit(const FitOptions& options);

// The search of fit() over any source of points (fit_all.h shares one sweep among GPUs). at(v)
// is the point at size v, or nullptr when the model rejects that size (invalid() then says
// why); with first, a rejection is the user's error and at() throws InputError.
// fits(v) is whether at(v) would give a point that fits (false for a rejected size); a source
// may answer it without the whole point when the answer is provably the same, and a size asked
// through both counts once. evaluations(): the distinct sizes asked for so far (fit() also
// counts each request of a rejected size, which it does not keep).
class FitPoints {
 public:
  virtual ~FitPoints() = default;
  virtual const FitPoint* at(int64_t v, bool first = false) = 0;
  virtual bool fits(int64_t v) {
    const FitPoint* p = at(v);
    return p && p->device.fits;
  }
  virtual const std::string& invalid() const = 0;
  virtual int evaluations() const = 0;
};
// REQUIRES: options valid (a GPU given, limit >= 1). Throws InputError from points.
FitResult fit_search(const FitOptions& options, FitPoints& points);

}  // namespace headroom
