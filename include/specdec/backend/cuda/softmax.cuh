//! \file backend/cuda/softmax.cuh
//! \brief Batched softmax, log-softmax and log-sum-exp of logits [B][V] with a temperature per row on
//! the GPU: the definitions and status rules of distributions/softmax.hpp, within stated bounds.
//!
//! Two kernels, two reads of the logits and one write (the least a softmax can do without keeping
//! the row on chip); rows are split into chunks (block.cuh), one 256-thread block per chunk, so that
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

#include "specdec/backend/cuda/block.cuh"
#include "specdec/backend/cuda/error.cuh"
#include "specdec/backend/cuda/memory.cuh"
#include "specdec/backend/cuda/warp.cuh"
#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/distributions/row_status.hpp"

namespace specdec::backend::cuda {

namespace detail {

template <class T>
inline constexpr bool float_or_double = std::is_same_v<T, float> || std::is_same_v<T, double>;

//! What block c learns about chunk c of its row (kernel 1).
struct softmax_partial {
  double max;        //!< the largest logit of the chunk (NaN skipped), -inf if none
  double sum;        //!< sum exp((x - max) / T) over the chunk; 0 if max = -inf, the row is bad, or T = 0
  long long argmax;  //!< the first index holding `max`, -1 if none
  int bad;           //!< the chunk holds a NaN or +inf
};

//! A row's statistics, combined from its partials.
struct softmax_row {
  double max;        //!< M, the row maximum
  double sum;        //!< S = sum exp((x - M) / T)
  double lse;        //!< M / T + log S; NaN (not_finite) or -inf (no_mass) for unusable rows
  long long argmax;  //!< the first index holding M
  row_status status;
};

//! exp((x - m) / T) of a float logit, within 6u of the exact value (file comment); `inv_t` = 1 / T.
__device__ inline float scaled_exp(float x, double m, double /*temperature*/, double inv_t) {
  const double t = (static_cast<double>(x) - m) * inv_t;
  if (!(t > -110.0)) return 0.0f;  // exp(t) < 2^-158 (and x = -inf)
  const float tf = __double2float_rn(t);
  const float r = __double2float_rn(t - static_cast<double>(tf));  // t - tf is exact in double
  const float e = expf(tf);
  return fmaf(e, r, e);
}

//! exp((x - m) / T) of a double logit, with seq's division.
__device__ inline double scaled_exp(double x, double m, double temperature, double /*inv_t*/) {
  return exp((x - m) / temperature);
}

//! The probability of a logit x in a row with maximum `max` and sum S at temperature T, rounded to
//! U as kernel 2 stores it: U(U(e) * (1 / S)), e = `scaled_exp` (`inv_t` = 1 / T, `inv_sum` = 1 / S).
//! The one formula behind kernel 2, the filters on logit rows (filter.cuh) and the fused verification
//! (verify.cuh), so that they all see the same bits.
template <class U, class T>
__device__ inline U softmax_entry(T x, double max, double temperature, double inv_t, double inv_sum) {
  // __dmul_rn: never contracted into an fma with a sum the caller adds it to, so a weight read
  // alone and the same weight inside a tile sum are the same double.
  return static_cast<U>(__dmul_rn(static_cast<double>(static_cast<U>(scaled_exp(x, max, temperature, inv_t))), inv_sum));
}

//! Kernel 1: one block per (row, chunk); grid = batch * chunks. `temperature`: one per row, or null
//! (all 1), as for every kernel here.
template <class T>
__global__ void __launch_bounds__(block_threads) softmax_partials_kernel(const T* logits, std::size_t vocab, std::size_t chunks,
                                                                         const double* temperature, softmax_partial* partials) {
  __shared__ double sum_scratch[block_warps];
  __shared__ arg_best arg_scratch[block_warps];
  const std::size_t b = blockIdx.x / chunks, c = blockIdx.x % chunks;
  T x[chunk_items<T>];
  load_chunk(logits + b * vocab, vocab, c, x, -std::numeric_limits<T>::infinity());
  arg_best best{0.0, -1};
  bool bad = false;
#pragma unroll
  for (int k = 0; k < chunk_items<T>; ++k) {
    const std::size_t v = chunk_index<T>(c, k);
    const double y = static_cast<double>(x[k]);
    if (v >= vocab) continue;
    if (isnan(y) || y == std::numeric_limits<double>::infinity()) {  // seq: not_finite
      bad = true;
      continue;
    }
    if (best.index < 0 || y > best.value) best = {y, static_cast<long long>(v)};  // items ascend: first max kept
  }
  best = block_argmax(best, arg_scratch);
  bad = __syncthreads_or(bad) != 0;
  const double m = best.index < 0 ? -std::numeric_limits<double>::infinity() : best.value;
  const double temp = temperature != nullptr ? temperature[b] : 1.0;
  double s = 0.0;
  if (!bad && m > -std::numeric_limits<double>::infinity() && temp > 0.0) {  // the same in every thread
    const double inv_t = 1.0 / temp;
#pragma unroll
    for (int k = 0; k < chunk_items<T>; ++k) s += static_cast<double>(scaled_exp(x[k], m, temp, inv_t));  // fill: 0
    s = block_sum_all(s, sum_scratch);
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = softmax_partial{m, s, best.index, bad ? 1 : 0};
}

//! The smallest of the lanes' `v`, in every lane.
__device__ inline long long warp_min_ll(long long v) noexcept {
  for (int width = warp_size / 2; width >= 1; width /= 2) {
    const long long other = __shfl_xor_sync(full_mask, v, width);
    v = other < v ? other : v;
  }
  return v;
}

//! Combines a row's `chunks` partials; called by all 32 lanes of one warp, the result in every lane.
//! The order is fixed (lane j takes chunks j, j + 32, ... in order, then `reduce_lanes`), so every
//! block of a row gets the same bits.
__device__ inline softmax_row combine_partials(const softmax_partial* p, std::size_t chunks, double temperature) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  double m = -inf;
  bool bad = false;
  long long first = std::numeric_limits<long long>::max();
  for (std::size_t c = static_cast<std::size_t>(lane_id()); c < chunks; c += warp_size) {
    m = p[c].max > m ? p[c].max : m;
    bad = bad || p[c].bad != 0;
  }
  for (int width = warp_size / 2; width >= 1; width /= 2) {
    const double other = __shfl_xor_sync(full_mask, m, width);
    m = other > m ? other : m;
  }
  bad = warp_any(bad);
  softmax_row r{m, 0.0, 0.0, -1, row_status::ok};
  if (bad) {
    r.status = row_status::not_finite;
    r.lse = std::numeric_limits<double>::quiet_NaN();
    return r;
  }
  if (m == -inf) {
    r.status = row_status::no_mass;
    r.lse = -inf;
    return r;
  }
  for (std::size_t c = static_cast<std::size_t>(lane_id()); c < chunks; c += warp_size)
    if (p[c].max == m) {
      first = static_cast<long long>(c);
      break;
    }
  first = warp_min_ll(first);
  r.argmax = p[first].argmax;
  if (temperature > 0.0) {
    double acc = 0.0;
    for (std::size_t c = static_cast<std::size_t>(lane_id()); c < chunks; c += warp_size)
      acc += p[c].sum * exp((p[c].max - m) / temperature);  // a chunk of -inf only adds 0 * 0
    r.sum = __shfl_sync(full_mask, reduce_lanes(acc), 0);
    r.lse = m / temperature + log(r.sum);
  }
  return r;
}

//! What kernel 2 writes.
enum class softmax_output : int { probs = 0, log_probs = 1 };

//! Kernel 2: one block per (row, chunk); writes probabilities or log-probabilities, the status and
//! log-sum-exp of the row (block 0 of the row; `statuses` and `lse` may be null).
template <class T, class U>
__global__ void __launch_bounds__(block_threads)
    softmax_write_kernel(const T* logits, std::size_t vocab, std::size_t chunks, const double* temperature,
                         const softmax_partial* partials, U* out, row_status* statuses, double* lse, softmax_output what) {
  __shared__ softmax_row stats;
  const std::size_t b = blockIdx.x / chunks, c = blockIdx.x % chunks;
  const double temp = temperature != nullptr ? temperature[b] : 1.0;
  T x[chunk_items<T>];
  if (temp > 0.0) load_chunk(logits + b * vocab, vocab, c, x, T(0));  // in flight while warp 0 combines
  if (threadIdx.x < warp_size) {
    const softmax_row r = combine_partials(partials + b * chunks, chunks, temp);
    if (threadIdx.x == 0) stats = r;
  }
  __syncthreads();
  const softmax_row r = stats;
  if (c == 0 && threadIdx.x == 0) {
    if (statuses != nullptr) statuses[b] = r.status;
    if (lse != nullptr) lse[b] = r.lse;
  }
  U y[chunk_items<T>];
  if (r.status != row_status::ok) {
    const U fill = what == softmax_output::probs ? U(0) : std::numeric_limits<U>::quiet_NaN();
#pragma unroll
    for (int k = 0; k < chunk_items<T>; ++k) y[k] = fill;
  } else if (temp == 0.0) {  // greedy (warp_logits): one-hot on the argmax
#pragma unroll
    for (int k = 0; k < chunk_items<T>; ++k) y[k] = static_cast<long long>(chunk_index<T>(c, k)) == r.argmax ? U(1) : U(0);
  } else {
    if (what == softmax_output::probs) {
      const double inv = 1.0 / r.sum, inv_t = 1.0 / temp;
#pragma unroll
      for (int k = 0; k < chunk_items<T>; ++k) y[k] = softmax_entry<U>(x[k], r.max, temp, inv_t, inv);
    } else {
#pragma unroll
      for (int k = 0; k < chunk_items<T>; ++k) y[k] = static_cast<U>(static_cast<double>(x[k]) / temp - r.lse);
    }
  }
  store_chunk<T>(out + b * vocab, vocab, c, y);
}

//! Log-sum-exp alone: one warp per row combines its partials. (A template, so that several units
//! may include this header.)
template <class Partial>
__global__ void __launch_bounds__(block_threads)
    softmax_finalize_kernel(const Partial* partials, std::size_t chunks, const double* temperature, std::size_t batch,
                            double* lse, row_status* statuses) {
  const std::size_t b = static_cast<std::size_t>(blockIdx.x) * block_warps + threadIdx.x / warp_size;
  if (b >= batch) return;  // (whole warps)
  const softmax_row r = combine_partials(partials + b * chunks, chunks, temperature != nullptr ? temperature[b] : 1.0);
  if (lane_id() == 0) {
    lse[b] = r.lse;
    statuses[b] = r.status;
  }
}

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
void softmax_rows(cudaStream_t stream, std::span<const T> logits, std::size_t batch, std::size_t vocab, std::span<U> out,
                  std::span<row_status> statuses, std::span<const double> temperatures, std::span<std::byte> workspace,
                  softmax_output what) {
  static_assert(float_or_double<T> && float_or_double<U>, "cuda softmax: float or double rows");
  check_rows(batch, vocab, logits.size(), out.size(), statuses.size());
  workspace_plan plan(workspace);
  const softmax_parts<T> parts(plan, batch, vocab);
  if (batch == 0) return;
  const double* temperature = upload_temperatures(temperatures, batch, parts.temperature, stream);
  launch_softmax_partials(stream, logits.data(), batch, vocab, temperature, parts);
  launch_softmax_write(stream, logits.data(), batch, vocab, temperature, parts, out.data(), statuses.data(), nullptr, what);
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

//! probs[b] = softmax(logits[b] / T_b) for the `batch` rows of `vocab` logits (row-major, device
//! memory), as `specdec::softmax` (distributions/softmax.hpp) within the bound of the file comment;
//! statuses[b] says whether row b was usable (exactly seq's status); unusable rows are zero-filled.
//! `temperatures` is a host span, one per row (empty: all 1); `workspace` is device memory of
//! `softmax_workspace_bytes<T>(batch, vocab)` bytes. Asynchronous on `stream`.
//! \throws specdec::error on shapes, a temperature that is not finite and > 0, or a small
//! workspace; specdec::cuda_error on CUDA errors.
template <class T, class U>
void softmax(cudaStream_t stream, std::span<const T> logits, std::size_t batch, std::size_t vocab, std::span<U> probs,
             std::span<row_status> statuses, std::span<const double> temperatures, std::span<std::byte> workspace) {
  detail::softmax_rows(stream, logits, batch, vocab, probs, statuses, temperatures, workspace, detail::softmax_output::probs);
}

//! `softmax` with a workspace allocated (and freed) on `stream`.
template <class T, class U>
void softmax(cudaStream_t stream, std::span<const T> logits, std::size_t batch, std::size_t vocab, std::span<U> probs,
             std::span<row_status> statuses, std::span<const double> temperatures = {}) {
  device_buffer workspace(softmax_workspace_bytes<T>(batch, vocab), stream);
  softmax(stream, logits, batch, vocab, probs, statuses, temperatures, workspace.span());
}

//! out[b] = log_softmax(logits[b] / T_b), as `specdec::log_softmax` within the bound of the file
//! comment; unusable rows are NaN-filled (as seq). Arguments and errors as `softmax`.
template <class T, class U>
void log_softmax(cudaStream_t stream, std::span<const T> logits, std::size_t batch, std::size_t vocab, std::span<U> out,
                 std::span<row_status> statuses, std::span<const double> temperatures, std::span<std::byte> workspace) {
  detail::softmax_rows(stream, logits, batch, vocab, out, statuses, temperatures, workspace, detail::softmax_output::log_probs);
}

//! `log_softmax` with a workspace allocated (and freed) on `stream`.
template <class T, class U>
void log_softmax(cudaStream_t stream, std::span<const T> logits, std::size_t batch, std::size_t vocab, std::span<U> out,
                 std::span<row_status> statuses, std::span<const double> temperatures = {}) {
  device_buffer workspace(softmax_workspace_bytes<T>(batch, vocab), stream);
  log_softmax(stream, logits, batch, vocab, out, statuses, temperatures, workspace.span());
}

//! lse[b] = log(sum_v exp(logits[b][v] / T_b)) (device, one per row), as `specdec::log_sum_exp`
//! within the bound of the file comment: NaN for a row with NaN or +inf, -inf for a row of -inf
//! only, with the status. One read of the logits. Arguments and errors as `softmax`.
template <class T>
void log_sum_exp(cudaStream_t stream, std::span<const T> logits, std::size_t batch, std::size_t vocab, std::span<double> lse,
                 std::span<row_status> statuses, std::span<const double> temperatures, std::span<std::byte> workspace) {
  static_assert(detail::float_or_double<T>, "cuda log_sum_exp: float or double rows");
  detail::check_rows(batch, vocab, logits.size(), batch * vocab, statuses.size());
  SPECDEC_EXPECTS(lse.size() == batch, "cuda log_sum_exp: one result per row");
  workspace_plan plan(workspace);
  const detail::softmax_parts<T> parts(plan, batch, vocab);
  if (batch == 0) return;
  const double* temperature = detail::upload_temperatures(temperatures, batch, parts.temperature, stream);
  detail::launch_softmax_partials(stream, logits.data(), batch, vocab, temperature, parts);
  const std::size_t blocks = (batch + detail::block_warps - 1) / detail::block_warps;
  detail::softmax_finalize_kernel<<<static_cast<unsigned>(blocks), detail::block_threads, 0, stream>>>(
      parts.partials, detail::chunk_count<T>(vocab), temperature, batch, lse.data(), statuses.data());
  check_launch("softmax_finalize_kernel");
}

//! `log_sum_exp` with a workspace allocated (and freed) on `stream`.
template <class T>
void log_sum_exp(cudaStream_t stream, std::span<const T> logits, std::size_t batch, std::size_t vocab, std::span<double> lse,
                 std::span<row_status> statuses, std::span<const double> temperatures = {}) {
  device_buffer workspace(softmax_workspace_bytes<T>(batch, vocab), stream);
  log_sum_exp(stream, logits, batch, vocab, lse, statuses, temperatures, workspace.span());
}

}  // namespace specdec::backend::cuda
