#include "cost/price_catalog.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cost/gpu_prices_json.h"  // generated from data/gpu_prices.json
#include "sim/device_catalog.h"
#include "util/error.h"

namespace headroom {

PriceCatalog PriceCatalog::from_json(std::string_view text, std::string_view origin) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("prices") || !doc["prices"].is_array()) {
    throw InputError(fmt::format("{}: not a price catalog (an object with a 'prices' array)", origin));
  }
  PriceCatalog c;
  for (size_t i = 0; i < doc["prices"].size(); ++i) {
    const nlohmann::json& e = doc["prices"][i];
    auto text_field = [&](const char* key) {
      if (!e.is_object() || !e.contains(key) || !e[key].is_string() || e[key].get<std::string>().empty()) {
        throw InputError(fmt::format("{}: price {} needs '{}' as text", origin, i, key));
      }
      return e[key].get<std::string>();
    };
    GpuPrice p;
    const GpuSpec* g = DeviceCatalog::builtin().try_find(text_field("gpu"));
    if (!g) throw InputError(fmt::format("{}: price {}: '{}' is not a catalog GPU", origin, i, e["gpu"].get<std::string>()));
    p.gpu = g->name;
    p.provider = text_field("provider");
    p.date = text_field("date");
    p.source = text_field("source");
    if (!e.contains("usd_per_hour") || !e["usd_per_hour"].is_number() || !(e["usd_per_hour"].get<double>() > 0) ||
        !std::isfinite(e["usd_per_hour"].get<double>())) {
      throw InputError(fmt::format("{}: price {} needs a positive 'usd_per_hour'", origin, i));
    }
    p.usd_per_hour = e["usd_per_hour"].get<double>();
    c.prices_.push_back(std::move(p));
  }
  return c;
}

const PriceCatalog& PriceCatalog::builtin() {
  static const PriceCatalog catalog = from_json(generated::kGpuPricesJson, "data/gpu_prices.json");
  return catalog;
}

std::optional<GpuPrice> PriceCatalog::cheapest(std::string_view gpu) const {
  std::optional<GpuPrice> best;
  for (const GpuPrice& p : prices_) {
    if (p.gpu != gpu) continue;
    if (!best || p.usd_per_hour < best->usd_per_hour || (p.usd_per_hour == best->usd_per_hour && p.provider < best->provider)) best = p;
  }
  return best;
}

std::map<std::string, double> parse_price_overrides(const std::vector<std::string>& texts) {
  std::map<std::string, double> out;
  for (const std::string& t : texts) {
    const size_t eq = t.rfind('=');
    if (eq == std::string::npos || eq == 0) throw InputError("--price '" + t + "' is not NAME=USD/h (e.g. A100-80GB=1.99)");
    const GpuSpec& g = DeviceCatalog::builtin().find(t.substr(0, eq));
    std::string value = t.substr(eq + 1);
    if (value.size() > 2 && value.compare(value.size() - 2, 2, "/h") == 0) value.resize(value.size() - 2);
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || end != value.c_str() + value.size() || !(v > 0) || !std::isfinite(v)) {
      throw InputError("--price " + t + ": the price must be a positive number of US dollars per hour");
    }
    if (!out.emplace(g.name, v).second) throw InputError("--price gives " + g.name + " twice");
  }
  return out;
}

std::optional<GpuPrice> price_for(std::string_view gpu, const std::map<std::string, double>& overrides) {
  auto it = overrides.find(std::string(gpu));
  if (it != overrides.end()) return GpuPrice{std::string(gpu), "--price", it->second, "", "the command line"};
  return PriceCatalog::builtin().cheapest(gpu);
}

double cost_usd(double usd_per_hour, double ms) { return usd_per_hour * ms / 3.6e6; }

double cost_per_units(double usd_per_hour, double units_per_s, double units) {
  HEADROOM_CHECK(units_per_s > 0, "a cost per unit needs a throughput");
  return usd_per_hour / 3600.0 / units_per_s * units;
}

}  // namespace headroom
