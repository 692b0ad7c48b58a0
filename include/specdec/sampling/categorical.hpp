//! \file sampling/categorical.hpp
//! \brief Inverse-CDF sampling from non-negative weights that need not sum to 1.
//!
//! Algorithm (two-level inverse CDF, docs/design.md, 'sampling'): one pass computes the weight of each tile of
//! `sampling_tile` entries and the total Z; the target u * Z is located among the tile prefix sums,
//! and only that one tile is read again. Cost: one read of the row plus one tile, no normalisation,
//! no division; never materialises anything.
//! Why not the exponential race argmax_v w_v / E_v: it is order-independent, but needs one Philox
//! draw and one log per entry; on a CPU core that costs more than the extra tile read.
//!
//! **Determinism contract** (every backend that wants the same tokens as seq follows it exactly;
//! weights are doubles, every sum is a double sum):
//!  1. tile t covers entries [t * sampling_tile, min(V, (t + 1) * sampling_tile));
//!  2. within a tile, lane j (0 <= j < sampling_lanes) sums the entries whose offset from the tile
//!     start is j, j + 32, j + 64, ... in increasing order, starting from +0;
//!  3. the tile mass is the halving tree of the 32 lane sums: a_j = a_j + a_{j+16} (j < 16), then
//!     a_j + a_{j+8} (j < 8), ..., a_0 + a_1 (`detail::reduce_lanes`); it is the order of a
//!     SIMD register reduction and of a CUDA warp's `__shfl_down_sync` reduction by 16, 8, 4, 2, 1;
//!  4. Z and the tile prefix sums are sequential sums of the tile masses in tile order;
//!     goal = u * Z; the first tile t with prefix_t + mass_t > goal holds the token;
//!  5. inside that tile, strips of `sampling_strip` consecutive entries are taken in order; a
//!     strip's mass m is the sequential sum of its entries in index order (from +0); with r the
//!     prefix (starting at prefix_t), the first strip with r + m > goal holds the token, else r += m.
//!     Inside that strip s runs over the entries in index order (s += w_v, from +0) and the first v
//!     with r + s > goal is returned; it exists, because s ends at exactly m. Strip sums add in
//!     another order than rule 2, so no strip may cross: then the last entry of the tile with
//!     positive weight is returned (the tile has one, since mass_t > 0). The strips bound the
//!     sequential depth of the rescan to 32 + 2 * 64 additions: a GPU warp sums the 32 strips in
//!     parallel, one lane per strip;
//!  6. if no tile passes rule 4 (rounding put goal at or past Z), the last entry of the row with
//!     positive weight is returned (FlashInfer's sampling kernels fall back the same way).
//! Rules 2-3 make the one full pass vectorisable (SIMD lanes, GPU warps) with bit-identical sums;
//! the order-dependent rescan touches a single tile. Because +0 is an exact identity of these sums,
//! leaving out entries of weight 0 (a sparse row) does not change the token.
//! Guarantees: a token with zero weight is never returned; the result is always in [0, V) when the
//! status is ok; the token is non-decreasing in u.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <vector>

#include "specdec/config.hpp"
#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/distributions/row_status.hpp"

namespace specdec {

//! Entries per tile of the two-level inverse CDF (rule 1 of the determinism contract).
inline constexpr std::size_t sampling_tile = 2048;

//! Lane-strided partial sums per tile (rule 2 of the determinism contract).
inline constexpr std::size_t sampling_lanes = 32;

//! Entries per strip of the rescan (rule 5): a tile is sampling_tile / sampling_strip = 32 strips.
inline constexpr std::size_t sampling_strip = 64;

static_assert(sampling_tile % sampling_lanes == 0, "a tile holds whole rounds of lanes");
static_assert(sampling_tile / sampling_strip == sampling_lanes, "one strip per lane of a warp");

//! A sampled token and whether the row was usable. `token` is `no_token` unless status is ok.
struct sample_result {
  token_id token = no_token;                //!< the sampled token; `no_token` unless status is ok
  row_status status = row_status::no_mass;  //!< ok, or why the row could not be sampled
  double mass = 0.0;                        //!< the total weight Z of the row that was sampled
};

namespace detail {

//! The halving tree of rule 3 over the lane sums of one tile.
inline double reduce_lanes(std::array<double, sampling_lanes> lanes) noexcept {
  for (std::size_t width = sampling_lanes / 2; width >= 1; width /= 2)
    for (std::size_t j = 0; j < width; ++j) lanes[j] = lanes[j] + lanes[j + width];
  return lanes[0];
}

//! Whether a weight is usable: >= 0 (so not NaN) and finite. Host and device (the cuda backend).
//! Written without a short circuit, so that GPU loops over a row compile to straight-line code whose
//! loads can all be in flight at once (a branch per entry serialises them).
SPECDEC_HOST_DEVICE constexpr bool usable_weight(double w) noexcept {
  const bool non_negative = w >= 0.0, finite = w <= std::numeric_limits<double>::max();
  return non_negative & finite;
}

//! Tile masses of a row, with a small inline buffer (rows up to 256 tiles = 524288 entries do not
//! allocate).
class tile_masses {
 public:
  explicit tile_masses(std::size_t tiles) : size_(tiles) {
    if (tiles > inline_tiles) heap_.resize(tiles);
  }
  double* data() noexcept { return size_ > inline_tiles ? heap_.data() : inline_.data(); }
  std::span<const double> view() const noexcept { return {size_ > inline_tiles ? heap_.data() : inline_.data(), size_}; }
  std::size_t size() const noexcept { return size_; }

 private:
  static constexpr std::size_t inline_tiles = 256;
  std::size_t size_;
  std::array<double, inline_tiles> inline_{};
  std::vector<double> heap_;
};

//! The number of tiles of a row of `size` entries.
constexpr std::size_t tile_count(std::size_t size) noexcept { return (size + sampling_tile - 1) / sampling_tile; }

//! The rescans of rules 5-6 over a dense row given by `weight(v)`.
template <class WeightFn>
struct dense_tiles {
  WeightFn& weight;
  //! Rule 5: strip by strip, the first v in [begin, end) whose running sum crosses `goal`, or `end`.
  std::size_t first_crossing(std::size_t begin, std::size_t end, double prefix, double goal) const {
    double r = prefix;
    for (std::size_t s0 = begin; s0 < end; s0 += sampling_strip) {
      const std::size_t s1 = std::min(end, s0 + sampling_strip);
      double m = 0.0;
      for (std::size_t v = s0; v < s1; ++v) m += weight(v);
      if (r + m > goal) {
        double s = 0.0;
        for (std::size_t v = s0; v < s1; ++v) {
          s += weight(v);
          if (r + s > goal) return v;
        }
      }
      r += m;
    }
    return end;
  }
  //! The last v in [begin, end) with weight(v) > 0, or `end` if none.
  std::size_t last_positive(std::size_t begin, std::size_t end) const {
    for (std::size_t v = end; v > begin; --v)
      if (weight(v - 1) > 0.0) return v - 1;
    return end;
  }
};

//! Rules 4-6 of the contract: given the tile masses (rules 1-3) and whether every weight was usable,
//! locate u * Z; `tiles` re-reads only the tile that holds the token (`first_crossing`) and, in the
//! fallbacks, searches backwards (`last_positive`), as `dense_tiles` does. Shared by every CPU
//! backend and by the sparse sampler.
template <class Tiles>
sample_result locate_in_tiles(std::size_t size, std::span<const double> tile_mass, bool usable, const Tiles& tiles, double u) {
  double total = 0.0;
  for (const double m : tile_mass) total += m;
  if (!usable || !std::isfinite(total)) return {no_token, row_status::not_finite, total};
  if (!(total > 0.0)) return {no_token, row_status::no_mass, total};

  const double goal = u * total;
  double prefix = 0.0;
  for (std::size_t t = 0; t < tile_mass.size(); ++t) {
    if (prefix + tile_mass[t] > goal) {
      const std::size_t begin = t * sampling_tile, end = std::min(size, begin + sampling_tile);
      std::size_t v = tiles.first_crossing(begin, end, prefix, goal);
      if (v == end) v = tiles.last_positive(begin, end);  // rule 5
      return {static_cast<token_id>(v), row_status::ok, total};
    }
    prefix += tile_mass[t];
  }
  return {static_cast<token_id>(tiles.last_positive(0, size)), row_status::ok, total};  // rule 6
}

}  // namespace detail

//! Samples v with probability weight(v) / sum_w weight(w), v in [0, size), using the uniform u in [0, 1).
//! `weight(v)` must return a double; any NaN, infinite or negative weight makes the row `not_finite`,
//! a zero total makes it `no_mass`. Follows the determinism contract above.
template <class WeightFn>
sample_result sample_by_weights(std::size_t size, WeightFn&& weight, double u) {
  detail::tile_masses masses(detail::tile_count(size));
  bool usable = true;
  for (std::size_t t = 0; t < masses.size(); ++t) {
    const std::size_t begin = t * sampling_tile, end = std::min(size, begin + sampling_tile);
    std::array<double, sampling_lanes> lanes{};
    for (std::size_t base = begin; base < end; base += sampling_lanes) {
      const std::size_t n = std::min(sampling_lanes, end - base);
      for (std::size_t j = 0; j < n; ++j) {
        const double w = weight(base + j);
        usable = usable & detail::usable_weight(w);
        lanes[j] += w;
      }
    }
    masses.data()[t] = detail::reduce_lanes(lanes);
  }
  return detail::locate_in_tiles(size, masses.view(), usable, detail::dense_tiles<WeightFn>{weight}, u);
}

//! Samples from a probability (or weight) row with the uniform u in [0, 1).
template <class T>
sample_result sample_categorical(std::span<const T> weights, double u) {
  return sample_by_weights(
      weights.size(), [&](std::size_t v) { return static_cast<double>(weights[v]); }, u);
}

namespace detail {
//! The weights of a row with some entries left out (weight 0): `masked` is sorted and distinct. A
//! cursor makes the forward pass O(1) per entry; a step backwards (a rescan) searches again.
template <class T>
struct masked_weights {
  std::span<const T> row;
  std::span<const token_id> masked;
  mutable std::size_t cursor = 0, last = 0;
  double operator()(std::size_t v) const {
    if (v < last)
      cursor =
          static_cast<std::size_t>(std::lower_bound(masked.begin(), masked.end(), static_cast<token_id>(v)) - masked.begin());
    last = v;
    while (cursor < masked.size() && static_cast<std::size_t>(masked[cursor]) < v) ++cursor;
    return cursor < masked.size() && static_cast<std::size_t>(masked[cursor]) == v ? 0.0 : static_cast<double>(row[v]);
  }
};
}  // namespace detail

//! Samples from a row with the entries `masked` (sorted, distinct, in [0, size)) left out: the same
//! token, status and mass as sampling a copy of the row with those entries set to 0.
template <class T>
sample_result sample_masked(std::span<const T> weights, std::span<const token_id> masked, double u) {
  return sample_by_weights(weights.size(), detail::masked_weights<T>{weights, masked}, u);
}

namespace detail {
//! The rescans of rules 5-6 over a sparse row: entries (token, weight) in increasing token order.
struct sparse_tiles {
  std::span<const token_id> tokens;
  std::span<const double> weights;
  std::size_t first_at_least(std::size_t v) const {
    return static_cast<std::size_t>(std::lower_bound(tokens.begin(), tokens.end(), static_cast<token_id>(v)) - tokens.begin());
  }
  //! Rule 5 over the given entries only (an absent entry adds +0 to a strip and to its running sum).
  std::size_t first_crossing(std::size_t begin, std::size_t end, double prefix, double goal) const {
    double r = prefix;
    for (std::size_t i = first_at_least(begin); i < tokens.size() && static_cast<std::size_t>(tokens[i]) < end;) {
      const std::size_t strip = static_cast<std::size_t>(tokens[i]) / sampling_strip;
      std::size_t j = i;
      double m = 0.0;
      for (; j < tokens.size() && static_cast<std::size_t>(tokens[j]) / sampling_strip == strip; ++j) m += weights[j];
      if (r + m > goal) {
        double s = 0.0;
        for (std::size_t k = i; k < j; ++k) {
          s += weights[k];
          if (r + s > goal) return static_cast<std::size_t>(tokens[k]);
        }
      }
      r += m;
      i = j;
    }
    return end;
  }
  std::size_t last_positive(std::size_t begin, std::size_t end) const {
    for (std::size_t i = first_at_least(end); i > first_at_least(begin); --i)
      if (weights[i - 1] > 0.0) return static_cast<std::size_t>(tokens[i - 1]);
    return end;
  }
};
}  // namespace detail

//! `sample_by_weights` for a row of `size` entries that are 0 except at `tokens` (strictly
//! increasing, in [0, size)), where they are `weights`: the same token, status and mass as the dense
//! row, since the determinism contract adds +0 exactly (rules 2-5), at a cost proportional to the
//! number of entries given (plus the number of tiles).
//! \throws specdec::error if the spans differ in length or the tokens are not strictly increasing
//! in [0, size)
inline sample_result sample_sparse(std::size_t size, std::span<const token_id> tokens, std::span<const double> weights,
                                   double u) {
  SPECDEC_EXPECTS(tokens.size() == weights.size(), "sample_sparse: one weight per token");
  for (std::size_t i = 0; i < tokens.size(); ++i)
    SPECDEC_EXPECTS(tokens[i] >= 0 && static_cast<std::size_t>(tokens[i]) < size && (i == 0 || tokens[i - 1] < tokens[i]),
                    "sample_sparse: tokens must be strictly increasing in [0, size)");
  detail::tile_masses masses(detail::tile_count(size));
  std::fill(masses.data(), masses.data() + masses.size(), 0.0);
  bool usable = true;
  for (std::size_t i = 0; i < tokens.size();) {
    const std::size_t t = static_cast<std::size_t>(tokens[i]) / sampling_tile;
    std::array<double, sampling_lanes> lanes{};
    for (; i < tokens.size() && static_cast<std::size_t>(tokens[i]) / sampling_tile == t; ++i) {
      usable = usable & detail::usable_weight(weights[i]);
      lanes[(static_cast<std::size_t>(tokens[i]) - t * sampling_tile) % sampling_lanes] += weights[i];
    }
    masses.data()[t] = detail::reduce_lanes(lanes);
  }
  return detail::locate_in_tiles(size, masses.view(), usable, detail::sparse_tiles{tokens, weights}, u);
}

}  // namespace specdec
