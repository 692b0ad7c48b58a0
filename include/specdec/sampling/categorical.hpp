//! \file sampling/categorical.hpp
//! \brief Inverse-CDF sampling from non-negative weights that need not sum to 1.
//!
//! Algorithm (two-level inverse CDF, DESIGN.md §7): one pass computes the weight of each tile of
//! `sampling_tile` entries (double accumulation, fixed order) and the total Z; the target u * Z is
//! located among the tile prefix sums, and only that one tile is read again. Cost: one read of the
//! row plus one tile, no normalisation, no division; never materialises anything.
//! Why not the exponential race argmax_v w_v / E_v: it is order-independent, but needs one Philox
//! draw and one log per entry; on a CPU core that costs more than the extra tile read.
//! Guarantees: a token with zero weight is never returned; the result is always in [0, V) when the
//! status is ok; when rounding puts u * Z past the last crossing, the last token with positive
//! weight is returned (FlashInfer's fallback, peers.md §3).
#pragma once

#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include "specdec/core/token.hpp"
#include "specdec/distributions/row_status.hpp"

namespace specdec {

//! Entries per tile of the two-level inverse CDF. Part of the determinism contract: backends
//! that want bit-identical tokens with seq sum tiles of this size in index order.
inline constexpr std::size_t sampling_tile = 2048;

//! A sampled token and whether the row was usable. `token` is `no_token` unless status is ok.
struct sample_result {
  token_id token = no_token;
  row_status status = row_status::no_mass;
  double mass = 0.0;  //!< the total weight Z of the row that was sampled
};

//! Samples v with probability weight(v) / sum_w weight(w), v in [0, size), using the uniform u in [0, 1).
//! `weight(v)` must return a double; any NaN, infinite or negative weight makes the row `not_finite`,
//! a zero total makes it `no_mass`.
template <class WeightFn>
sample_result sample_by_weights(std::size_t size, WeightFn&& weight, double u) {
  const std::size_t tiles = (size + sampling_tile - 1) / sampling_tile;
  std::vector<double> tile_mass(tiles);
  double total = 0.0;
  bool usable = true;
  std::size_t last_positive = size;
  for (std::size_t t = 0; t < tiles; ++t) {
    const std::size_t end = std::min(size, (t + 1) * sampling_tile);
    double s = 0.0;
    for (std::size_t v = t * sampling_tile; v < end; ++v) {
      const double w = weight(v);
      usable = usable && (w >= 0.0) && std::isfinite(w);
      if (w > 0.0) last_positive = v;
      s += w;
    }
    tile_mass[t] = s;
    total += s;
  }
  if (!usable || !std::isfinite(total)) return {no_token, row_status::not_finite, total};
  if (!(total > 0.0)) return {no_token, row_status::no_mass, total};

  const double goal = u * total;
  double prefix = 0.0;
  for (std::size_t t = 0; t < tiles; ++t) {
    if (prefix + tile_mass[t] > goal) {
      const std::size_t end = std::min(size, (t + 1) * sampling_tile);
      double s = 0.0;  // the same additions, in the same order, as the first pass
      for (std::size_t v = t * sampling_tile; v < end; ++v) {
        s += weight(v);
        if (prefix + s > goal) return {static_cast<token_id>(v), row_status::ok, total};
      }
    }
    prefix += tile_mass[t];
  }
  return {static_cast<token_id>(last_positive), row_status::ok, total};
}

//! Samples from a probability (or weight) row with the uniform u in [0, 1).
template <class T>
sample_result sample_categorical(std::span<const T> weights, double u) {
  return sample_by_weights(
      weights.size(), [&](std::size_t v) { return static_cast<double>(weights[v]); }, u);
}

}  // namespace specdec
