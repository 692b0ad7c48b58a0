//! \file estimate/indicators.hpp
//! \brief The two indicators Speculative Verification reads from a companion model (Kim et al., SV,
//! shared/seeds/001_*.txt, section 4.2; appendix D, Definitions D.1 and D.2):
//!
//!   S = sum_v min(P_d(v), P_c(v))          (eq. (1): the natural divergence of the draft and companion rows)
//!   A = min(1, P_c(t_d) / P_d(t_d))        (eq. (2): t_d's acceptance probability if the companion verified it)
//!
//! for every drafted token t_d, where P_d is the (warped) draft row t_d was sampled from and P_c the
//! companion's row at the same position, computed on the same context. S depends only on the context,
//! A also on the drafted token itself. `compute_indicators` does a batch of rows (rows of several
//! requests are simply concatenated); this is the sequential reference that the SIMD and CUDA backends
//! are tested against.
//!
//! Bad input: a row with a NaN, an infinity or a negative entry, a row whose sum is not 1 within 1e-3,
//! a token outside [0, V) or a token the draft row gives probability 0 (it cannot have been drafted
//! from it) throw `specdec::error`; S is clamped to [0, 1] after the sum (float rounding).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/distributions/divergence.hpp"
#include "specdec/exec/dispatch.hpp"
#include "specdec/exec/policy.hpp"

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
}  // namespace specdec::estimate::detail

#if SPECDEC_ENABLE_CUDA && SPECDEC_CUDA_TRANSLATION_UNIT
namespace specdec::backend::cuda {
// Defined in backend/cuda/indicators.cuh (included at the end of this file, which it includes itself).
template <class T, class U>
void compute_indicators(CUstream_st* stream, std::span<const T> draft_rows, std::span<const U> companion_rows,
                        std::span<const token_id> tokens, std::size_t vocab_size, std::span<double> s, std::span<double> a);
}  // namespace specdec::backend::cuda
#endif

#if SPECDEC_ENABLE_SIMD
#include "specdec/exec/simd.hpp"  // xsimd is included only when the simd backend is enabled
namespace specdec::backend::simd {
// Defined in backend/simd/indicators.hpp (included at the end of this file, which it includes itself).
template <class Arch, class T, class U>
void compute_indicators(std::span<const T> draft_rows, std::span<const U> companion_rows, std::span<const token_id> tokens,
                        std::size_t vocab_size, std::span<double> s, std::span<double> a);
}  // namespace specdec::backend::simd
#endif

namespace specdec::estimate {

//! S and A for n drafted tokens: `draft_rows` and `companion_rows` are [n][V] row-major, row i
//! belonging to `tokens[i]`; writes `s[i]` and `a[i]`. Rows of several requests may be concatenated
//! (a packed ragged batch): each row is independent. `exec::seq` is this reference loop; `exec::simd`
//! runs backend/simd/indicators.hpp (S within 1e-12 of seq's, A identical, the same errors);
//! `exec::cuda` (in a CUDA translation unit) runs backend/cuda/indicators.cuh on device spans, on the
//! policy's stream, and waits for it (S within `indicators_agreement_bound(V)`, A identical, seq's errors).
//! \pre vocab_size > 0; draft_rows.size() == companion_rows.size() == n * vocab_size with n ==
//!      tokens.size() == s.size() == a.size(); the rows and tokens as for `similarity` and
//!      `companion_acceptance`.
//! \throws specdec::error otherwise (naming the failed condition; nothing is written past the bad row).
template <exec::ExecutionPolicy Policy, class T, class U>
void compute_indicators(const Policy& policy, std::span<const T> draft_rows, std::span<const U> companion_rows,
                        std::span<const token_id> tokens, std::size_t vocab_size, std::span<double> s, std::span<double> a) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::estimate::compute_indicators");
#if SPECDEC_ENABLE_SIMD
  if constexpr (exec::backend_of<Policy> == exec::backend::simd)
    return backend::simd::compute_indicators<exec::simd_arch_t<Policy>>(draft_rows, companion_rows, tokens, vocab_size, s, a);
#endif
#if SPECDEC_ENABLE_CUDA && SPECDEC_CUDA_TRANSLATION_UNIT
  if constexpr (exec::backend_of<Policy> == exec::backend::cuda)
    return backend::cuda::compute_indicators(policy.stream, draft_rows, companion_rows, tokens, vocab_size, s, a);
#endif
  (void)policy;
  detail::check_indicator_shapes(draft_rows, companion_rows, tokens, vocab_size, s, a);
  const std::size_t n = tokens.size();
  for (std::size_t i = 0; i < n; ++i) {
    const auto d = draft_rows.subspan(i * vocab_size, vocab_size);
    const auto c = companion_rows.subspan(i * vocab_size, vocab_size);
    s[i] = similarity(d, c);
    a[i] = companion_acceptance(d, c, tokens[i]);
  }
}

}  // namespace specdec::estimate

#if SPECDEC_ENABLE_SIMD
#include "specdec/backend/simd/indicators.hpp"
#endif
#if SPECDEC_ENABLE_CUDA && SPECDEC_CUDA_TRANSLATION_UNIT
#include "specdec/backend/cuda/indicators.cuh"
#endif
