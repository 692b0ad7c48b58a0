//! \file backend/simd/sample_logits.hpp
//! \brief One token from a row of logits with sampling parameters (temperature, top-k, top-p,
//! min-p), on the simd backend, without materialising the warped row when a top-k is set.
//!
//! The seq reference is `warp_logits` followed by `sample_categorical` on the warped row.
//! - top_k in [1, `sparse_top_k_limit`] (**sparse path**): the k-th largest logit by a threshold
//!   filter (backend/simd/select.hpp); the candidates are the tokens whose weight
//!   e = T(exp((x - max) / temperature)) (seq's softmax value before normalisation, rounded to the
//!   row's type) is >= the k-th's, so that logits that differ but round to the same weight tie as
//!   they do in seq's top-k on probabilities; top-p and min-p among the candidates (sorted: k plus
//!   ties), and `sample_sparse`, which follows the sampling contract. Cost: one selection pass and one
//!   gathering pass over the row, plus O(k log k).
//!   It differs from seq only where rounding matters: seq multiplies by 1 / sum and rounds once more
//!   before its filters and its inverse CDF (token boundaries move by ~1e-7 relative, and a top-p or
//!   min-p boundary can move when a cumulative mass is that close to its goal). Tests measure
//!   agreement above 99.9 % on random rows and uniforms.
//! - min_p > 0 with no top-k and no top-p (**min-p path**): p >= min_p * max p is
//!   exp((x - max) / T) >= min_p, so the candidates are the logits >= max + T ln(min_p) (less a margin
//!   for rounding), gathered in one pass after the max; their weights e are computed as above and
//!   kept when e >= min_p (the maximum's weight is 1), then `sample_sparse`. No exp is taken outside
//!   the candidates. It differs from seq where the sparse path does (seq rounds p = e / sum before
//!   comparing), and is tested the same way.
//! - otherwise (**dense path**): `backend::simd::warp_logits` into a scratch row, then
//!   `backend::simd::sample_categorical` (agreement as stated in backend/simd/warp.hpp).
//! - temperature 0: the argmax (lowest id on ties), exact; u is not used.
//! The returned `mass` is the total weight sampled: about 1 on the dense path (a normalised row), the
//! sum of exp((x - max) / T) over the surviving candidates on the sparse path.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "specdec/backend/simd/xsimd_include.hpp"

#include "specdec/backend/simd/categorical.hpp"
#include "specdec/backend/simd/reduce.hpp"
#include "specdec/backend/simd/select.hpp"
#include "specdec/backend/simd/softmax.hpp"
#include "specdec/backend/simd/warp.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec::backend::simd {

//! The largest top_k that takes the sparse path.
inline constexpr int sparse_top_k_limit = 4096;

namespace detail {
//! The largest T that is <= x: -inf below T's range, where the standard leaves a plain conversion
//! undefined (IEEE hardware gives -inf; a huge temperature makes the margins below that large).
//! \pre x <= the largest finite T, x not NaN
template <class T>
T round_down_to(double x) noexcept {
  if (!(x >= static_cast<double>(std::numeric_limits<T>::lowest()))) return -std::numeric_limits<T>::infinity();
  const T t = static_cast<T>(x);
  return static_cast<double>(t) > x ? std::nextafter(t, -std::numeric_limits<T>::infinity()) : t;
}

//! A candidate's weight T(exp((x - max) / temperature)): seq's softmax value before normalising,
//! rounded to the row's type as seq rounds it. Shared by the top-k and min-p paths.
template <class T>
T rounded_weight(T x, double max, double temperature) noexcept {
  return static_cast<T>(std::exp((static_cast<double>(x) - max) / temperature));
}

//! The min-p path of `sample_logits` (see the file comment). \pre T > 0, min_p in (0, 1]
template <class Arch, class T>
sample_result sample_min_p(std::span<const T> logits, const warp_params& w, double u) {
  double m = 0.0;
  const row_status s = logit_row_max<Arch>(logits, m);
  if (s != row_status::ok) return {no_token, s, 0.0};
  // e(x) rounds to T with relative error 2^-digits, i.e. x moves by T 2^-digits: a margin of 16 such
  // steps keeps every logit whose rounded weight can reach min_p.
  const double bound =
      m + w.temperature * std::log(w.min_p) - w.temperature * std::ldexp(1.0, 4 - std::numeric_limits<T>::digits);
  std::vector<token_id> tokens;
  indices_at_least<Arch>(logits, round_down_to<T>(bound), tokens);
  std::vector<double> weights;
  weights.reserve(tokens.size());
  std::size_t kept = 0;
  for (const token_id t : tokens) {
    const T e = rounded_weight(logits[static_cast<std::size_t>(t)], m, w.temperature);
    if (static_cast<double>(e) < w.min_p) continue;
    tokens[kept++] = t;
    weights.push_back(static_cast<double>(e));
  }
  tokens.resize(kept);
  return sample_sparse(logits.size(), tokens, weights, u);
}
}  // namespace detail

//! Samples one token from softmax-and-warp(logits) with the uniform u (see the file comment).
//! \throws specdec::error on invalid `w`
template <class Arch, class T>
sample_result sample_logits(std::span<const T> logits, const warp_params& w, double u) {
  validate(w);
  if (w.temperature > 0.0 && w.top_k == 0 && w.top_p == 1.0 && w.min_p > 0.0 && detail::vector_row_type<T>)
    return detail::sample_min_p<Arch>(logits, w, u);
  if (w.temperature == 0.0 || w.top_k < 1 || w.top_k > sparse_top_k_limit || !detail::vector_row_type<T>) {
    double m = 0.0;
    const row_status s = logit_row_max<Arch>(logits, m);
    if (s != row_status::ok) return {no_token, s, 0.0};
    if (w.temperature == 0.0) return {static_cast<token_id>(argmax<Arch>(logits)), row_status::ok, 1.0};
    std::vector<T> probs(logits.size());
    const row_status ws = warp_logits<Arch>(logits, std::span<T>(probs), w);
    if (ws != row_status::ok) return {no_token, ws, 0.0};
    return sample_categorical<Arch>(std::span<const T>(probs), u);
  }
  // Sparse path. seq's top-k keeps every token whose *rounded* weight ties with the k-th's, so the
  // candidates are the logits within rounding of the k-th largest, and among them those whose weight
  // e = T(exp((x - max) / temperature)) (seq's softmax before normalising) is >= the k-th's.
  // One pass finds the k-th largest logit and whether the row holds a NaN; a +inf, the maximum and an
  // all -inf row show among the candidates.
  bool nan = false;
  const std::optional<T> kth = kth_largest<Arch>(logits, static_cast<std::size_t>(w.top_k), &nan);
  if (nan) return {no_token, row_status::not_finite, 0.0};
  double m = -std::numeric_limits<double>::infinity();
  const auto weight_of = [&](T x) { return detail::rounded_weight(x, m, w.temperature); };
  std::vector<token_id> tokens;
  std::vector<double> weights;
  if (kth) {
    const double slack = w.temperature * std::ldexp(1.0, 2 - std::numeric_limits<T>::digits);  // 4 rounding steps of t
    indices_at_least<Arch>(logits, detail::round_down_to<T>(static_cast<double>(*kth) - slack), tokens);
    for (const token_id t : tokens) m = std::max(m, static_cast<double>(logits[static_cast<std::size_t>(t)]));
    if (m == std::numeric_limits<double>::infinity()) return {no_token, row_status::not_finite, 0.0};
    const T kth_weight = weight_of(*kth);
    std::size_t kept = 0;
    for (const token_id t : tokens) {
      const T e = weight_of(logits[static_cast<std::size_t>(t)]);
      if (e < kth_weight) continue;
      tokens[kept++] = t;
      weights.push_back(static_cast<double>(e));
    }
    tokens.resize(kept);
  } else {  // fewer than k tokens above -inf: all of them
    indices_at_least<Arch>(logits, std::nextafter(-std::numeric_limits<T>::infinity(), T(0)), tokens);
    if (tokens.empty()) return {no_token, row_status::no_mass, 0.0};  // every logit is -inf
    for (const token_id t : tokens) m = std::max(m, static_cast<double>(logits[static_cast<std::size_t>(t)]));
    if (m == std::numeric_limits<double>::infinity()) return {no_token, row_status::not_finite, 0.0};
    for (const token_id t : tokens) weights.push_back(static_cast<double>(weight_of(logits[static_cast<std::size_t>(t)])));
  }
  double cut = 0.0;
  if (w.top_p < 1.0) {
    std::vector<double> sorted(weights);
    double mass = 0.0;
    for (const double x : weights) mass += x;
    cut = detail::threshold_in(sorted, 0.0, w.top_p * mass, 0.0);
  }
  if (w.min_p > 0.0) cut = std::max(cut, w.min_p * *std::max_element(weights.begin(), weights.end()));
  for (double& x : weights)
    if (x < cut) x = 0.0;
  return sample_sparse(logits.size(), tokens, weights, u);
}

}  // namespace specdec::backend::simd
