//! \file sampling/with_policy.hpp
//! \brief Warping and sampling through an execution policy (exec/dispatch.hpp): `warp_logits`,
//! `warp_probs`, `sample_categorical`, `sample_logits` and `top_w_indices` on one host row (seq,
//! simd), and `warp_logits` on a `row_batch` on any backend. `exec::seq` runs the references
//! (distributions/warp.hpp, sampling/categorical.hpp, sampling/sample_logits.hpp,
//! sampling/top_w.hpp); `exec::simd` the simd kernels, with the agreement docs/reference/backends-and-determinism.md
//! states (warp_logits: seq's probabilities up to the last bits of the normalising sum;
//! sample_categorical: seq's token for the same row and u). The step decoder warps and samples its
//! draft rows with these, so that a draft is drawn from the very row that `verify_from_logits` on the
//! same policy computes as q.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/core/row_batch.hpp"
#include "specdec/distributions/row_status.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/distributions/with_policy.hpp"
#include "specdec/exec/backends.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/random/row_sampling.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec {

namespace detail {
//! The shape checks of a batched sampling call: one stream, token and status per row.
//! \throws specdec::error naming the failed condition
inline void check_sample_shapes(std::size_t rows, std::size_t streams, std::size_t tokens, std::size_t statuses) {
  SPECDEC_EXPECTS(streams == rows && tokens == rows && statuses == rows, "one stream, token and status per row");
}
}  // namespace detail

//! probs = warp(softmax(logits / T)) on `Policy`'s backend (see `warp_logits(logits, probs, w)`).
//! \throws specdec::error on invalid `w` or sizes.
template <exec::ExecutionPolicy Policy, class T, class U>
row_status warp_logits(const Policy& policy, std::span<const T> logits, std::span<U> probs, const warp_params& w) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::warp_logits");
  return exec::dispatch<algorithm::warp_logits>(policy, logits, probs, w);
}

//! Row by row: probs.row(r) = warp(softmax(logits.row(r) / T_r)) with `params[r]`, statuses[r] its
//! status. Device memory with `exec::cuda` (float probabilities; `params` stays on the host;
//! asynchronous on the policy's stream; agreement with seq in backend/cuda/filter.cuh).
//! \throws specdec::error on shapes or invalid parameters
template <exec::ExecutionPolicy Policy, class T, class U>
void warp_logits(const Policy& policy, row_batch<const T> logits, row_batch<U> probs, std::span<const warp_params> params,
                 std::span<row_status> statuses) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::warp_logits");
  detail::check_row_shapes(logits, probs, statuses.size(), params.size(), false);
  detail::rows_or_each<algorithm::warp_logits_rows>(
      policy, logits.rows(),
      [&](const auto& row_policy, std::size_t r) {
        statuses[r] = warp_logits(row_policy, logits.row(r), probs.row(r), params[r]);
      },
      logits, probs, params, statuses);
}

//! Filters and renormalises a probability row in place on `Policy`'s backend (see `warp_probs`).
template <exec::ExecutionPolicy Policy, class T>
row_status warp_probs(const Policy& policy, std::span<T> probs, const warp_params& w) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::warp_probs");
  return exec::dispatch<algorithm::warp_probs>(policy, probs, w);
}

//! One token from `weights` with the uniform u on `Policy`'s backend (see `sample_categorical`).
template <exec::ExecutionPolicy Policy, class T>
sample_result sample_categorical(const Policy& policy, std::span<const T> weights, double u) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::sample_categorical");
  return exec::dispatch<algorithm::sample_categorical>(policy, weights, u);
}

//! One token from warp(softmax(logits / T)) with the uniform u on `Policy`'s backend: seq is
//! `sample_logits(logits, w, u)` (sampling/sample_logits.hpp); simd reads the row without writing a
//! warped row where it can (backend/simd/sample_logits.hpp: seq's token, status and mass, bit for
//! bit).
//! \throws specdec::error on invalid `w`
template <exec::ExecutionPolicy Policy, class T>
sample_result sample_logits(const Policy& policy, std::span<const T> logits, const warp_params& w, double u) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::sample_logits");
  return exec::dispatch<algorithm::sample_logits>(policy, logits, w, u);
}

//! The indices of the w largest keys, largest first (see `top_w_indices(keys, w, out)`).
template <exec::ExecutionPolicy Policy, class T>
void top_w_indices(const Policy& policy, std::span<const T> keys, std::size_t w, std::vector<std::size_t>& out) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::top_w_indices");
  exec::dispatch<algorithm::top_w_indices>(policy, keys, w, out);
}

//! Row by row: tokens[r], statuses[r] = `sample_categorical(weights.row(r), u_r)` with
//! u_r = streams[r].open(at.position, at.what).uniform(). Rows need not sum to 1. With `exec::cuda`
//! the rows, tokens and statuses are device memory (streams host; asynchronous on the policy's stream)
//! and the tokens are seq's, bit for bit (backend/cuda/sample.cuh).
//! \throws specdec::error on shapes
template <exec::ExecutionPolicy Policy, class T>
void sample_categorical(const Policy& policy, row_batch<const T> weights, std::span<const random::request_stream> streams,
                        std::span<token_id> tokens, std::span<row_status> statuses, const row_sampling& at = {}) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::sample_categorical");
  detail::check_sample_shapes(weights.rows(), streams.size(), tokens.size(), statuses.size());
  detail::rows_or_each<algorithm::sample_categorical_rows>(
      policy, weights.rows(),
      [&](const auto& row_policy, std::size_t r) {
        const sample_result s = sample_categorical(row_policy, weights.row(r), streams[r].open(at.position, at.what).uniform());
        tokens[r] = s.token;
        statuses[r] = s.status;
      },
      weights, streams, tokens, statuses, at);
}

//! Row by row: the filters of `params[r]` (top-k, then top-p on the survivors, then min-p; the
//! temperature must be 1) zero entries of probs.row(r), without renormalising, and
//! `sample_categorical` draws from what is left with u_r as the overload above. With `exec::cuda` the
//! filtered rows are never written (backend/cuda/sample.cuh's `sample_filtered`: seq's token whenever
//! the masks agree, always for top-k and min-p).
//! \throws specdec::error on shapes, invalid parameters or a temperature other than 1
template <exec::ExecutionPolicy Policy>
void sample_filtered(const Policy& policy, row_batch<const float> probs, std::span<const warp_params> params,
                     std::span<const random::request_stream> streams, std::span<token_id> tokens, std::span<row_status> statuses,
                     const row_sampling& at = {}) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::sample_filtered");
  detail::check_sample_shapes(probs.rows(), streams.size(), tokens.size(), statuses.size());
  SPECDEC_EXPECTS(params.size() == probs.rows(), "one warp_params per row");
  for (const warp_params& w : params) {
    validate(w);
    SPECDEC_EXPECTS(w.temperature == 1.0, "sample_filtered filters probabilities: the temperature must be 1");
  }
  std::vector<float> row;
  detail::rows_or_each<algorithm::sample_filtered_rows>(
      policy, probs.rows(),
      [&](const auto& row_policy, std::size_t r) {
        row.assign(probs.row(r).begin(), probs.row(r).end());
        keep_top_k(std::span<float>(row), params[r].top_k);
        keep_top_p(std::span<float>(row), params[r].top_p);
        keep_min_p(std::span<float>(row), params[r].min_p);
        const sample_result s =
            sample_categorical(row_policy, std::span<const float>(row), streams[r].open(at.position, at.what).uniform());
        tokens[r] = s.token;
        statuses[r] = s.status;
      },
      probs, params, streams, tokens, statuses, at);
}

}  // namespace specdec
