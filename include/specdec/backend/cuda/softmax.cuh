//! \file backend/cuda/softmax.cuh
//! \brief Batched softmax, log-softmax and log-sum-exp of logits [B][V] with a temperature per row on
//! the GPU: the definitions and status rules of distributions/softmax.hpp, within stated bounds.
//!
//! Two kernels, two reads of the logits and one write (the least a softmax can do without keeping
//! the row on chip); rows are split into chunks (primitives/block.cuh), one 256-thread block per chunk, so that
//! B = 1 still spreads a row of 128256 over 32 SMs:
//!  1. `softmax_partials_kernel`: block c of row b writes its chunk's maximum m_c (NaN skipped), the
//!     first index holding it, whether it saw a NaN or +inf, and s_c = sum exp((x - m_c) / T) over
//!     the chunk (double sums) — a one-pass "online" max-sum, so the row is read once for both.
//!  2. `softmax_write_kernel` (`softmax_finalize_kernel` for log-sum-exp alone): every block of the row
//!     first combines the row's partials with one warp in a fixed order, M = max m_c and
//!     S = sum_c s_c exp((m_c - M) / T) (double), so all blocks hold the same bits; then it writes
//!     p_v = U(U(e_v) * (1 / S)) (seq's two rounding steps), log p_v = x_v / T - lse with
//!     lse = M / T + log S, or (T = 0, only through `warp_logits`) the one-hot row on the argmax
//!     (lowest id on ties).
//! Status: a NaN or +inf in the row gives not_finite, a row of -inf only no_mass (seq's rule, exact:
//! no rounding is involved); such rows are zero-filled (softmax), NaN-filled (log-softmax, as seq),
//! and their log-sum-exp is NaN / -inf.
//!
//! **Agreement with seq** (u = 2^-24; the CUDA C++ Programming Guide, Mathematical Functions
//! appendix, documents expf within 2 ulp and exp and log within 1 ulp of the correctly rounded
//! result, so within 2.5 and 1.5 ulp of the exact one; glibc's exp and log are within 1.5 ulp too):
//!  - float logits compute e_v = fma(expf(t_f), r, expf(t_f)), with t = (x_v - M) / T in double,
//!    t_f = float(t) and r = t - t_f: the first-order correction exp(t) = exp(t_f)(1 + r) removes the
//!    error of rounding the argument (|t| u, up to 104 u), so e_v is within 6u of exp(t) (expf 5u,
//!    the fma u). S is then within 6.05u of the exact sum (seq's, in double, is within (V + 2) 2^-53).
//!    Adding seq's rounding of e_v to float and both final roundings:
//!        |p_gpu - p_seq| <= 2^-20 p_seq + 5 * 2^-149          (16u relative; subnormal results)
//!  - double logits use exp((x_v - M) / T) with seq's division, so the argument is seq's; the
//!    one-pass sums rescale by exp((m_c - M) / T), whose split argument adds at most 6 |t| 2^-53
//!    relative per entry, <= 6 ln(V) 2^-53 over the row (the p-weighted mean of |t| is at most the
//!    entropy), and the two sums add in different orders (<= V 2^-53 each):
//!        |p_gpu - p_seq| <= (2V + 160) 2^-53 p_seq            (double probabilities)
//!    With float probabilities from double logits both sides round the same double to float twice:
//!    within 4u, inside the float bound.
//!  - log-sum-exp: |lse_gpu - lse_seq| <= eps_S + 2^-50 (|lse| + ln V + 1), with eps_S = 7u (float
//!    logits) or (2V + 160) 2^-53 (double logits): the relative error of S becomes an absolute one.
//!  - log-softmax: the same ops as seq on x / T - lse, so |out_gpu - out_seq| <= lse bound +
//!    (2 eps_U + 2^-51) |out_seq|, eps_U = 2^-24 (float output) or 2^-53 (double output).
//! The bounds assume nvcc's default IEEE flags (--use_fast_math or -ftz=true void them). The tests
//! (tests/backend/cuda_sampling.cu) check exactly these bounds.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "specdec/backend/cuda/kernels/softmax.cuh"
#include "specdec/backend/cuda/primitives/block.cuh"
#include "specdec/backend/cuda/detail/error.cuh"
#include "specdec/backend/cuda/detail/memory.cuh"
#include "specdec/backend/cuda/primitives/warp.cuh"
#include "specdec/contracts.hpp"
#include "specdec/core/row_batch.hpp"
#include "specdec/core/token.hpp"
#include "specdec/distributions/row_status.hpp"

namespace specdec::backend::cuda {

namespace detail {

//! The workspace of a softmax: a temperature per row and the partials of every chunk.
template <class T>
struct softmax_parts {
  double* temperature;
  softmax_partial* partials;
  softmax_parts(workspace_plan& plan, std::size_t batch, std::size_t vocab)
      : temperature(plan.take<double>(batch)), partials(plan.take<softmax_partial>(batch * chunk_count<T>(vocab))) {}
};

//! Shape checks shared by the row entry points. \throws specdec::error
inline void check_rows(std::size_t batch, std::size_t vocab, std::size_t in_size, std::size_t out_size, std::size_t per_row) {
  SPECDEC_EXPECTS(vocab > 0, "cuda: the vocabulary must not be empty");
  SPECDEC_EXPECTS(vocab <= static_cast<std::size_t>(std::numeric_limits<token_id>::max()),
                  "cuda: the vocabulary exceeds the token id range");
  SPECDEC_EXPECTS(batch <= std::numeric_limits<std::size_t>::max() / vocab, "cuda: batch * vocab overflows");
  SPECDEC_EXPECTS(in_size == batch * vocab, "cuda: the input holds batch * vocab entries");
  SPECDEC_EXPECTS(out_size == batch * vocab, "cuda: the output holds batch * vocab entries");
  SPECDEC_EXPECTS(per_row == batch, "cuda: one status (or result) per row");
}

//! Shape checks of an entry point with an input and an output batch: `out` has `in`'s shape, one
//! status (or result) per row. \throws specdec::error
template <class T, class U>
void check_rows(const row_batch<T>& in, const row_batch<U>& out, std::size_t per_row) {
  check_rows(in.rows(), in.width(), in.data().size(), out.data().size(), per_row);
  SPECDEC_EXPECTS(out.width() == in.width(), "cuda: the output rows have the input's width");
}

//! The grid of a (row, chunk) kernel. \throws specdec::error when it exceeds CUDA's limit.
template <class T>
unsigned row_chunk_grid(std::size_t batch, std::size_t vocab) {
  const std::size_t blocks = batch * chunk_count<T>(vocab);
  SPECDEC_EXPECTS(blocks <= static_cast<std::size_t>(std::numeric_limits<int>::max()), "cuda: too many rows for one launch");
  return static_cast<unsigned>(blocks);
}

//! Host: the per-row temperatures of a softmax, checked as seq does and uploaded to `device`;
//! returns the device pointer the kernels read, or null when there are none (every row T = 1: no
//! upload). \throws specdec::error unless each is finite and > 0
inline const double* upload_temperatures(std::span<const double> temperatures, std::size_t batch, double* device,
                                         cudaStream_t stream) {
  SPECDEC_EXPECTS(temperatures.empty() || temperatures.size() == batch, "cuda softmax: one temperature per row (or none)");
  for (const double t : temperatures) SPECDEC_EXPECTS(t > 0.0 && std::isfinite(t), "temperature must be finite and > 0");
  if (temperatures.empty()) return nullptr;
  copy_to_device(device, temperatures.data(), batch, stream);
  return device;
}

//! Host: kernel 1 over every row.
template <class T>
void launch_softmax_partials(cudaStream_t stream, const T* logits, std::size_t batch, std::size_t vocab,
                             const double* temperature, const softmax_parts<T>& parts) {
  softmax_partials_kernel<T><<<row_chunk_grid<T>(batch, vocab), block_threads, 0, stream>>>(logits, vocab, chunk_count<T>(vocab),
                                                                                            temperature, parts.partials);
  check_launch("softmax_partials_kernel");
}

//! Host: kernel 2 over every row.
template <class T, class U>
void launch_softmax_write(cudaStream_t stream, const T* logits, std::size_t batch, std::size_t vocab, const double* temperature,
                          const softmax_parts<T>& parts, U* out, row_status* statuses, double* lse, softmax_output what) {
  softmax_write_kernel<T, U><<<row_chunk_grid<T>(batch, vocab), block_threads, 0, stream>>>(
      logits, vocab, chunk_count<T>(vocab), temperature, parts.partials, out, statuses, lse, what);
  check_launch("softmax_write_kernel");
}

//! Host: softmax or log-softmax, the shared body of the entry points.
template <class T, class U>
void softmax_rows(cudaStream_t stream, row_batch<const T> logits, row_batch<U> out, std::span<row_status> statuses,
                  std::span<const double> temperatures, std::span<std::byte> workspace, softmax_output what) {
  static_assert(float_or_double<T> && float_or_double<U>, "cuda softmax: float or double rows");
  check_rows(logits, out, statuses.size());
  const std::size_t batch = logits.rows(), vocab = logits.width();
  workspace_plan plan(workspace);
  const softmax_parts<T> parts(plan, batch, vocab);
  if (batch == 0) return;
  const double* temperature = upload_temperatures(temperatures, batch, parts.temperature, stream);
  launch_softmax_partials(stream, logits.data().data(), batch, vocab, temperature, parts);
  launch_softmax_write(stream, logits.data().data(), batch, vocab, temperature, parts, out.data().data(), statuses.data(),
                       nullptr, what);
}

}  // namespace detail

//! Bytes of device workspace that `softmax`, `log_softmax` and `log_sum_exp` need for `batch` rows
//! of `vocab` logits of type T (CUB's two-phase pattern).
template <class T>
std::size_t softmax_workspace_bytes(std::size_t batch, std::size_t vocab) {
  workspace_plan plan;
  (void)detail::softmax_parts<T>(plan, batch, vocab);
  return plan.bytes();
}

//! probs.row(b) = softmax(logits.row(b) / T_b) for every row of `logits` (device memory; `probs`
//! has the same shape), as `specdec::softmax` (distributions/softmax.hpp) within the bound of the file comment;
//! statuses[b] says whether row b was usable (exactly seq's status); unusable rows are zero-filled.
//! `temperatures` is a host span, one per row (empty: all 1); `workspace` is device memory of
//! `softmax_workspace_bytes<T>(logits.rows(), logits.width())` bytes. Asynchronous on `stream`.
//! \throws specdec::error on shapes, a temperature that is not finite and > 0, or a small
//! workspace; specdec::cuda_error on CUDA errors.
template <class T, class U>
void softmax(cudaStream_t stream, row_batch<const T> logits, row_batch<U> probs, std::span<row_status> statuses,
             std::span<const double> temperatures, std::span<std::byte> workspace) {
  detail::softmax_rows(stream, logits, probs, statuses, temperatures, workspace, detail::softmax_output::probs);
}

//! `softmax` with a workspace allocated (and freed) on `stream`.
template <class T, class U>
void softmax(cudaStream_t stream, row_batch<const T> logits, row_batch<U> probs, std::span<row_status> statuses,
             std::span<const double> temperatures = {}) {
  device_buffer workspace(softmax_workspace_bytes<T>(logits.rows(), logits.width()), stream);
  softmax(stream, logits, probs, statuses, temperatures, workspace.span());
}

//! out.row(b) = log_softmax(logits.row(b) / T_b), as `specdec::log_softmax` within the bound of the file
//! comment; unusable rows are NaN-filled (as seq). Arguments and errors as `softmax`.
template <class T, class U>
void log_softmax(cudaStream_t stream, row_batch<const T> logits, row_batch<U> out, std::span<row_status> statuses,
                 std::span<const double> temperatures, std::span<std::byte> workspace) {
  detail::softmax_rows(stream, logits, out, statuses, temperatures, workspace, detail::softmax_output::log_probs);
}

//! `log_softmax` with a workspace allocated (and freed) on `stream`.
template <class T, class U>
void log_softmax(cudaStream_t stream, row_batch<const T> logits, row_batch<U> out, std::span<row_status> statuses,
                 std::span<const double> temperatures = {}) {
  device_buffer workspace(softmax_workspace_bytes<T>(logits.rows(), logits.width()), stream);
  log_softmax(stream, logits, out, statuses, temperatures, workspace.span());
}

//! lse[b] = log(sum_v exp(logits.row(b)[v] / T_b)) (device, one per row), as `specdec::log_sum_exp`
//! within the bound of the file comment: NaN for a row with NaN or +inf, -inf for a row of -inf
//! only, with the status. One read of the logits. Arguments and errors as `softmax`.
template <class T>
void log_sum_exp(cudaStream_t stream, row_batch<const T> logits, std::span<double> lse, std::span<row_status> statuses,
                 std::span<const double> temperatures, std::span<std::byte> workspace) {
  static_assert(detail::float_or_double<T>, "cuda log_sum_exp: float or double rows");
  detail::check_rows(logits, logits, statuses.size());
  const std::size_t batch = logits.rows(), vocab = logits.width();
  SPECDEC_EXPECTS(lse.size() == batch, "cuda log_sum_exp: one result per row");
  workspace_plan plan(workspace);
  const detail::softmax_parts<T> parts(plan, batch, vocab);
  if (batch == 0) return;
  const double* temperature = detail::upload_temperatures(temperatures, batch, parts.temperature, stream);
  detail::launch_softmax_partials(stream, logits.data().data(), batch, vocab, temperature, parts);
  const std::size_t blocks = (batch + detail::block_warps - 1) / detail::block_warps;
  detail::softmax_finalize_kernel<<<static_cast<unsigned>(blocks), detail::block_threads, 0, stream>>>(
      parts.partials, detail::chunk_count<T>(vocab), temperature, batch, lse.data(), statuses.data());
  check_launch("softmax_finalize_kernel");
}

//! `log_sum_exp` with a workspace allocated (and freed) on `stream`.
template <class T>
void log_sum_exp(cudaStream_t stream, row_batch<const T> logits, std::span<double> lse, std::span<row_status> statuses,
                 std::span<const double> temperatures = {}) {
  device_buffer workspace(softmax_workspace_bytes<T>(logits.rows(), logits.width()), stream);
  log_sum_exp(stream, logits, lse, statuses, temperatures, workspace.span());
}

}  // namespace specdec::backend::cuda
