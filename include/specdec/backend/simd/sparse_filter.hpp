//! \file backend/simd/sparse_filter.hpp
//! \brief The tokens that a top-k (1 <= k <= `sparse_top_k_limit`), or a min-p alone, keeps of a row
//! of logits, found without a weight for every entry, and their probabilities; on the simd backend.
//!
//! - top-k: the k-th largest logit by a threshold filter (backend/simd/select.hpp); the candidates are
//!   the tokens whose weight e = T(exp((x - max) / temperature)) (seq's softmax value before
//!   normalising, rounded to the row's type) is >= the k-th's, so that logits that differ but round to
//!   the same weight tie as they do in seq's top-k on probabilities; then top-p (`threshold_in` on the
//!   candidates' weights with goal top_p times their sum) and min-p (e >= min_p times the largest e)
//!   among them. One selection pass and one gathering pass over the row, plus O(k log k).
//! - min-p alone: p >= min_p * max p is exp((x - max) / T) >= min_p, so the candidates are the logits
//!   >= max + T ln(min_p) (less a margin for rounding), gathered in one pass after the max; a candidate
//!   is kept when e >= min_p (the maximum's weight is 1). No exp outside the candidates.
//!
//! The kept set is the sampler's (`sample_logits` draws from the weights e) and the warp's
//! (`warp_logits` writes p = e * (1 / sum e) rounded to the row's type on it, 0 elsewhere), so a
//! verification from logits reads the probabilities of the set its samples come from. Against seq's
//! warp: seq rounds p = e / sum once more before its filters, so a tie, a top-p boundary or a min-p
//! boundary can move where two values are within rounding of each other (the agreement rates are on
//! the backends-and-determinism page).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "specdec/backend/simd/arch.hpp"
#include "specdec/backend/simd/select.hpp"
#include "specdec/backend/simd/softmax.hpp"
#include "specdec/core/token.hpp"
#include "specdec/distributions/row_status.hpp"
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

//! A candidate's weight T(exp((x - max) / temperature)): seq's softmax value before normalisation,
//! rounded to the row's type as seq rounds it.
template <class T>
T rounded_weight(T x, double max, double temperature) noexcept {
  return static_cast<T>(std::exp((static_cast<double>(x) - max) / temperature));
}

//! Whether the sparse filters take rows of T with the parameters w: T > 0, float or double rows, and
//! a top-k in [1, `sparse_top_k_limit`], or min-p > 0 with neither top-k nor top-p.
template <class T>
constexpr bool sparse_filter_applies(const warp_params& w) noexcept {
  if (!(w.temperature > 0.0) || !vector_row_type<T>) return false;
  if (w.top_k == 0) return w.top_p == 1.0 && w.min_p > 0.0;
  return w.top_k >= 1 && w.top_k <= sparse_top_k_limit;
}

//! The kept tokens of a row (see the file comment): `tokens` (increasing) and their weights e > 0,
//! both overwritten. Returns the row's status (a NaN or +inf logit: not_finite; every logit -inf:
//! no_mass), with nothing kept unless it is ok. \pre `sparse_filter_applies<T>(w)`, w valid
template <class Arch, class T>
row_status sparse_filter(std::span<const T> logits, const warp_params& w, std::vector<token_id>& tokens,
                         std::vector<double>& weights) {
  tokens.clear();
  weights.clear();
  double m = -std::numeric_limits<double>::infinity();
  const auto keep_at_least = [&](double floor) {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      const T e = rounded_weight(logits[static_cast<std::size_t>(tokens[i])], m, w.temperature);
      if (static_cast<double>(e) < floor) continue;
      tokens[kept++] = tokens[i];
      weights.push_back(static_cast<double>(e));
    }
    tokens.resize(kept);
  };
  if (w.top_k == 0) {  // min-p alone
    const row_status s = logit_row_max<Arch>(logits, m);
    if (s != row_status::ok) return s;
    // e(x) rounds to T with relative error 2^-digits, i.e. x moves by T 2^-digits: a margin of 16 such
    // steps keeps every logit whose rounded weight can reach min_p.
    const double bound =
        m + w.temperature * std::log(w.min_p) - w.temperature * std::ldexp(1.0, 4 - std::numeric_limits<T>::digits);
    indices_at_least<Arch>(logits, round_down_to<T>(bound), tokens);
    keep_at_least(w.min_p);
    return row_status::ok;
  }
  // seq's top-k keeps every token whose *rounded* weight ties with the k-th's, so the candidates are
  // the logits within rounding of the k-th largest, and among them those whose weight is >= the k-th's.
  // One pass finds the k-th largest logit and whether the row holds a NaN; a +inf, the maximum and an
  // all -inf row show among the candidates.
  bool nan = false;
  const std::optional<T> kth = kth_largest<Arch>(logits, static_cast<std::size_t>(w.top_k), &nan);
  if (nan) return row_status::not_finite;
  const double slack = w.temperature * std::ldexp(1.0, 2 - std::numeric_limits<T>::digits);  // 4 rounding steps of t
  // Fewer than k tokens above -inf: all of them.
  const T least =
      kth ? round_down_to<T>(static_cast<double>(*kth) - slack) : std::nextafter(-std::numeric_limits<T>::infinity(), T(0));
  indices_at_least<Arch>(logits, least, tokens);
  if (tokens.empty()) return row_status::no_mass;  // every logit is -inf
  for (const token_id t : tokens) m = std::max(m, static_cast<double>(logits[static_cast<std::size_t>(t)]));
  if (m == std::numeric_limits<double>::infinity()) {
    tokens.clear();
    return row_status::not_finite;
  }
  keep_at_least(kth ? static_cast<double>(rounded_weight(*kth, m, w.temperature)) : 0.0);
  double cut = 0.0;
  if (w.top_p < 1.0) {
    thread_local std::vector<double> sorted;
    sorted.assign(weights.begin(), weights.end());
    double mass = 0.0;
    for (const double x : weights) mass += x;
    cut = threshold_in(sorted, 0.0, w.top_p * mass, 0.0);
  }
  if (w.min_p > 0.0) cut = std::max(cut, w.min_p * *std::max_element(weights.begin(), weights.end()));
  std::size_t kept = 0;
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (weights[i] > 0.0 && weights[i] >= cut) {
      tokens[kept] = tokens[i];
      weights[kept++] = weights[i];
    }
  tokens.resize(kept);
  weights.resize(kept);
  return row_status::ok;
}

//! The probabilities of the kept tokens: p = e * (1 / sum e) in double, rounded to T (the sum in token
//! order), as seq's renormalisation rounds them. `values` is overwritten, one per weight.
//! \pre the weights come from `sparse_filter` (the maximum's is 1, so the sum is >= 1)
template <class T>
void kept_probabilities(std::span<const double> weights, std::vector<T>& values) {
  double sum = 0.0;
  for (const double e : weights) sum += e;
  const double scale = 1.0 / sum;
  values.resize(weights.size());
  for (std::size_t i = 0; i < weights.size(); ++i) values[i] = static_cast<T>(weights[i] * scale);
}

//! `sparse_filter`, then `kept_probabilities` of the kept tokens: what `warp_logits` writes on those
//! tokens (0 elsewhere) and what verification from logits reads. `values` is empty unless the status
//! is ok. \pre `sparse_filter_applies<T>(w)`, w valid
template <class Arch, class T>
row_status sparse_probabilities(std::span<const T> logits, const warp_params& w, std::vector<token_id>& tokens,
                                std::vector<double>& weights, std::vector<T>& values) {
  const row_status s = sparse_filter<Arch>(logits, w, tokens, weights);
  values.clear();
  if (s == row_status::ok) kept_probabilities(std::span<const double>(weights), values);
  return s;
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
