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
#include <span>
#include <vector>

#include "specdec/core/row_batch.hpp"
#include "specdec/distributions/row_status.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/distributions/with_policy.hpp"
#include "specdec/exec/backends.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec {

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
      logits.data(), logits.rows(), logits.width(), probs.data(), params, statuses);
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
//! warped row where it can (backend/simd/sample_logits.hpp: tokens agree with seq's except where a
//! rounding boundary moves).
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

}  // namespace specdec
