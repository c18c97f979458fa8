// Prices: on-demand US dollars per GPU-hour for catalog GPUs, per provider, with date and source
// (data/gpu_prices.json, compiled in), the user's `--price NAME=USD/h` overrides, and the cost
// arithmetic of a run: price x time. Costs are per unit of work at a throughput: per 1k samples
// or per 1M tokens.
//
// Invariants: every price is positive and finite; a GPU named in the catalog or in an override
// is a DeviceCatalog GPU (its canonical name); the cheapest listing wins, ties broken by provider
// name, so the choice is deterministic.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace headroom {

struct GpuPrice {
  std::string gpu;       // canonical catalog name
  std::string provider;  // "lambda", ...; "--price" for an override
  double usd_per_hour = 0;
  std::string date;
  std::string source;
};

class PriceCatalog {
 public:
  static const PriceCatalog& builtin();
  // InputError naming `origin` on malformed JSON, an unknown GPU or a non-positive price.
  static PriceCatalog from_json(std::string_view text, std::string_view origin);
  const std::vector<GpuPrice>& prices() const { return prices_; }
  // The cheapest listing of `gpu` (canonical name), nullopt when none.
  std::optional<GpuPrice> cheapest(std::string_view gpu) const;

 private:
  std::vector<GpuPrice> prices_;
};

// "A100-80GB=1.99" (repeatable): GPU (any catalog name or alias) -> USD per hour, keyed by the
// canonical name. InputError naming the text on a malformed pair, an unknown GPU, a price that is
// not a positive number, or the same GPU twice.
std::map<std::string, double> parse_price_overrides(const std::vector<std::string>& texts);

// The price a run on `gpu` is charged: the override, else the catalog's cheapest listing.
std::optional<GpuPrice> price_for(std::string_view gpu, const std::map<std::string, double>& overrides);

// Dollars for `ms` milliseconds at `usd_per_hour`.
double cost_usd(double usd_per_hour, double ms);
// Dollars per `units` units of work (samples or tokens) at `units_per_s`; REQUIRES units_per_s > 0.
double cost_per_units(double usd_per_hour, double units_per_s, double units);

}  // namespace headroom
