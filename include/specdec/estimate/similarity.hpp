//! \file estimate/similarity.hpp
//! \brief The per-row indicators of Speculative Verification, S (`similarity`) and A
//! (`companion_acceptance`), and the checks every backend of `estimate::compute_indicators`
//! (estimate/indicators.hpp) shares.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/distributions/divergence.hpp"

namespace specdec::estimate {

namespace detail {
//! Tolerance on the sum of a probability row given to the indicators.
inline constexpr double row_sum_tolerance = 1e-3;

//! True when every entry is finite and >= 0 and the entries sum to 1 within `row_sum_tolerance`.
template <class T>
bool is_distribution_row(std::span<const T> row) {
  double sum = 0.0;
  for (const T x : row) {
    const double v = static_cast<double>(x);
    if (!(v >= 0.0) || !std::isfinite(v)) return false;
    sum += v;
  }
  return std::abs(sum - 1.0) <= row_sum_tolerance;
}
}  // namespace detail

//! S = sum_v min(P_d(v), P_c(v)) of one position (SV Def. D.1, eq. (1)), clamped to [0, 1]. S = 1 when
//! the two rows agree, 0 when their supports are disjoint; it equals 1 - TV(P_d, P_c).
//! \pre both rows have the same non-zero length, finite non-negative entries, sums 1 within 1e-3.
//! \throws specdec::error otherwise.
template <class T, class U>
double similarity(std::span<const T> draft_row, std::span<const U> companion_row) {
  SPECDEC_EXPECTS(!draft_row.empty() && draft_row.size() == companion_row.size(),
                  "the draft and companion rows must have the same non-zero length");
  SPECDEC_EXPECTS(detail::is_distribution_row(draft_row), "the draft row is not a probability row (NaN, negative, or sum != 1)");
  SPECDEC_EXPECTS(detail::is_distribution_row(companion_row),
                  "the companion row is not a probability row (NaN, negative, or sum != 1)");
  return std::clamp(overlap(draft_row, companion_row), 0.0, 1.0);
}

//! A = min(1, P_c(t) / P_d(t)) for the drafted token t (SV Def. D.2, eq. (2)): the probability that
//! the companion, used as a target, would accept t under the standard rule. Reads two entries only;
//! call `similarity` (or `compute_indicators`) to validate whole rows.
//! \pre t in [0, V); P_d(t) > 0 and finite; P_c(t) >= 0 and finite.
//! \throws specdec::error otherwise.
template <class T, class U>
double companion_acceptance(std::span<const T> draft_row, std::span<const U> companion_row, token_id t) {
  SPECDEC_EXPECTS(draft_row.size() == companion_row.size(), "the draft and companion rows must have the same length");
  SPECDEC_EXPECTS(in_vocabulary(t, draft_row.size()), "the drafted token is outside [0, V)");
  const double pd = static_cast<double>(draft_row[static_cast<std::size_t>(t)]);
  const double pc = static_cast<double>(companion_row[static_cast<std::size_t>(t)]);
  SPECDEC_EXPECTS(pd > 0.0 && std::isfinite(pd), "P_d(t) must be > 0 and finite (the token was drafted from P_d)");
  SPECDEC_EXPECTS(pc >= 0.0 && std::isfinite(pc), "P_c(t) must be >= 0 and finite");
  return pc >= pd ? 1.0 : pc / pd;
}

}  // namespace specdec::estimate

namespace specdec::estimate::detail {
//! The shape preconditions of `compute_indicators`, shared by every backend.
//! \throws specdec::error naming the failed condition
template <class T, class U>
void check_indicator_shapes(std::span<const T> draft_rows, std::span<const U> companion_rows, std::span<const token_id> tokens,
                            std::size_t vocab_size, std::span<double> s, std::span<double> a) {
  SPECDEC_EXPECTS(vocab_size > 0, "vocab_size must be > 0");
  const std::size_t n = tokens.size();
  SPECDEC_EXPECTS(draft_rows.size() == n * vocab_size && companion_rows.size() == n * vocab_size,
                  "draft_rows and companion_rows must hold tokens.size() rows of vocab_size entries");
  SPECDEC_EXPECTS(s.size() == n && a.size() == n, "s and a must hold one entry per token");
}

//! `compute_indicators` with a backend's row similarity `similar(draft_row, companion_row)`: the shape
//! checks, then S and A of each drafted token (every backend's host loop).
//! \throws specdec::error on shapes, or from `similar` on rows that are not distributions
template <class T, class U, class Similarity>
void indicators_row_by_row(std::span<const T> draft_rows, std::span<const U> companion_rows, std::span<const token_id> tokens,
                           std::size_t vocab_size, std::span<double> s, std::span<double> a, Similarity&& similar) {
  check_indicator_shapes(draft_rows, companion_rows, tokens, vocab_size, s, a);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const auto d = draft_rows.subspan(i * vocab_size, vocab_size);
    const auto c = companion_rows.subspan(i * vocab_size, vocab_size);
    s[i] = similar(d, c);
    a[i] = companion_acceptance(d, c, tokens[i]);
  }
}
}  // namespace specdec::estimate::detail
