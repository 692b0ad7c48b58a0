//! \file distributions/warp.hpp
//! \brief Sampling warpers: temperature, top-k, top-p (nucleus), min-p; exact, ties documented.
//!
//! Order of application (the order of HF transformers; vLLM applies top-k then top-p too):
//! temperature, then top-k, then top-p on the top-k survivors, then min-p; one renormalisation at the end.
//! - temperature T: softmax(logits / T). T = 0 means greedy: a one-hot row on the argmax (lowest id on ties).
//! - top-k: keep every token whose probability is >= the k-th largest. Ties at the boundary are
//!   all kept, so more than k tokens survive when the k-th value is tied (FlashInfer's mask has the
//!   same convention). k = 0 switches it off.
//! - top-p: sort the surviving probabilities in descending order and find the smallest m whose
//!   cumulative mass reaches top_p times the surviving mass; keep every token with probability >=
//!   the m-th largest (again all ties at the boundary). top_p = 1 switches it off.
//! - min-p: keep tokens with p >= min_p * max p. min_p = 0 switches it off.
//! The draft's q in a verification must be the warped row the draft token was sampled from
//! (otherwise the verified law drifts, as Hugging Face transformers' issues #32867 and #47932 report): warp both
//! sides with these functions.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <type_traits>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/distributions/logit_weights.hpp"
#include "specdec/distributions/row_status.hpp"
#include "specdec/distributions/softmax.hpp"

namespace specdec {

//! Per-request sampling parameters.
struct warp_params {
  double temperature = 1.0;  //!< >= 0; 0 = greedy
  int top_k = 0;             //!< >= 0; 0 = off
  double top_p = 1.0;        //!< in (0, 1]; 1 = off
  double min_p = 0.0;        //!< in [0, 1]; 0 = off

  //! True when the parameters leave a distribution unchanged (T = 1 and every filter off).
  constexpr bool is_identity() const noexcept { return temperature == 1.0 && top_k == 0 && top_p == 1.0 && min_p == 0.0; }
};

//! Checks `w`'s domain.
//! \throws specdec::error when temperature < 0 or not finite, top_k < 0, top_p outside (0, 1] or
//! NaN, or min_p outside [0, 1] or NaN.
inline void validate(const warp_params& w) {
  SPECDEC_EXPECTS(w.temperature >= 0.0 && std::isfinite(w.temperature), "temperature must be finite and >= 0");
  SPECDEC_EXPECTS(w.top_k >= 0, "top_k must be >= 0 (0 disables it)");
  SPECDEC_EXPECTS(w.top_p > 0.0 && w.top_p <= 1.0, "top_p must be in (0, 1]");
  SPECDEC_EXPECTS(w.min_p >= 0.0 && w.min_p <= 1.0, "min_p must be in [0, 1]");
}

//! Zeroes every entry below the k-th largest (ties at the boundary kept). Does not renormalise.
template <class T>
void keep_top_k(std::span<T> probs, int k) {
  SPECDEC_EXPECTS(k >= 0, "k must be >= 0");
  if (k == 0 || static_cast<std::size_t>(k) >= probs.size()) return;
  std::vector<T> values(probs.begin(), probs.end());
  std::nth_element(values.begin(), values.begin() + (k - 1), values.end(), std::greater<T>());
  const T kth = values[static_cast<std::size_t>(k - 1)];
  for (T& p : probs)
    if (p < kth) p = T(0);
}

namespace detail {
//! `keep_top_p` with the fixed-point masses `f` (distributions/logit_weights.hpp).
template <class T>
void keep_top_p_fixed(std::span<T> probs, double top_p, const fixed_mass_scale& f) {
  std::vector<T> values;
  values.reserve(probs.size());
  std::int64_t mass = 0;
  for (const T p : probs)
    if (p > T(0)) {
      values.push_back(p);
      mass += f(static_cast<double>(p));
    }
  const T threshold = fixed_threshold_in(values, 0, fixed_goal(top_p, mass), T(0), f);
  for (T& p : probs)
    if (p < threshold) p = T(0);
}
}  // namespace detail

//! Keeps the smallest high-probability set whose mass reaches top_p of the row's mass (ties at the
//! boundary kept). Does not renormalise. The masses are the exact fixed-point sums of
//! distributions/logit_weights.hpp (each entry counted to within 2^-45 of the largest at V = 128256), so
//! that every backend keeps the same set, whatever the order it adds in.
template <class T>
void keep_top_p(std::span<T> probs, double top_p) {
  SPECDEC_EXPECTS(top_p > 0.0 && top_p <= 1.0, "top_p must be in (0, 1]");
  if (top_p >= 1.0 || probs.empty()) return;
  const T top = *std::max_element(probs.begin(), probs.end());
  if (!(top > T(0))) return;
  detail::keep_top_p_fixed(probs, top_p, detail::fixed_mass_scale(static_cast<double>(top), probs.size()));
}

//! Zeroes entries below min_p times the row maximum. Does not renormalise.
template <class T>
void keep_min_p(std::span<T> probs, double min_p) {
  SPECDEC_EXPECTS(min_p >= 0.0 && min_p <= 1.0, "min_p must be in [0, 1]");
  if (min_p <= 0.0 || probs.empty()) return;
  const double cut = min_p * static_cast<double>(*std::max_element(probs.begin(), probs.end()));
  for (T& p : probs)
    if (static_cast<double>(p) < cut) p = T(0);
}

namespace detail {
//! Normalises a row of finite non-negative weights whose sum or its inverse is not a finite double
//! (entries near DBL_MAX overflow the sum; a subnormal sum overflows 1 / sum): the entries are
//! divided by the largest first. Shared by every backend's normalisation (found by
//! tests/fuzz/warp_and_sample.cpp: such rows became infinities, or `no_mass` left unfilled).
template <class T>
row_status normalise_scaled(std::span<T> probs) {
  double top = 0.0;
  for (const T p : probs) top = std::max(top, static_cast<double>(p));
  if (!(top > 0.0) || !std::isfinite(top)) return row_status::no_mass;
  double sum = 0.0;
  for (const T p : probs) sum += static_cast<double>(p) / top;
  for (T& p : probs) p = static_cast<T>(static_cast<double>(p) / top / sum);
  return row_status::ok;
}

template <class T>
row_status normalise_in_place(std::span<T> probs) {
  double sum = 0.0;
  for (const T p : probs) sum += static_cast<double>(p);
  if (!(sum > 0.0)) return row_status::no_mass;
  const double inv = 1.0 / sum;
  if (!std::isfinite(sum) || !std::isfinite(inv)) return normalise_scaled(probs);
  for (T& p : probs) p = static_cast<T>(static_cast<double>(p) * inv);
  return row_status::ok;
}
template <class T>
void one_hot(std::span<T> probs, std::ptrdiff_t at) {
  for (T& p : probs) p = T(0);
  probs[static_cast<std::size_t>(at)] = T(1);
}
template <class T>
row_status apply_filters(std::span<T> probs, const warp_params& w) {
  keep_top_k(probs, w.top_k);
  keep_top_p(probs, w.top_p);
  keep_min_p(probs, w.min_p);
  return normalise_in_place(probs);
}
}  // namespace detail

namespace detail {
//! The weights of a row of logits that survive the filters (\ref sampling_weights): what
//! `warp_logits` normalises and `sample_logits` draws from.
struct kept_weights {
  row_status status;
  double top;         //!< the maximum's weight (the maximum logit's, which every filter keeps)
  std::int64_t mass;  //!< the kept weights' fixed-point mass
  fixed_mass_scale scale;
};

//! Writes the weights e_v of `logits` to `e` with every filter of `w` applied on them (0 where
//! filtered out): top-k on e (ties kept), top-p on the survivors by fixed-point masses, min-p as
//! e >= min_p * top; weights that count 0 (below half a count) are dropped too. An unusable row
//! leaves `e` zero-filled. \pre `weighs_logits<T>(w.temperature)`
template <class T>
kept_weights keep_logit_weights(std::span<const T> logits, const warp_params& w, std::span<T> e) {
  double m = 0.0;
  const row_status s = logit_row_max(logits, m);
  if (s != row_status::ok) {
    for (T& x : e) x = T(0);
    return {s, 0.0, 0, fixed_mass_scale(1.0, e.size())};
  }
  const double top = static_cast<double>(logit_weights(logits, m, w.temperature, e));
  const fixed_mass_scale f(top, e.size());
  keep_top_k(e, w.top_k);
  if (w.top_p < 1.0) keep_top_p_fixed(e, w.top_p, f);
  if (w.min_p > 0.0)
    for (T& x : e)
      if (static_cast<double>(x) < w.min_p * top) x = T(0);
  std::int64_t mass = 0;
  for (T& x : e) {
    const std::int64_t count = f(static_cast<double>(x));
    if (count == 0) x = T(0);  // (the kept weights are those that count: each warped probability is > 0)
    mass += count;
  }
  return {row_status::ok, top, mass, f};
}
}  // namespace detail

//! probs = warp(softmax(logits / T)). On an unusable row (NaN, +inf, all -inf) `probs` is zero-filled
//! and the status says why. Float and double rows: the kept weights of `detail::keep_logit_weights`
//! times the inverse of their fixed-point mass, rounded to U (\ref sampling_weights).
//! \pre probs.size() == logits.size(); \throws specdec::error on invalid `w`.
template <class T, class U>
row_status warp_logits(std::span<const T> logits, std::span<U> probs, const warp_params& w) {
  validate(w);
  SPECDEC_EXPECTS(probs.size() == logits.size(), "probs and logits differ in length");
  if (w.temperature == 0.0) {
    double m = 0.0;
    const row_status s = detail::logit_row_max(logits, m);
    if (s != row_status::ok) {
      for (U& p : probs) p = U(0);
      return s;
    }
    detail::one_hot(probs, argmax(logits));
    return row_status::ok;
  }
  if (detail::weighs_logits<T>(w.temperature)) {
    std::vector<T> own;
    std::span<T> e;
    if constexpr (std::is_same_v<T, U>) {
      e = probs;
    } else {
      own.resize(logits.size());
      e = own;
    }
    const detail::kept_weights k = detail::keep_logit_weights(logits, w, e);
    if (k.status != row_status::ok) {
      for (U& p : probs) p = U(0);
      return k.status;
    }
    const double inv = k.scale.inverse(k.mass);
    for (std::size_t v = 0; v < probs.size(); ++v) probs[v] = static_cast<U>(static_cast<double>(e[v]) * inv);
    return row_status::ok;
  }
  const row_status s = softmax(logits, probs, w.temperature);
  if (s != row_status::ok) return s;
  return detail::apply_filters(probs, w);
}

//! Warps a probability row in place: temperature as p^(1/T) renormalised, then the filters.
//! Rows with NaN, inf or negative entries, or no mass, are zero-filled and reported.
//! \throws specdec::error on invalid `w`.
template <class T>
row_status warp_probs(std::span<T> probs, const warp_params& w) {
  validate(w);
  double sum = 0.0;
  for (const T p : probs) {
    const double v = static_cast<double>(p);
    if (!(v >= 0.0) || !std::isfinite(v)) {
      for (T& q : probs) q = T(0);
      return row_status::not_finite;
    }
    sum += v;
  }
  if (!(sum > 0.0)) return row_status::no_mass;
  if (w.temperature == 0.0) {
    detail::one_hot(probs, argmax(std::span<const T>(probs)));
    return row_status::ok;
  }
  if (w.temperature != 1.0) {
    // p^(1/T) = exp(log p / T); subtract the max log first so small T does not underflow everything.
    // The maximum's exponent is 0 even when 1 / T overflows (T below 1 / DBL_MAX: 0 * inf would be
    // NaN; found by tests/fuzz/warp_and_sample.cpp), which gives the limit T -> 0: uniform on the ties.
    const double inv_t = 1.0 / w.temperature;
    double max_log = -INFINITY;
    for (const T p : probs)
      if (p > T(0)) max_log = std::max(max_log, std::log(static_cast<double>(p)));
    for (T& p : probs) {
      const double gap = p > T(0) ? std::log(static_cast<double>(p)) - max_log : -INFINITY;
      p = static_cast<T>(gap == 0.0 ? 1.0 : std::exp(gap * inv_t));
    }
  }
  return detail::apply_filters(probs, w);
}

}  // namespace specdec
