//! \file backend/simd/warp.hpp
//! \brief Top-k, top-p and min-p filters and the whole warp (temperature, filters, renormalisation)
//! on the simd backend, without sorting the vocabulary. Same definitions, order and tie rules as
//! distributions/warp.hpp.
//!
//! - top-k: the k-th largest probability by `kth_largest` (a threshold filter, backend/simd/select.hpp);
//!   exact, the same surviving set as seq.
//! - top-p: the threshold is the value v with S(> v) < top_p * mass <= S(>= v), S(>= v) being the
//!   mass of the entries >= v. A radix search on the bit patterns (non-negative floats order like
//!   their bits) finds it: a 1024-bucket histogram of masses (double) over the row's positive entries,
//!   a scan from the top bucket to the one where the mass reaches the goal, then the same on that
//!   bucket's entries with the next 10 bits, until at most `top_p_sort_limit` entries remain; those
//!   are sorted and cumulated. One histogram pass and one gather pass over the row in the usual case
//!   (after a top-k the surviving positives fit a single bucket level). The survivors equal seq's
//!   unless the cumulative mass at the boundary is within rounding (~1e-15 relative) of the goal
//!   (the sums add in another order). A pivot search (three thresholds per pass, 8-10 passes at
//!   V = 128256) took 460 us against ~185 us for this search (bench/README.md).
//! - min-p: exact (comparison with the smallest float >= min_p * max).
//! - renormalisation: a lane-order double sum, then p * (1 / sum) in double rounded to T, as seq: the
//!   probabilities equal seq's up to the last bits of the sum: float rows at most 1 ulp apart
//!   (rarely); double rows within (2 V + 8) 2^-53 relative, as softmax's (the order of the sum moves
//!   1 / sum by up to V - 1 roundings; found by tests/fuzz/warp_and_sample.cpp, where 1 ulp was stated).
//! - temperature from logits: backend/simd/softmax.hpp (a documented ulp bound); T = 0 is the argmax
//!   one-hot row, exact.
//! - from logits with a top-k in [1, `sparse_top_k_limit`], or a min-p alone: no softmax of the row;
//!   the kept tokens and their probabilities come from backend/simd/sparse_filter.hpp (the set
//!   `sample_logits` samples), every other entry is 0. The masks agree with seq's except where a tie
//!   or a top-p / min-p boundary is within rounding (seq filters p = e / sum, rounded once more).
//! **Fallback:** `warp_probs` with a temperature other than 0 and 1 (p^(1/T), a scalar log and exp per
//! entry) runs seq's `warp_probs`; rows other than float or double use seq.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "specdec/backend/simd/xsimd_include.hpp"

#include "specdec/backend/simd/arch.hpp"
#include "specdec/backend/simd/reduce.hpp"
#include "specdec/backend/simd/select.hpp"
#include "specdec/backend/simd/softmax.hpp"
#include "specdec/backend/simd/sparse_filter.hpp"
#include "specdec/contracts.hpp"
#include "specdec/distributions/row_status.hpp"
#include "specdec/distributions/warp.hpp"

namespace specdec::backend::simd {

//! Up to this many candidate entries, top-p sorts them instead of narrowing the band further.
inline constexpr std::size_t top_p_sort_limit = 2048;

namespace detail {

//! Sets to 0 every entry that is < threshold.
template <class Arch, class T>
void zero_below(std::span<T> row, T threshold) noexcept {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t n = B::size;
  const B t(threshold), zero(T(0));
  const std::size_t full = row.size() / n * n;
  for (std::size_t v = 0; v < full; v += n) {
    const B x = B::load_unaligned(row.data() + v);
    xsimd::select(x < t, zero, x).store_unaligned(row.data() + v);
  }
  for (std::size_t v = full; v < row.size(); ++v)
    if (row[v] < threshold) row[v] = T(0);
}

//! The smallest T that is >= c (so that x < c <=> x < it, for every x of type T).
template <class T>
T ceil_to(double c) noexcept {
  T t = static_cast<T>(c);
  if (static_cast<double>(t) < c) t = std::nextafter(t, std::numeric_limits<T>::infinity());
  return t;
}

//! Non-negative floats and doubles order like their bit patterns read as unsigned integers.
template <class T>
using bits_of_t = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
template <class T>
bits_of_t<T> to_bits(T x) noexcept {
  return std::bit_cast<bits_of_t<T>>(x);
}
template <class T>
T from_bits(bits_of_t<T> b) noexcept {
  return std::bit_cast<T>(b);
}

//! The number of entries > 0.
template <class Arch, class T>
std::size_t count_positive(std::span<const T> row) noexcept {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t n = B::size;
  const std::size_t full = row.size() / n * n;
  B c(T(0));
  const B zero(T(0)), one(T(1));
  for (std::size_t v = 0; v < full; v += n) c += xsimd::select(B::load_unaligned(row.data() + v) > zero, one, zero);
  alignas(64) std::array<T, n> lanes;
  c.store_aligned(lanes.data());
  double total = 0.0;  // exact: each lane counts at most V / n < 2^24 entries
  for (const T x : lanes) total += static_cast<double>(x);
  for (std::size_t v = full; v < row.size(); ++v) total += row[v] > T(0) ? 1.0 : 0.0;
  return static_cast<std::size_t>(total);
}

//! Appends the entries > 0 to `out`.
template <class Arch, class T>
void gather_positive(std::span<const T> row, std::vector<T>& out) {
  std::vector<std::size_t> at;
  indices_at_least<Arch>(row, std::numeric_limits<T>::denorm_min(), at);
  for (const std::size_t v : at) out.push_back(row[v]);
}

//! One level of the radix search for the top-p threshold: the entries of `values` (all > 0) are put
//! in 1024 buckets by the 10 bits of their pattern below `shift + 10` (within the current band all
//! higher bits are equal); scanning buckets from the top, `above` (the mass of larger entries)
//! grows until a bucket would reach `goal`; `values` keeps that bucket's entries. Returns false when
//! no bucket reaches the goal (rounding): then `values` is left as it was.
template <class T>
bool narrow_band(std::vector<T>& values, unsigned shift, double goal, double& above) {
  constexpr std::size_t buckets = 1024;
  std::array<double, buckets> mass{};
  const auto key = [shift](T x) { return static_cast<std::size_t>((to_bits(x) >> shift) & (buckets - 1)); };
  for (const T x : values) mass[key(x)] += static_cast<double>(x);
  for (std::size_t b = buckets; b-- > 0;) {
    if (mass[b] > 0.0 && above + mass[b] >= goal) {  // an empty bucket never holds the threshold (goal 0)
      values.erase(std::remove_if(values.begin(), values.end(), [&](T x) { return key(x) != b; }), values.end());
      return true;
    }
    above += mass[b];
  }
  return false;
}

//! The first level of `narrow_band` over a whole row (only its positive entries), with two
//! interleaved histograms so that equal neighbours do not chain their updates; gathers the chosen
//! bucket's entries into `band`.
template <class Arch, class T>
bool first_band(std::span<const T> row, unsigned shift, double goal, double& above, std::vector<T>& band) {
  constexpr std::size_t buckets = 1024;
  std::array<std::array<double, buckets>, 2> mass{};
  const auto key = [shift](T x) { return static_cast<std::size_t>((to_bits(x) >> shift) & (buckets - 1)); };
  std::size_t v = 0;
  for (; v + 2 <= row.size(); v += 2) {
    const T a = row[v], b = row[v + 1];
    mass[0][key(a)] += a > T(0) ? static_cast<double>(a) : 0.0;
    mass[1][key(b)] += b > T(0) ? static_cast<double>(b) : 0.0;
  }
  if (v < row.size() && row[v] > T(0)) mass[0][key(row[v])] += static_cast<double>(row[v]);
  for (std::size_t k = buckets; k-- > 0;) {
    const double m = mass[0][k] + mass[1][k];
    // An empty bucket never holds the threshold: when top_p * mass underflows to a goal of 0, the
    // first bucket "reached" it and every entry was kept (found by tests/fuzz/warp_and_sample.cpp).
    if (m > 0.0 && above + m >= goal) {
      // The bucket is [k << shift, (k + 1) << shift) in bit patterns (the bits above are 0: T > 0).
      // The top bucket's end is the sign bit's pattern (-0): its bound is +inf instead (it holds the
      // largest finite values; found by tests/fuzz/warp_and_sample.cpp, which kept every entry).
      const T lower = from_bits<T>(static_cast<bits_of_t<T>>(k) << shift);
      const bits_of_t<T> upper_bits = static_cast<bits_of_t<T>>(static_cast<bits_of_t<T>>(k + 1) << shift);
      const T upper = (upper_bits >> (8 * sizeof(T) - 1)) != 0 ? std::numeric_limits<T>::infinity() : from_bits<T>(upper_bits);
      using B = xsimd::batch<T, Arch>;
      constexpr std::size_t n = B::size;
      const B lo(lower), hi(upper);
      const std::size_t full = row.size() / n * n;
      const auto take = [&](T x) {
        if (x >= lower && x < upper && x > T(0)) band.push_back(x);
      };
      for (std::size_t i = 0; i < full; i += n) {
        const B x = B::load_unaligned(row.data() + i);
        if (xsimd::any((x >= lo) & (x < hi)))
          for (std::size_t j = 0; j < n; ++j) take(row[i + j]);
      }
      for (std::size_t i = full; i < row.size(); ++i) take(row[i]);
      return true;
    }
    above += m;
  }
  return false;
}

}  // namespace detail

//! Zeroes every entry below the k-th largest (ties at the boundary kept), as `specdec::keep_top_k`.
//! \throws specdec::error if k < 0
template <class Arch, class T>
void keep_top_k(std::span<T> probs, int k) {
  SPECDEC_EXPECTS(k >= 0, "k must be >= 0");
  if (k == 0 || static_cast<std::size_t>(k) >= probs.size()) return;
  if constexpr (!detail::vector_row_type<T>) {
    specdec::keep_top_k(probs, k);
  } else {
    const auto kth = kth_largest<Arch>(std::span<const T>(probs), static_cast<std::size_t>(k));
    if (kth) detail::zero_below<Arch>(probs, *kth);
  }
}

//! Keeps the smallest high-probability set whose mass reaches top_p of the row's mass (ties at the
//! boundary kept), as `specdec::keep_top_p`; the rows have no negative entries (warp's output).
//! \throws specdec::error unless 0 < top_p <= 1
template <class Arch, class T>
void keep_top_p(std::span<T> probs, double top_p) {
  SPECDEC_EXPECTS(top_p > 0.0 && top_p <= 1.0, "top_p must be in (0, 1]");
  if (top_p >= 1.0) return;
  if constexpr (!detail::vector_row_type<T>) {
    specdec::keep_top_p(probs, top_p);
  } else {
    const std::span<const T> row(probs);
    const double mass = sum<Arch>(row);
    if (!(mass > 0.0)) return;
    if (!std::isfinite(mass)) return specdec::keep_top_p(probs, top_p);  // entries near DBL_MAX: seq's scaled sums
    const double goal = top_p * mass;
    // Radix search (1024 buckets per level, on the bit patterns, which order like the values):
    // the first level over the row, the next ones over the shrinking band, then a sort of the band.
    constexpr unsigned width = 8 * sizeof(T) - 1;  // the sign bit is 0
    std::vector<T> band;
    double above = 0.0;
    T threshold = T(0);                                           // keep every positive entry unless the search finds a threshold
    if (detail::count_positive<Arch>(row) <= top_p_sort_limit) {  // e.g. after a top-k: sort them all
      detail::gather_positive<Arch>(row, band);
      threshold = detail::threshold_in(band, 0.0, goal, T(0));
    } else if (detail::first_band<Arch>(row, width - 10, goal, above, band)) {
      for (unsigned shift = width - 20; band.size() > top_p_sort_limit && shift < width; shift -= std::min(shift, 10u)) {
        if (!detail::narrow_band(band, shift, goal, above)) break;
        if (shift == 0) break;
      }
      threshold = detail::threshold_in(band, above, goal, band.empty() ? T(0) : *std::min_element(band.begin(), band.end()));
    }
    detail::zero_below<Arch>(probs, threshold);
  }
}

//! Zeroes entries below min_p times the row maximum, as `specdec::keep_min_p` (exact).
//! \throws specdec::error unless 0 <= min_p <= 1
template <class Arch, class T>
void keep_min_p(std::span<T> probs, double min_p) {
  SPECDEC_EXPECTS(min_p >= 0.0 && min_p <= 1.0, "min_p must be in [0, 1]");
  if (min_p <= 0.0 || probs.empty()) return;
  if constexpr (!detail::vector_row_type<T>) {
    specdec::keep_min_p(probs, min_p);
  } else {
    const std::ptrdiff_t top = argmax<Arch>(std::span<const T>(probs));
    if (top < 0) return;  // only NaN: no entry compares below a cut, as in seq (found by tests/fuzz/warp_and_sample.cpp)
    const double cut = min_p * static_cast<double>(probs[static_cast<std::size_t>(top)]);
    detail::zero_below<Arch>(probs, detail::ceil_to<T>(cut));
  }
}

namespace detail {
//! seq's `normalise_in_place`: no_mass unless the sum is > 0; a sum or inverse that is not finite
//! takes seq's scalar `normalise_scaled`.
template <class Arch, class T>
row_status normalise(std::span<T> probs) {
  const double total = sum<Arch>(std::span<const T>(probs));
  if (!(total > 0.0)) return row_status::no_mass;
  const double inv = 1.0 / total;
  if (!std::isfinite(total) || !std::isfinite(inv)) return specdec::detail::normalise_scaled(probs);
  scale_row<Arch>(probs, inv);
  return row_status::ok;
}

template <class Arch, class T>
row_status apply_filters(std::span<T> probs, const warp_params& w) {
  keep_top_k<Arch>(probs, w.top_k);
  keep_top_p<Arch>(probs, w.top_p);
  keep_min_p<Arch>(probs, w.min_p);
  return normalise<Arch>(probs);
}
}  // namespace detail

//! probs = warp(softmax(logits / T)), as `specdec::warp_logits` (see the file comment for the
//! agreement with seq). On an unusable row `probs` is zero-filled and the status says why.
//! \pre probs.size() == logits.size()  \throws specdec::error on invalid `w` or sizes
template <class Arch, class T, class U>
row_status warp_logits(std::span<const T> logits, std::span<U> probs, const warp_params& w) {
  if constexpr (!detail::vector_softmax_types<T, U>) {
    return specdec::warp_logits(logits, probs, w);
  } else {
    validate(w);
    SPECDEC_EXPECTS(probs.size() == logits.size(), "probs and logits differ in length");
    if (w.temperature == 0.0) {
      double m = 0.0;
      const row_status s = logit_row_max<Arch>(logits, m);
      std::fill(probs.begin(), probs.end(), U(0));
      if (s == row_status::ok) probs[static_cast<std::size_t>(argmax<Arch>(logits))] = U(1);
      return s;
    }
    if constexpr (std::is_same_v<T, U>) {
      if (detail::sparse_filter_applies<T>(w)) {
        detail::sparse_buffers<T>& kept = detail::thread_sparse_buffers<T>();
        const row_status s = detail::sparse_probabilities<Arch>(logits, w, kept.tokens, kept.weights, kept.values);
        std::fill(probs.begin(), probs.end(), U(0));
        for (std::size_t i = 0; i < kept.values.size(); ++i) probs[static_cast<std::size_t>(kept.tokens[i])] = kept.values[i];
        return s;
      }
    }
    const row_status s = softmax<Arch>(logits, probs, w.temperature);
    if (s != row_status::ok) return s;
    return detail::apply_filters<Arch>(probs, w);
  }
}

//! Warps a probability row in place, as `specdec::warp_probs`: rows with NaN, inf or negative
//! entries are zero-filled (not_finite), rows without mass reported (no_mass).
//! \throws specdec::error on invalid `w`
template <class Arch, class T>
row_status warp_probs(std::span<T> probs, const warp_params& w) {
  if constexpr (!detail::vector_row_type<T>) {
    return specdec::warp_probs(probs, w);
  } else {
    validate(w);
    if (w.temperature != 0.0 && w.temperature != 1.0) return specdec::warp_probs(probs, w);  // fallback: p^(1/T)
    const row_summary s = summarise<Arch>(std::span<const T>(probs));
    if (!s.usable) {
      std::fill(probs.begin(), probs.end(), T(0));
      return row_status::not_finite;
    }
    if (!s.has_mass) return row_status::no_mass;
    if (w.temperature == 0.0) {
      const auto at = static_cast<std::size_t>(argmax<Arch>(std::span<const T>(probs)));
      std::fill(probs.begin(), probs.end(), T(0));
      probs[at] = T(1);
      return row_status::ok;
    }
    return detail::apply_filters<Arch>(probs, w);
  }
}

}  // namespace specdec::backend::simd
