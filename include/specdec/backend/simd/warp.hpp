//! \file backend/simd/warp.hpp
//! \brief Top-k, top-p and min-p filters and the whole warp (temperature, filters, renormalisation)
//! on the simd backend, without sorting the vocabulary. Same definitions, order and tie rules as
//! distributions/warp.hpp.
//!
//! - top-k: the k-th largest entry by `kth_largest` (a threshold filter, backend/simd/select.hpp);
//!   exact, the same surviving set as seq.
//! - top-p: the threshold is the value v with S(> v) < goal <= S(>= v), S(>= v) the fixed-point mass
//!   (distributions/logit_weights.hpp) of the entries >= v: `search_cut` of backend/simd/top_p_cut.hpp
//!   narrows bands by pivots without sorting the row. The masses are exact integers, so the survivors
//!   are seq's whatever the order of the sums.
//! - min-p: exact (comparison with the smallest T >= min_p * max).
//! - `warp_logits` on float and double rows at T > 0: seq's row bit for bit: the weights of
//!   distributions/logit_weights.hpp in one read of the logits (`one_read_weights`), the filters on
//!   them, and the kept weights times the inverse of their fixed-point mass (`keep_logit_weights`);
//!   with a top-k in [1, `sparse_top_k_limit`], or a min-p alone, the kept tokens of
//!   backend/simd/sparse_filter.hpp without a weight for every entry. T = 0 is the argmax one-hot row.
//! - `warp_probs`: the filters above, then a lane-order double sum and p * (1 / sum) in double rounded
//!   to T, as seq: the probabilities equal seq's up to the last bits of the sum: float rows at most 1
//!   ulp apart (rarely); double rows within (2 V + 8) 2^-53 relative (the order of the sum moves
//!   1 / sum by up to V - 1 roundings; found by tests/fuzz/warp_and_sample.cpp, where 1 ulp was stated).
//! **Fallback:** `warp_probs` with a temperature other than 0 and 1 (p^(1/T), a scalar log and exp per
//! entry) runs seq's `warp_probs`; rows other than float or double, and float logits at T below
//! 1 / FLT_MAX, use seq.
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
#include "specdec/backend/simd/fixed_mass.hpp"
#include "specdec/backend/simd/reduce.hpp"
#include "specdec/backend/simd/select.hpp"
#include "specdec/backend/simd/softmax.hpp"
#include "specdec/backend/simd/sparse_filter.hpp"
#include "specdec/backend/simd/top_p_cut.hpp"
#include "specdec/contracts.hpp"
#include "specdec/distributions/row_status.hpp"
#include "specdec/distributions/warp.hpp"

namespace specdec::backend::simd {

namespace detail {

//! Sets to 0 every entry that is < threshold, and passes each batch that it leaves to `kept` (the
//! last padded with 0).
template <class Arch, class T, class Kept>
void zero_below(std::span<T> row, T threshold, Kept&& kept) noexcept {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t n = B::size;
  const B t(threshold), zero(T(0));
  const auto keep = [&](const B& x) {
    const B left = xsimd::select(x < t, zero, x);
    kept(left);
    return left;
  };
  const std::size_t full = row.size() / n * n;
  for (std::size_t v = 0; v < full; v += n) keep(B::load_unaligned(row.data() + v)).store_unaligned(row.data() + v);
  if (full < row.size())
    store_partial(row.data() + full, keep(load_partial<B>(row.data() + full, row.size() - full, T(0))), row.size() - full);
}

//! Sets to 0 every entry that is < threshold.
template <class Arch, class T>
void zero_below(std::span<T> row, T threshold) noexcept {
  zero_below<Arch>(row, threshold, [](const xsimd::batch<T, Arch>&) {});
}

//! `zero_below`, and the fixed-point mass of the row that it leaves, in the same pass.
template <class Arch, class T>
std::int64_t zero_below_and_mass(std::span<T> row, T threshold, const specdec::detail::fixed_mass_scale& f) noexcept {
  fixed_sum<Arch> mass(f);
  zero_below<Arch>(row, threshold, [&](const xsimd::batch<T, Arch>& kept) { mass.add_weights(kept); });
  return mass.total();
}

//! The smallest T that is >= c (so that x < c <=> x < it, for every x of type T).
template <class T>
T ceil_to(double c) noexcept {
  T t = static_cast<T>(c);
  if (static_cast<double>(t) < c) t = std::nextafter(t, std::numeric_limits<T>::infinity());
  return t;
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

namespace detail {
//! `specdec::detail::keep_top_p_fixed` (the same kept set, bit for bit): the row's fixed-point mass in
//! one pass, then `search_cut` from a floor below which no entry is kept (the entries below lo count
//! at most V (lo 2^g + 1/2) together), then a zeroing pass. \pre entries >= 0 and <= top, top > 0
template <class Arch, class T>
void keep_top_p_fixed(std::span<T> probs, double top_p, const specdec::detail::fixed_mass_scale& f, T top) {
  const std::span<const T> row(probs);
  const std::int64_t total = fixed_row_mass<Arch>(row, f);
  const std::int64_t goal = specdec::detail::fixed_goal(top_p, total);
  const double size = static_cast<double>(row.size());
  const double floor = (static_cast<double>(total - goal) / size - 1.0) * std::ldexp(1.0, -f.exponent);
  const T lo = std::clamp(round_down_to<T>(floor), std::numeric_limits<T>::denorm_min(), top);
  zero_below<Arch>(probs, search_whole_row<Arch>(row, lo, top, goal, f));
}
}  // namespace detail

//! Keeps the smallest high-probability set whose mass reaches top_p of the row's mass (ties at the
//! boundary kept), as `specdec::keep_top_p` (the same fixed-point masses, so the same set, without
//! sorting the row: backend/simd/top_p_cut.hpp); the rows have no negative entries (warp's output).
//! \throws specdec::error unless 0 < top_p <= 1
template <class Arch, class T>
void keep_top_p(std::span<T> probs, double top_p) {
  SPECDEC_EXPECTS(top_p > 0.0 && top_p <= 1.0, "top_p must be in (0, 1]");
  if (top_p >= 1.0 || probs.empty()) return;
  if constexpr (!detail::vector_row_type<T>) {
    specdec::keep_top_p(probs, top_p);
  } else {
    const std::ptrdiff_t at = argmax<Arch>(std::span<const T>(probs));
    if (at < 0) return;
    const T top = probs[static_cast<std::size_t>(at)];
    if (!(top > T(0))) return;
    detail::keep_top_p_fixed<Arch>(probs, top_p, specdec::detail::fixed_mass_scale(static_cast<double>(top), probs.size()), top);
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

namespace detail {
//! `specdec::detail::keep_logit_weights` on the simd backend, bit for bit: the weights in one read
//! (`one_read_weights`, the same reference and `weight_exp`), then top-k (`kth_largest`), top-p
//! (`keep_top_p_fixed`) and min-p (e >= the least T >= min_p * top) on them, the weights that
//! count 0 dropped, and the kept mass.
//! \pre `specdec::detail::weighs_logits<T>(w.temperature)`, T float or double
template <class Arch, class T>
specdec::detail::kept_weights keep_logit_weights(std::span<const T> logits, const warp_params& w, std::span<T> e) {
  const referenced_weights r = one_read_weights<Arch>(logits, w.temperature, e.data());
  if (r.status != row_status::ok) {
    std::fill(e.begin(), e.end(), T(0));
    return {r.status, 0.0, 0, specdec::detail::fixed_mass_scale(1.0, e.size())};
  }
  const T top = scaled_exp<Arch, T>(r.reference, w.temperature)(xsimd::batch<T, Arch>(static_cast<T>(r.max))).get(0);
  const specdec::detail::fixed_mass_scale f(static_cast<double>(top), e.size());
  keep_top_k<Arch>(e, w.top_k);
  if (w.top_p < 1.0) keep_top_p_fixed<Arch>(e, w.top_p, f, top);
  // min-p, the weights that count 0, and the kept mass: one pass
  const std::int64_t mass =
      zero_below_and_mass<Arch>(e, std::max(ceil_to<T>(w.min_p * static_cast<double>(top)), f.least_counted<T>()), f);
  return {row_status::ok, static_cast<double>(top), mass, f};
}
}  // namespace detail

//! probs = warp(softmax(logits / T)), as `specdec::warp_logits`, bit for bit on float and double
//! rows: where a sparse filter applies, its kept tokens (backend/simd/sparse_filter.hpp), else
//! `detail::keep_logit_weights`; then the kept weights times the inverse of their fixed-point mass.
//! On an unusable row `probs` is zero-filled and the status says why.
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
    if (!specdec::detail::weighs_logits<T>(w.temperature)) return specdec::warp_logits(logits, probs, w);
    if (detail::sparse_filter_applies<T>(w)) {
      detail::sparse_buffers<T>& kept = detail::thread_sparse_buffers<T>();
      const row_status s = detail::sparse_probabilities<Arch>(logits, w, kept.tokens, kept.weights, kept.values);
      std::fill(probs.begin(), probs.end(), U(0));
      for (std::size_t i = 0; i < kept.values.size(); ++i) probs[static_cast<std::size_t>(kept.tokens[i])] = kept.values[i];
      return s;
    }
    const specdec::detail::kept_weights k = detail::keep_logit_weights<Arch>(logits, w, probs);
    if (k.status != row_status::ok) return k.status;
    detail::scale_row<Arch>(probs, k.scale.inverse(k.mass));
    return row_status::ok;
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
