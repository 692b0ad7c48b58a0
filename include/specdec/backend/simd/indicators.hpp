//! \file backend/simd/indicators.hpp
//! \brief SV's indicators on the simd backend (Kim et al., SV, section 4.2, eqs. (1)-(2); the seq
//! reference is backend/seq/algorithms.hpp):
//!
//!   S = sum_v min(P_d(v), P_c(v))      (one pass over the row pair, `backend::simd::overlap`)
//!   A = min(1, P_c(t_d) / P_d(t_d))    (two scalar reads: seq's `companion_acceptance` itself)
//!
//! The row checks (finite, non-negative, sum 1 within 1e-3) are exact except the sum, which adds in
//! lane order (a row whose sum is within ~1e-12 of the tolerance edge could be judged differently).
//! S agrees with seq within 1e-12 (the order of the sum); A is identical. Same errors as seq.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>

#include "specdec/backend/simd/divergence.hpp"
#include "specdec/backend/simd/reduce.hpp"
#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/estimate/similarity.hpp"

namespace specdec::backend::simd {

namespace detail {
//! `estimate::detail::is_distribution_row` with the simd row checks.
template <class Arch, class T>
bool is_distribution_row(std::span<const T> row) {
  return summarise<Arch>(row).usable && std::abs(sum<Arch>(row) - 1.0) <= estimate::detail::row_sum_tolerance;
}
}  // namespace detail

//! S = sum_v min(P_d(v), P_c(v)), clamped to [0, 1], as `estimate::similarity`.
//! \pre both rows have the same non-zero length, finite non-negative entries, sums 1 within 1e-3.
//! \throws specdec::error otherwise.
template <class Arch, class T, class U>
double similarity(std::span<const T> draft_row, std::span<const U> companion_row) {
  SPECDEC_EXPECTS(!draft_row.empty() && draft_row.size() == companion_row.size(),
                  "the draft and companion rows must have the same non-zero length");
  SPECDEC_EXPECTS(detail::is_distribution_row<Arch>(draft_row),
                  "the draft row is not a probability row (NaN, negative, or sum != 1)");
  SPECDEC_EXPECTS(detail::is_distribution_row<Arch>(companion_row),
                  "the companion row is not a probability row (NaN, negative, or sum != 1)");
  return std::clamp(overlap<Arch>(draft_row, companion_row), 0.0, 1.0);
}

//! S and A for n drafted tokens, as `estimate::compute_indicators`: `draft_rows` and
//! `companion_rows` are [n][V] row-major, row i belonging to `tokens[i]`.
//! \throws specdec::error on the same conditions as seq.
template <class Arch, class T, class U>
void compute_indicators(std::span<const T> draft_rows, std::span<const U> companion_rows, std::span<const token_id> tokens,
                        std::size_t vocab_size, std::span<double> s, std::span<double> a) {
  estimate::detail::indicators_row_by_row(draft_rows, companion_rows, tokens, vocab_size, s, a,
                                          [](auto d, auto c) { return similarity<Arch>(d, c); });
}

}  // namespace specdec::backend::simd
