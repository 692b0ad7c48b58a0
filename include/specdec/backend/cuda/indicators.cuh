//! \file backend/cuda/indicators.cuh
//! \brief SV's indicators on the GPU for every drafted position of a batch (Kim et al., SV,
//! section 4.2, eqs. (1)-(2); the seq reference is backend/seq/algorithms.hpp):
//!
//!   S = sum_v min(P_d(v), P_c(v))      (clamped to [0, 1])
//!   A = min(1, P_c(t_d) / P_d(t_d))    (seq's formula: pc >= pd ? 1 : pc / pd)
//!
//! with seq's row checks (finite, non-negative entries; sums 1 within 1e-3; the token in [0, V);
//! P_d(t) > 0). Device code never throws: each position gets an `indicator_status` (the first of
//! seq's checks that fails, in seq's order), and S = A = NaN for a bad position. The overload
//! without a status span waits for the stream and throws, like seq, the error of the first bad
//! position (by index); unlike seq, the other positions' S and A are written.
//!
//! **Algorithm.** Pass 1 splits every row pair into chunks of `indicator_chunk` entries, one block
//! per (position, chunk), so that a small batch of long rows still fills the GPU: each thread sums
//! min(d, c), d and c over a strided share of the chunk in double, and the block adds the thread
//! sums in a fixed tree order. Pass 2 (one thread per position) adds the chunk sums in chunk order,
//! checks, and writes S, A and the status. The order is fixed, so results repeat bit for bit.
//!
//! **Agreement with seq.** A is bit-identical (two reads, one IEEE division). S adds the same V terms
//! min(d_v, c_v) (exact in double) in another order than seq's left-to-right loop; both sums of
//! non-negative terms are within gamma_{V-1} = (V-1) 2^-53 / (1 - (V-1) 2^-53) (relative) of the
//! exact sum, which is <= 1 + 1e-3, so |S_cuda - S_seq| <= 2.01 gamma_{V-1}, about 2.2e-16 V (2.9e-11
//! at V = 128256; in practice ~1e-15). `indicators_agreement_bound(V)` returns that bound. Likewise a
//! row whose sum lies within that distance of the 1 +- 1e-3 tolerance edge may be judged differently.
//! Memory: `indicators_workspace_bytes`, then a caller-owned device workspace, or the overload that
//! allocates on the stream. Rows, tokens and outputs are device memory.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "specdec/backend/cuda/block.cuh"
#include "specdec/backend/cuda/error.cuh"
#include "specdec/backend/cuda/memory.cuh"
#include "specdec/backend/cuda/warp.cuh"
#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/errors.hpp"
#include "specdec/estimate/similarity.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec::backend::cuda {

//! What the GPU found at a drafted position: ok, or the first of seq's checks that failed.
enum class indicator_status : std::uint8_t {
  ok = 0,
  bad_draft_row = 1,           //!< a NaN, infinite or negative entry, or a sum not within 1e-3 of 1
  bad_companion_row = 2,       //!< the same for the companion row
  token_out_of_range = 3,      //!< the drafted token is outside [0, V)
  draft_probability_zero = 4,  //!< P_d(t) is not > 0 (the token cannot have been drafted from P_d)
};

//! Seq's error message for a status (empty for ok).
inline const char* indicator_message(indicator_status s) noexcept {
  switch (s) {
    case indicator_status::bad_draft_row: return "the draft row is not a probability row (NaN, negative, or sum != 1)";
    case indicator_status::bad_companion_row: return "the companion row is not a probability row (NaN, negative, or sum != 1)";
    case indicator_status::token_out_of_range: return "the drafted token is outside [0, V)";
    case indicator_status::draft_probability_zero: return "P_d(t) must be > 0 and finite (the token was drafted from P_d)";
    default: return "";
  }
}

//! The bound on |S_cuda - S_seq| for rows of V entries (see the file comment): 2.01 gamma_{V-1}.
inline double indicators_agreement_bound(std::size_t vocab_size) noexcept {
  const double nu = static_cast<double>(vocab_size > 0 ? vocab_size - 1 : 0) * 0x1.0p-53;
  return 2.01 * nu / (1.0 - nu);
}

namespace detail {

inline constexpr std::size_t indicator_chunk = 8192;  //!< entries per block of pass 1
inline constexpr int indicator_threads = 256;         //!< threads per block of pass 1
static_assert(indicator_threads == block_threads, "pass 1 sums with block_sum_all (block.cuh)");
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

inline std::size_t indicator_chunks(std::size_t vocab) { return (vocab + indicator_chunk - 1) / indicator_chunk; }


}  // namespace detail

//! Device bytes `compute_indicators` needs for n positions of V entries.
inline std::size_t indicators_workspace_bytes(std::size_t n, std::size_t vocab_size) {
  workspace_plan plan;
  plan.take<detail::indicator_partial>(n * detail::indicator_chunks(vocab_size));
  return plan.bytes();
}

//! S, A and a status for n drafted positions: `draft_rows` and `companion_rows` are [n][V]
//! row-major, row i belonging to `tokens[i]`; writes s[i], a[i], status[i] (NaN S and A where the
//! status is not ok). All spans are device memory; `workspace` holds at least
//! `indicators_workspace_bytes(n, V)` bytes. Asynchronous on `stream`; bad rows do not throw.
//! \pre the shapes of `estimate::compute_indicators`; status.size() == n.
//! \throws specdec::error on shape mismatches or a small workspace; specdec::cuda_error on CUDA errors.
template <class T, class U>
void compute_indicators(cudaStream_t stream, std::span<const T> draft_rows, std::span<const U> companion_rows,
                        std::span<const token_id> tokens, std::size_t vocab_size, std::span<double> s, std::span<double> a,
                        std::span<indicator_status> status, std::span<std::byte> workspace) {
  estimate::detail::check_indicator_shapes(draft_rows, companion_rows, tokens, vocab_size, s, a);
  const std::size_t n = tokens.size();
  SPECDEC_EXPECTS(status.size() == n, "status must hold one entry per token");
  if (n == 0) return;
  const std::size_t chunks = detail::indicator_chunks(vocab_size);
  workspace_plan plan(workspace);
  auto* partials = plan.take<detail::indicator_partial>(n * chunks);
  detail::indicator_partials_kernel<T, U><<<static_cast<unsigned>(n * chunks), detail::indicator_threads, 0, stream>>>(
      draft_rows.data(), companion_rows.data(), vocab_size, chunks, partials);
  check_launch("specdec::backend::cuda::compute_indicators: indicator_partials_kernel");
  const auto blocks = static_cast<unsigned>((n + detail::indicator_finish_threads - 1) / detail::indicator_finish_threads);
  detail::indicator_finish_kernel<T, U><<<blocks, detail::indicator_finish_threads, 0, stream>>>(
      draft_rows.data(), companion_rows.data(), tokens.data(), n, vocab_size, chunks, partials,
      estimate::detail::row_sum_tolerance, s.data(), a.data(), status.data());
  check_launch("specdec::backend::cuda::compute_indicators: indicator_finish_kernel");
}

//! `compute_indicators` with the workspace and statuses allocated on `stream`; waits for the
//! stream and, like seq, throws specdec::error for the first bad position (by index), naming it.
//! \throws specdec::error on shape mismatches or a bad position; specdec::cuda_error on CUDA errors.
template <class T, class U>
void compute_indicators(cudaStream_t stream, std::span<const T> draft_rows, std::span<const U> companion_rows,
                        std::span<const token_id> tokens, std::size_t vocab_size, std::span<double> s, std::span<double> a) {
  estimate::detail::check_indicator_shapes(draft_rows, companion_rows, tokens, vocab_size, s, a);
  const std::size_t n = tokens.size();
  workspace_plan counting;
  counting.take<indicator_status>(n);
  const std::size_t status_bytes = counting.bytes();
  const device_buffer buffer(status_bytes + indicators_workspace_bytes(n, vocab_size), stream);
  workspace_plan plan(buffer.span());
  indicator_status* status = plan.take<indicator_status>(n);
  compute_indicators(stream, draft_rows, companion_rows, tokens, vocab_size, s, a, std::span<indicator_status>(status, n),
                     buffer.span().subspan(status_bytes));
  std::vector<indicator_status> host(n);
  if (n > 0)
    check(cudaMemcpyAsync(host.data(), status, n * sizeof(indicator_status), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  for (std::size_t i = 0; i < n; ++i)
    if (host[i] != indicator_status::ok)
      throw error(std::string("specdec::backend::cuda::compute_indicators: position ") + std::to_string(i) + ": " +
                  indicator_message(host[i]));
}

}  // namespace specdec::backend::cuda
