//! \file backend/cuda/kernels/indicators.cuh
//! \brief The kernels of indicators.cuh: per-chunk partial sums of the indicators and the per-position finish pass.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "specdec/backend/cuda/indicator_status.cuh"
#include "specdec/backend/cuda/primitives/block.cuh"
#include "specdec/backend/cuda/detail/error.cuh"
#include "specdec/backend/cuda/detail/memory.cuh"
#include "specdec/backend/cuda/primitives/warp.cuh"
#include "specdec/contracts.hpp"
#include "specdec/core/row_batch.hpp"
#include "specdec/core/token.hpp"
#include "specdec/errors.hpp"
#include "specdec/estimate/similarity.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec::backend::cuda::detail {

inline constexpr std::size_t indicator_chunk = 8192;  //!< entries per block of pass 1
inline constexpr int indicator_threads = 256;         //!< threads per block of pass 1
static_assert(indicator_threads == block_threads, "pass 1 sums with block_sum_all (primitives/block.cuh)");
inline constexpr int indicator_finish_threads = 128;  //!< threads per block of pass 2

//! The sums of one chunk of a row pair.
struct indicator_partial {
  double overlap, draft_sum, companion_sum;
  int draft_usable, companion_usable;
};

//! Pass 1: block b = (position b / chunks, chunk b % chunks).
template <class T, class U>
__global__ void __launch_bounds__(indicator_threads)
    indicator_partials_kernel(const T* draft, const U* companion, std::size_t vocab, std::size_t chunks,
                              indicator_partial* partials) {
  __shared__ double scratch[indicator_threads / warp_size];
  const std::size_t position = blockIdx.x / chunks, chunk = blockIdx.x % chunks;
  const std::size_t begin = chunk * indicator_chunk;
  const std::size_t end = begin + indicator_chunk < vocab ? begin + indicator_chunk : vocab;
  const T* d = draft + position * vocab;
  const U* c = companion + position * vocab;
  double overlap = 0.0, ds = 0.0, cs = 0.0;
  bool du = true, cu = true;
  for (std::size_t v = begin + threadIdx.x; v < end; v += blockDim.x) {
    const double x = static_cast<double>(d[v]), y = static_cast<double>(c[v]);
    du = du && specdec::detail::usable_weight(x);
    cu = cu && specdec::detail::usable_weight(y);
    overlap += y < x ? y : x;
    ds += x;
    cs += y;
  }
  const bool all_du = __syncthreads_and(du) != 0, all_cu = __syncthreads_and(cu) != 0;
  overlap = block_sum_all(overlap, scratch);
  ds = block_sum_all(ds, scratch);
  cs = block_sum_all(cs, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = {overlap, ds, cs, all_du ? 1 : 0, all_cu ? 1 : 0};
}

//! Pass 2: one thread per position.
template <class T, class U>
__global__ void __launch_bounds__(indicator_finish_threads)
    indicator_finish_kernel(const T* draft, const U* companion, const token_id* tokens, std::size_t n, std::size_t vocab,
                            std::size_t chunks, const indicator_partial* partials, double tolerance, double* s, double* a,
                            indicator_status* status) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double overlap = 0.0, ds = 0.0, cs = 0.0;
  bool du = true, cu = true;
  for (std::size_t k = 0; k < chunks; ++k) {
    const indicator_partial& p = partials[i * chunks + k];
    overlap += p.overlap;
    ds += p.draft_sum;
    cs += p.companion_sum;
    du = du && p.draft_usable != 0;
    cu = cu && p.companion_usable != 0;
  }
  indicator_status st = indicator_status::ok;
  double si = 0.0, ai = 0.0;
  if (!du || !(fabs(ds - 1.0) <= tolerance)) {
    st = indicator_status::bad_draft_row;
  } else if (!cu || !(fabs(cs - 1.0) <= tolerance)) {
    st = indicator_status::bad_companion_row;
  } else {
    const token_id t = tokens[i];
    if (t < 0 || static_cast<std::size_t>(t) >= vocab) {
      st = indicator_status::token_out_of_range;
    } else {
      const double pd = static_cast<double>(draft[i * vocab + static_cast<std::size_t>(t)]);
      const double pc = static_cast<double>(companion[i * vocab + static_cast<std::size_t>(t)]);
      if (!(pd > 0.0)) {  // finite and pc >= 0 follow from the row checks
        st = indicator_status::draft_probability_zero;
      } else {
        si = overlap < 0.0 ? 0.0 : (overlap > 1.0 ? 1.0 : overlap);
        ai = pc >= pd ? 1.0 : pc / pd;
      }
    }
  }
  if (st != indicator_status::ok) si = ai = __longlong_as_double(0x7FF8000000000000ll);  // NaN
  s[i] = si;
  a[i] = ai;
  status[i] = st;
}

}  // namespace specdec::backend::cuda::detail
