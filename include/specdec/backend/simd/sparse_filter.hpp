//! \file backend/simd/sparse_filter.hpp
//! \brief The tokens that a top-k (1 <= k <= `sparse_top_k_limit`), or a min-p alone, keeps of a row
//! of logits, found without a weight for every entry, and their probabilities; on the simd backend.
//! The kept tokens, weights and probabilities are seq's (`specdec::detail::keep_logit_weights`,
//! distributions/logit_weights.hpp) bit for bit.
//!
//! - top-k: the k-th largest logit by a threshold filter (backend/simd/select.hpp); the candidates are
//!   the logits within `weight_slack` of it (the weights are monotone in the logit only up to a few
//!   ulp, so a logit just below the k-th can weigh as much); their weights by the scalar
//!   `weight_exp`, the k-th largest weight among them (seq's top-k on the weights), then top-p
//!   (`fixed_threshold_in` on the survivors) and min-p (e >= min_p * top). One selection pass and one
//!   or two gathering passes over the row, plus O(k log k).
//! - min-p alone: e >= min_p * top is about x >= max + T ln(min_p), so the candidates are the logits
//!   above that less `weight_slack`, gathered in one pass after the max. No exp outside the
//!   candidates.
//!
//! The kept set is the sampler's (`sample_logits` draws from the weights e) and the warp's
//! (`warp_logits` writes p = e * 2^g / mass rounded to the row's type on it, 0 elsewhere), so a
//! verification from logits reads the probabilities of the set its samples come from.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "specdec/backend/simd/arch.hpp"
#include "specdec/backend/simd/select.hpp"
#include "specdec/backend/simd/softmax.hpp"
#include "specdec/core/token.hpp"
#include "specdec/distributions/row_status.hpp"
#include "specdec/distributions/logit_weights.hpp"
#include "specdec/distributions/warp.hpp"

namespace specdec::backend::simd {

//! The largest top_k that the sparse filters take.
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

//! Whether the sparse filters take rows of T with the parameters w: T > 0 (at which the row takes
//! the weights of distributions/logit_weights.hpp), float or double rows, and a top-k in
//! [1, `sparse_top_k_limit`], or min-p > 0 with neither top-k nor top-p.
template <class T>
bool sparse_filter_applies(const warp_params& w) noexcept {
  if (!(w.temperature > 0.0) || !vector_row_type<T> || !specdec::detail::weighs_logits<T>(w.temperature)) return false;
  if (w.top_k == 0) return w.top_p == 1.0 && w.min_p > 0.0;
  return w.top_k >= 1 && w.top_k <= sparse_top_k_limit;
}

//! `specdec::detail::weight_reference` on the simd backend: R from the first chunk that holds a
//! finite logit (its maximum by `logit_row_max`) and the row's maximum m.
template <class Arch, class T>
double weight_reference(std::span<const T> logits, double m, double temperature) noexcept {
  for (std::size_t begin = 0; begin < logits.size(); begin += specdec::detail::weight_chunk) {
    double part_max = 0.0;
    const auto part = logits.subspan(begin, std::min(specdec::detail::weight_chunk, logits.size() - begin));
    if (logit_row_max<Arch>(part, part_max) == row_status::ok) return specdec::detail::choose_reference(part_max, m, temperature);
  }
  return m;
}

//! How far below a logit x_c another logit may lie and still weigh as much as x_c's weight (the
//! weights are monotone in the logit up to a few ulp of `weight_exp`, and t = (x - R) / T rounds
//! once or twice): T (|t_c| + 1) 2^(8 - digits), generous; a candidate too many costs one exp.
template <class T>
double weight_slack(double t, double temperature) noexcept {
  return temperature * (std::abs(t) + 1.0) * std::ldexp(1.0, 8 - std::numeric_limits<T>::digits);
}

//! The kept tokens of a row (see the file comment): `tokens` (increasing) and their weights e > 0
//! (`specdec::detail::weight_exp`, bit for bit the weights of seq's `keep_logit_weights` at those
//! tokens; every other token's is 0 there or filtered out), both overwritten. Returns the row's
//! status (a NaN or +inf logit: not_finite; every logit -inf: no_mass), with nothing kept unless it
//! is ok, the maximum's weight, and the kept weights' fixed-point mass and scale.
//! \pre `sparse_filter_applies<T>(w)`, w valid
template <class Arch, class T>
specdec::detail::kept_weights sparse_filter(std::span<const T> logits, const warp_params& w, std::vector<token_id>& tokens,
                                            std::vector<double>& weights) {
  using specdec::detail::fixed_mass_scale;
  tokens.clear();
  weights.clear();
  const auto failed = [&](row_status s) {
    tokens.clear();
    return specdec::detail::kept_weights{s, 0.0, 0, fixed_mass_scale(1.0, logits.size())};
  };
  double m = -std::numeric_limits<double>::infinity();
  std::optional<T> kth;
  if (w.top_k == 0) {  // min-p alone: the candidates are the logits whose weight can reach min_p * top
    const row_status s = logit_row_max<Arch>(logits, m);
    if (s != row_status::ok) return failed(s);
  } else {  // top-k: the candidates are the logits within `weight_slack` of the k-th largest
    bool nan = false;
    kth = kth_largest<Arch>(logits, static_cast<std::size_t>(w.top_k), &nan);
    if (nan) return failed(row_status::not_finite);
  }
  const auto gather = [&](double least_logit) {
    tokens.clear();
    indices_at_least<Arch>(logits, round_down_to<T>(least_logit), tokens);
    for (const token_id t : tokens) m = std::max(m, static_cast<double>(logits[static_cast<std::size_t>(t)]));
  };
  double r = 0.0;
  if (w.top_k == 0) {
    r = weight_reference<Arch>(logits, m, w.temperature);
    const double t = (m - r) / w.temperature + std::log(w.min_p);  // about the weakest kept token's t
    gather(m + w.temperature * std::log(w.min_p) - weight_slack<T>(t, w.temperature));
  } else {
    // Fewer than k tokens above -inf: all of them. A +inf, the maximum and an all -inf row show among
    // the candidates; the reference needs the maximum, so the slack is first taken from the k-th's
    // gap to the maximum of a generous first set (one more pass only when the slack was short).
    // (The first set's slack is `weight_slack` of the k-th logit's gap to 0 rather than to R.)
    const double gathered =
        kth ? static_cast<double>(*kth) - weight_slack<T>(static_cast<double>(*kth) / w.temperature, w.temperature)
            : static_cast<double>(std::nextafter(-std::numeric_limits<T>::infinity(), T(0)));
    gather(gathered);
    if (tokens.empty()) return failed(row_status::no_mass);  // every logit is -inf
    if (m == std::numeric_limits<double>::infinity()) return failed(row_status::not_finite);
    r = weight_reference<Arch>(logits, m, w.temperature);
    if (kth) {
      const double least =
          static_cast<double>(*kth) - weight_slack<T>((static_cast<double>(*kth) - r) / w.temperature, w.temperature);
      if (least < gathered) gather(least);
    }
  }
  const specdec::detail::weight_argument<T> arg(r, w.temperature);
  const double top = static_cast<double>(specdec::detail::weight_exp(arg(static_cast<T>(m))));
  const fixed_mass_scale f(top, logits.size());
  for (const token_id t : tokens)
    weights.push_back(static_cast<double>(specdec::detail::weight_exp(arg(logits[static_cast<std::size_t>(t)]))));
  double cut = 0.0;
  if (kth && weights.size() >= static_cast<std::size_t>(w.top_k)) {  // seq's top-k on the weights
    thread_local std::vector<double> sorted;
    sorted.assign(weights.begin(), weights.end());
    std::nth_element(sorted.begin(), sorted.begin() + (w.top_k - 1), sorted.end(), std::greater<double>());
    cut = sorted[static_cast<std::size_t>(w.top_k - 1)];
  }
  if (w.top_p < 1.0) {  // seq's top-p on the top-k survivors
    thread_local std::vector<double> kept;
    kept.clear();
    std::int64_t mass = 0;
    for (const double e : weights)
      if (e >= cut && e > 0.0) {
        kept.push_back(e);
        mass += f(e);
      }
    cut = std::max(cut, specdec::detail::fixed_threshold_in(kept, 0, specdec::detail::fixed_goal(w.top_p, mass), 0.0, f));
  }
  std::size_t n = 0;
  std::int64_t mass = 0;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const double e = weights[i];
    const std::int64_t count = f(e);
    if (count > 0 && e >= cut && !(e < w.min_p * top)) {
      tokens[n] = tokens[i];
      weights[n++] = e;
      mass += count;
    }
  }
  tokens.resize(n);
  weights.resize(n);
  return {row_status::ok, top, mass, f};
}

//! The probabilities of the kept tokens: p = e * (1 / mass), mass the kept weights' fixed-point
//! mass, rounded to T, as seq's `warp_logits` rounds them. `values` is overwritten, one per weight.
template <class T>
void kept_probabilities(std::span<const double> weights, const specdec::detail::kept_weights& k, std::vector<T>& values) {
  const double inv = k.scale.inverse(k.mass);
  values.resize(weights.size());
  for (std::size_t i = 0; i < weights.size(); ++i) values[i] = static_cast<T>(weights[i] * inv);
}

//! `sparse_filter`, then `kept_probabilities` of the kept tokens: what `warp_logits` writes on those
//! tokens (0 elsewhere) and what verification from logits reads. `values` is empty unless the status
//! is ok. \pre `sparse_filter_applies<T>(w)`, w valid
template <class Arch, class T>
row_status sparse_probabilities(std::span<const T> logits, const warp_params& w, std::vector<token_id>& tokens,
                                std::vector<double>& weights, std::vector<T>& values) {
  const specdec::detail::kept_weights k = sparse_filter<Arch>(logits, w, tokens, weights);
  values.clear();
  if (k.status == row_status::ok) kept_probabilities(std::span<const double>(weights), k, values);
  return k.status;
}

//! A sparse filter's result: the kept tokens, their weights and their probabilities.
template <class T>
struct sparse_buffers {
  std::vector<token_id> tokens;  //!< the kept tokens (increasing)
  std::vector<double> weights;   //!< their weights
  std::vector<T> values;         //!< their probabilities (`sparse_probabilities`)
};

//! The calling thread's `sparse_buffers`, kept from call to call (no allocation once large enough),
//! for `sample_logits` and `warp_logits`, which use them only until they return. Verification from
//! logits keeps its own (`seq::logit_row_scratch`): its view of a row outlives the target samples it
//! draws with `sample_logits`.
template <class T>
sparse_buffers<T>& thread_sparse_buffers() {
  thread_local sparse_buffers<T> buffers;
  return buffers;
}
}  // namespace detail

}  // namespace specdec::backend::simd
