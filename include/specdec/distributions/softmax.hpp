//! \file distributions/softmax.hpp
//! \brief Stable log-sum-exp, softmax and log-softmax with temperature.
//!
//! All reductions accumulate in double, subtracting the row maximum first, so logits of any
//! magnitude give finite results; -inf logits become probability 0. A row with NaN or +inf is
//! reported as `row_status::not_finite`, a row of -inf only as `row_status::no_mass`.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <span>

#include "specdec/contracts.hpp"
#include "specdec/distributions/row_status.hpp"

namespace specdec {

namespace detail {
//! The maximum of a row of logits and whether it is usable (no NaN, no +inf, not all -inf).
template <class T>
row_status logit_row_max(std::span<const T> logits, double& max_out) noexcept {
  double m = -std::numeric_limits<double>::infinity();
  bool finite = true;
  for (const T x : logits) {
    const double v = static_cast<double>(x);
    if (std::isnan(v) || v == std::numeric_limits<double>::infinity()) finite = false;
    if (v > m) m = v;
  }
  max_out = m;
  if (!finite) return row_status::not_finite;
  if (m == -std::numeric_limits<double>::infinity()) return row_status::no_mass;
  return row_status::ok;
}

//! sum_v exp((logits_v - m) / temperature), m the row's maximum (so the sum is >= 1).
template <class T>
double sum_exp_below(std::span<const T> logits, double m, double temperature) noexcept {
  double sum = 0.0;
  for (const T x : logits) sum += std::exp((static_cast<double>(x) - m) / temperature);
  return sum;
}
}  // namespace detail

//! log(sum_v exp(logits_v / temperature)), stable. NaN for a row with NaN or +inf, -inf for a
//! row of -inf only (or whose maximum / temperature is below -DBL_MAX: the value overflows; +inf
//! when it is above DBL_MAX).
//! \pre temperature > 0
template <class T>
double log_sum_exp(std::span<const T> logits, double temperature = 1.0) {
  SPECDEC_EXPECTS(temperature > 0.0 && std::isfinite(temperature), "temperature must be finite and > 0");
  double m = 0.0;
  const row_status s = detail::logit_row_max(logits, m);
  if (s == row_status::not_finite) return std::numeric_limits<double>::quiet_NaN();
  if (s == row_status::no_mass) return -std::numeric_limits<double>::infinity();
  return m / temperature + std::log(detail::sum_exp_below(logits, m, temperature));
}

//! probs = softmax(logits / temperature). On a row that is not usable, `probs` is zero-filled and
//! the status says why.
//! \pre probs.size() == logits.size(), temperature > 0
template <class T, class U>
row_status softmax(std::span<const T> logits, std::span<U> probs, double temperature = 1.0) {
  SPECDEC_EXPECTS(probs.size() == logits.size(), "probs and logits differ in length");
  SPECDEC_EXPECTS(temperature > 0.0 && std::isfinite(temperature), "temperature must be finite and > 0");
  double m = 0.0;
  const row_status s = detail::logit_row_max(logits, m);
  if (s != row_status::ok) {
    for (U& p : probs) p = U(0);
    return s;
  }
  double sum = 0.0;
  for (std::size_t v = 0; v < logits.size(); ++v) {
    const double e = std::exp((static_cast<double>(logits[v]) - m) / temperature);
    probs[v] = static_cast<U>(e);
    sum += e;
  }
  const double inv = 1.0 / sum;  // sum >= 1: the maximum contributes exp(0)
  for (U& p : probs) p = static_cast<U>(static_cast<double>(p) * inv);
  return row_status::ok;
}

//! out = log_softmax(logits / temperature) = logits / T - lse; -inf where the probability is 0. When
//! lse overflows (|max| / T beyond DBL_MAX: huge logits or a tiny T), out = (logits - max) / T -
//! log sum exp((logits - max) / T) instead (x / T - lse gave inf - inf = NaN with status ok, or
//! no_mass for a row with mass; found by tests/fuzz/warp_and_sample.cpp). The status is softmax's.
//! \pre out.size() == logits.size(), temperature > 0
template <class T, class U>
row_status log_softmax(std::span<const T> logits, std::span<U> out, double temperature = 1.0) {
  SPECDEC_EXPECTS(out.size() == logits.size(), "out and logits differ in length");
  SPECDEC_EXPECTS(temperature > 0.0 && std::isfinite(temperature), "temperature must be finite and > 0");
  double m = 0.0;
  const row_status s = detail::logit_row_max(logits, m);
  if (s != row_status::ok) {
    for (U& o : out) o = std::numeric_limits<U>::quiet_NaN();
    return s;
  }
  const double log_sum = std::log(detail::sum_exp_below(logits, m, temperature));
  const double lse = m / temperature + log_sum;  // log_sum_exp's value
  if (std::isfinite(lse)) {
    for (std::size_t v = 0; v < logits.size(); ++v) out[v] = static_cast<U>(static_cast<double>(logits[v]) / temperature - lse);
  } else {
    for (std::size_t v = 0; v < logits.size(); ++v)
      out[v] = static_cast<U>((static_cast<double>(logits[v]) - m) / temperature - log_sum);
  }
  return row_status::ok;
}

//! The index of the largest entry; ties go to the lowest index (the convention of every greedy
//! rule in specdec). NaN entries are skipped; returns -1 for an empty or all-NaN row.
template <class T>
std::ptrdiff_t argmax(std::span<const T> row) noexcept {
  std::ptrdiff_t best = -1;
  for (std::size_t v = 0; v < row.size(); ++v) {
    if (std::isnan(static_cast<double>(row[v]))) continue;
    if (best < 0 || row[v] > row[static_cast<std::size_t>(best)]) best = static_cast<std::ptrdiff_t>(v);
  }
  return best;
}

}  // namespace specdec
