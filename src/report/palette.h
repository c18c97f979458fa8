// One colour per memory category, shared by the HTML report and the terminal bars. Okabe & Ito's
// palette ("Color Universal Design", 2008), which stays distinguishable under the common forms of
// colour blindness, plus two greys for the ninth category and for inputs. Black is kept for lines
// (capacity, reserved) so no area uses it.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "schedule/program.h"

namespace headroom {

struct Rgb {
  uint8_t r, g, b;
  std::string_view hex;  // "#0072B2"
};

inline const Rgb& category_color(Category c) {
  static constexpr std::array<Rgb, kCategoryCount> kColors = {{
      {0x00, 0x72, 0xB2, "#0072B2"},  // weights: blue
      {0xBB, 0xBB, 0xBB, "#BBBBBB"},  // inputs: light grey
      {0xE6, 0x9F, 0x00, "#E69F00"},  // gradients: orange
      {0xCC, 0x79, 0xA7, "#CC79A7"},  // optimizer state: reddish purple
      {0x00, 0x9E, 0x73, "#009E73"},  // saved activations: bluish green
      {0x56, 0xB4, 0xE9, "#56B4E9"},  // activations: sky blue
      {0xD5, 0x5E, 0x00, "#D55E00"},  // activation gradients: vermillion
      {0xF0, 0xE4, 0x42, "#F0E442"},  // temporaries: yellow
      {0x66, 0x66, 0x66, "#666666"},  // workspaces: dark grey
      {0x88, 0x22, 0x55, "#882255"},  // kv cache: wine
  }};
  return kColors[static_cast<size_t>(c)];
}

// One colour per series (the models of `headroom pack`): Okabe & Ito's palette without its yellow,
// which is too light for a line on white. Series past the seventh reuse the colours; the pack
// page then also varies the dash pattern (series / 7).
inline std::string_view series_color(size_t i) {
  static constexpr std::array<std::string_view, 7> kSeries = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                                              "#E69F00", "#56B4E9", "#000000"};
  return kSeries[i % kSeries.size()];
}
inline constexpr size_t kSeriesColors = 7;

// One colour per planning strategy (the plan page; plan/strategies.h has nine): the seven series
// colours, then Paul Tol's teal and olive ("muted" scheme), also safe for colour-blind readers.
inline std::string_view strategy_color(size_t i) {
  static constexpr std::array<std::string_view, 9> kStrategies = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00",
                                                                  "#56B4E9", "#882255", "#44AA99", "#999933"};
  return kStrategies[i % kStrategies.size()];
}

}  // namespace headroom
