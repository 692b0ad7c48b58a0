//! \file distributions/with_policy.hpp
//! \brief Softmax, log-softmax, log-sum-exp, argmax and the divergences through an execution policy
//! (exec/dispatch.hpp): one row on a host backend (seq, simd), or a `row_batch` of rows on any
//! backend (cuda runs one kernel for the batch; host backends run the row algorithm on each row).
//! What each simd kernel guarantees against seq is in docs/reference/backends-and-determinism.md, each cuda kernel in its
//! header (backend/cuda/softmax.cuh).
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <utility>

#include "specdec/contracts.hpp"
#include "specdec/core/row_batch.hpp"
#include "specdec/distributions/row_status.hpp"
#include "specdec/exec/backends.hpp"

namespace specdec {

namespace detail {
//! The counts of a batched row algorithm's per-row arguments: one status per row, and per-row
//! parameters either none (`optional_params`) or one per row.
//! \throws specdec::error naming the failed condition
inline void check_row_counts(std::size_t rows, std::size_t statuses, std::size_t params, bool optional_params) {
  SPECDEC_EXPECTS(statuses == rows, "one status per row");
  SPECDEC_EXPECTS(params == rows || (optional_params && params == 0), "one parameter per row");
}

//! The shape checks of a batched row algorithm that writes rows: `out` has `in`'s shape, and the
//! counts of `check_row_counts`.
//! \throws specdec::error naming the failed condition
template <class T, class U>
void check_row_shapes(const row_batch<T>& in, const row_batch<U>& out, std::size_t statuses, std::size_t params,
                      bool optional_params) {
  SPECDEC_EXPECTS(out.rows() == in.rows() && out.width() == in.width(), "the output rows must have the input's shape");
  check_row_counts(in.rows(), statuses, params, optional_params);
}

//! Runs `RowsAlgorithm` with `batch_args` when the policy's backend has a kernel for the whole
//! batch, and `per_row(policy, r)` for every row otherwise (a generic lambda, so that a backend
//! with a batch kernel never instantiates the row algorithm).
template <class RowsAlgorithm, class Policy, class PerRow, class... BatchArgs>
void rows_or_each(const Policy& policy, std::size_t rows, PerRow&& per_row, BatchArgs&&... batch_args) {
  if constexpr (exec::implements<exec::backend_of<Policy>, RowsAlgorithm>)
    exec::dispatch<RowsAlgorithm>(policy, std::forward<BatchArgs>(batch_args)...);
  else
    for (std::size_t r = 0; r < rows; ++r) per_row(policy, r);
}

//! Row r's temperature: 1 when none are given.
inline double temperature_of(std::span<const double> temperatures, std::size_t r) {
  return temperatures.empty() ? 1.0 : temperatures[r];
}
}  // namespace detail

//! probs = softmax(logits / temperature) on `Policy`'s backend (see `softmax(logits, probs, t)`).
//! \throws specdec::error on sizes or a temperature that is not finite and > 0
template <exec::ExecutionPolicy Policy, class T, class U>
row_status softmax(const Policy& policy, std::span<const T> logits, std::span<U> probs, double temperature = 1.0) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::softmax");
  return exec::dispatch<algorithm::softmax>(policy, logits, probs, temperature);
}

//! out = log_softmax(logits / temperature) on `Policy`'s backend (see `log_softmax(logits, out, t)`).
template <exec::ExecutionPolicy Policy, class T, class U>
row_status log_softmax(const Policy& policy, std::span<const T> logits, std::span<U> out, double temperature = 1.0) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::log_softmax");
  return exec::dispatch<algorithm::log_softmax>(policy, logits, out, temperature);
}

//! log(sum_v exp(logits[v] / temperature)) on `Policy`'s backend (see `log_sum_exp(logits, t)`).
template <exec::ExecutionPolicy Policy, class T>
double log_sum_exp(const Policy& policy, std::span<const T> logits, double temperature = 1.0) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::log_sum_exp");
  return exec::dispatch<algorithm::log_sum_exp>(policy, logits, temperature);
}

//! Row by row: probs.row(r) = softmax(logits.row(r) / T_r), statuses[r] its status; `temperatures`
//! empty (all 1) or one per row. Device memory with `exec::cuda` (temperatures stay on the host;
//! asynchronous on the policy's stream).
//! \throws specdec::error on shapes or temperatures
template <exec::ExecutionPolicy Policy, class T, class U>
void softmax(const Policy& policy, row_batch<const T> logits, row_batch<U> probs, std::span<row_status> statuses,
             std::span<const double> temperatures = {}) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::softmax");
  detail::check_row_shapes(logits, probs, statuses.size(), temperatures.size(), true);
  detail::rows_or_each<algorithm::softmax_rows>(
      policy, logits.rows(),
      [&](const auto& row_policy, std::size_t r) {
        statuses[r] = softmax(row_policy, logits.row(r), probs.row(r), detail::temperature_of(temperatures, r));
      },
      logits, probs, statuses, temperatures);
}

//! Row by row: out.row(r) = log_softmax(logits.row(r) / T_r); arguments as the batched `softmax`.
template <exec::ExecutionPolicy Policy, class T, class U>
void log_softmax(const Policy& policy, row_batch<const T> logits, row_batch<U> out, std::span<row_status> statuses,
                 std::span<const double> temperatures = {}) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::log_softmax");
  detail::check_row_shapes(logits, out, statuses.size(), temperatures.size(), true);
  detail::rows_or_each<algorithm::log_softmax_rows>(
      policy, logits.rows(),
      [&](const auto& row_policy, std::size_t r) {
        statuses[r] = log_softmax(row_policy, logits.row(r), out.row(r), detail::temperature_of(temperatures, r));
      },
      logits, out, statuses, temperatures);
}

//! Row by row: lse[r] = log_sum_exp(logits.row(r) / T_r): NaN with `row_status::not_finite` for a
//! row holding a NaN or +inf, -inf with `row_status::no_mass` for a row of -inf only; arguments as
//! the batched `softmax`, one result per row.
template <exec::ExecutionPolicy Policy, class T>
void log_sum_exp(const Policy& policy, row_batch<const T> logits, std::span<double> lse, std::span<row_status> statuses,
                 std::span<const double> temperatures = {}) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::log_sum_exp");
  SPECDEC_EXPECTS(lse.size() == logits.rows(), "one result per row");
  detail::check_row_counts(logits.rows(), statuses.size(), temperatures.size(), true);
  detail::rows_or_each<algorithm::log_sum_exp_rows>(
      policy, logits.rows(),
      [&](const auto& row_policy, std::size_t r) {
        lse[r] = log_sum_exp(row_policy, logits.row(r), detail::temperature_of(temperatures, r));
        statuses[r] = std::isnan(lse[r])                                   ? row_status::not_finite
                      : lse[r] == -std::numeric_limits<double>::infinity() ? row_status::no_mass
                                                                           : row_status::ok;
      },
      logits, lse, statuses, temperatures);
}

//! The index of the largest entry (lowest index on ties) on `Policy`'s backend (see `argmax(row)`).
template <exec::ExecutionPolicy Policy, class T>
std::ptrdiff_t argmax(const Policy& policy, std::span<const T> row) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::argmax");
  return exec::dispatch<algorithm::argmax>(policy, row);
}

//! sum_v min(p_v, q_v) on `Policy`'s backend (see `overlap(p, q)`).
template <exec::ExecutionPolicy Policy, class T, class U>
double overlap(const Policy& policy, std::span<const T> p, std::span<const U> q) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::overlap");
  return exec::dispatch<algorithm::overlap>(policy, p, q);
}

//! (1/2) sum_v |p_v - q_v| on `Policy`'s backend (see `total_variation(p, q)`).
template <exec::ExecutionPolicy Policy, class T, class U>
double total_variation(const Policy& policy, std::span<const T> p, std::span<const U> q) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::total_variation");
  return exec::dispatch<algorithm::total_variation>(policy, p, q);
}

//! -sum_v p_v log p_v on `Policy`'s backend (see `entropy(p)`).
template <exec::ExecutionPolicy Policy, class T>
double entropy(const Policy& policy, std::span<const T> p) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::entropy");
  return exec::dispatch<algorithm::entropy>(policy, p);
}

//! -sum_v p_v log q_v on `Policy`'s backend (see `cross_entropy(p, q)`).
template <exec::ExecutionPolicy Policy, class T, class U>
double cross_entropy(const Policy& policy, std::span<const T> p, std::span<const U> q) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::cross_entropy");
  return exec::dispatch<algorithm::cross_entropy>(policy, p, q);
}

//! sum_v p_v log(p_v / q_v) on `Policy`'s backend (see `kl_divergence(p, q)`).
template <exec::ExecutionPolicy Policy, class T, class U>
double kl_divergence(const Policy& policy, std::span<const T> p, std::span<const U> q) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::kl_divergence");
  return exec::dispatch<algorithm::kl_divergence>(policy, p, q);
}

}  // namespace specdec
