//! \file backend/cuda/kernels/softmax.cuh
//! \brief The kernels of softmax.cuh: per-chunk partials, the combine of a row's partials, the write and log-sum-exp
//! passes, and the probability formula the other kernels share (`softmax_entry`).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "specdec/backend/cuda/primitives/block.cuh"
#include "specdec/backend/cuda/detail/error.cuh"
#include "specdec/backend/cuda/detail/memory.cuh"
#include "specdec/backend/cuda/primitives/warp.cuh"
#include "specdec/contracts.hpp"
#include "specdec/core/row_batch.hpp"
#include "specdec/core/token.hpp"
#include "specdec/distributions/row_status.hpp"

namespace specdec::backend::cuda::detail {

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

}  // namespace specdec::backend::cuda::detail
