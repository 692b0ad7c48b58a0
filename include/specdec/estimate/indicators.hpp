//! \file estimate/indicators.hpp
//! \brief The two indicators Speculative Verification reads from a companion model (Kim et al., SV,
//! "Speculative Verification: Exploiting Information Gain for Speculative Decoding", section 4.2; appendix D,
//! Definitions D.1 and D.2):
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

#include <cstddef>
#include <span>

#include "specdec/core/row_batch.hpp"
#include "specdec/core/token.hpp"
#include "specdec/estimate/similarity.hpp"
#include "specdec/exec/backends.hpp"

namespace specdec::estimate {

//! S and A for n drafted tokens: `draft_rows` and `companion_rows` are n rows of V, row i belonging
//! to `tokens[i]`; writes `s[i]` and `a[i]`. Rows of several requests may be concatenated (a packed
//! ragged batch): each row is independent. `exec::seq` is the reference loop
//! (backend/seq/algorithms.hpp); `exec::simd` runs backend/simd/indicators.hpp (S within 1e-12 of
//! seq's, A identical, the same errors); `exec::cuda` (in a CUDA translation unit) runs
//! backend/cuda/indicators.cuh on device memory, on the policy's stream, and waits for it (S within
//! `indicators_agreement_bound(V)`, A identical, seq's errors).
//! \pre the two batches have the same shape, V > 0, n == tokens.size() == s.size() == a.size();
//!      the rows and tokens as for `similarity` and `companion_acceptance`.
//! \throws specdec::error otherwise (naming the failed condition; nothing is written past the bad row).
template <exec::ExecutionPolicy Policy, class T, class U>
void compute_indicators(const Policy& policy, row_batch<const T> draft_rows, row_batch<const U> companion_rows,
                        std::span<const token_id> tokens, std::span<double> s, std::span<double> a) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::estimate::compute_indicators");
  SPECDEC_EXPECTS(draft_rows.width() == companion_rows.width(), "the draft and companion rows must have the same width");
  exec::dispatch<algorithm::compute_indicators>(policy, draft_rows.data(), companion_rows.data(), tokens, draft_rows.width(), s,
                                                a);
}

}  // namespace specdec::estimate
