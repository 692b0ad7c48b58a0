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

#include "specdec/backend/cuda/indicator_status.cuh"
#include "specdec/backend/cuda/kernels/indicators.cuh"
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

namespace specdec::backend::cuda {

//! The bound on |S_cuda - S_seq| for rows of V entries (see the file comment): 2.01 gamma_{V-1}.
inline double indicators_agreement_bound(std::size_t vocab_size) noexcept {
  const double nu = static_cast<double>(vocab_size > 0 ? vocab_size - 1 : 0) * 0x1.0p-53;
  return 2.01 * nu / (1.0 - nu);
}

namespace detail {

inline std::size_t indicator_chunks(std::size_t vocab) { return (vocab + indicator_chunk - 1) / indicator_chunk; }

//! The shape checks of `compute_indicators` (estimate's, and the two batches of one width).
//! \throws specdec::error naming the failed condition
template <class T, class U>
void check_indicator_batches(const row_batch<const T>& draft_rows, const row_batch<const U>& companion_rows,
                             std::span<const token_id> tokens, std::span<double> s, std::span<double> a) {
  SPECDEC_EXPECTS(draft_rows.width() == companion_rows.width(), "the draft and companion rows must have the same width");
  estimate::detail::check_indicator_shapes(draft_rows.data(), companion_rows.data(), tokens, draft_rows.width(), s, a);
}


}  // namespace detail

//! Device bytes `compute_indicators` needs for n positions of V entries.
inline std::size_t indicators_workspace_bytes(std::size_t n, std::size_t vocab_size) {
  workspace_plan plan;
  plan.take<detail::indicator_partial>(n * detail::indicator_chunks(vocab_size));
  return plan.bytes();
}

//! S, A and a status for n drafted positions: `draft_rows` and `companion_rows` are n rows of V
//! (device memory), row i belonging to `tokens[i]`; writes s[i], a[i], status[i] (NaN S and A where the
//! status is not ok). All spans are device memory; `workspace` holds at least
//! `indicators_workspace_bytes(n, V)` bytes. Asynchronous on `stream`; bad rows do not throw.
//! \pre the shapes of `estimate::compute_indicators`; status.size() == n.
//! \throws specdec::error on shape mismatches or a small workspace; specdec::cuda_error on CUDA errors.
template <class T, class U>
void compute_indicators(cudaStream_t stream, row_batch<const T> draft_rows, row_batch<const U> companion_rows,
                        std::span<const token_id> tokens, std::span<double> s, std::span<double> a,
                        std::span<indicator_status> status, std::span<std::byte> workspace) {
  detail::check_indicator_batches(draft_rows, companion_rows, tokens, s, a);
  const std::size_t n = tokens.size(), vocab_size = draft_rows.width();
  SPECDEC_EXPECTS(status.size() == n, "status must hold one entry per token");
  if (n == 0) return;
  const std::size_t chunks = detail::indicator_chunks(vocab_size);
  workspace_plan plan(workspace);
  auto* partials = plan.take<detail::indicator_partial>(n * chunks);
  detail::indicator_partials_kernel<T, U><<<static_cast<unsigned>(n * chunks), detail::indicator_threads, 0, stream>>>(
      draft_rows.data().data(), companion_rows.data().data(), vocab_size, chunks, partials);
  check_launch("specdec::backend::cuda::compute_indicators: indicator_partials_kernel");
  const auto blocks = static_cast<unsigned>((n + detail::indicator_finish_threads - 1) / detail::indicator_finish_threads);
  detail::indicator_finish_kernel<T, U><<<blocks, detail::indicator_finish_threads, 0, stream>>>(
      draft_rows.data().data(), companion_rows.data().data(), tokens.data(), n, vocab_size, chunks, partials,
      estimate::detail::row_sum_tolerance, s.data(), a.data(), status.data());
  check_launch("specdec::backend::cuda::compute_indicators: indicator_finish_kernel");
}

//! `compute_indicators` with the workspace and statuses allocated on `stream`; waits for the
//! stream and, like seq, throws specdec::error for the first bad position (by index), naming it.
//! \throws specdec::error on shape mismatches or a bad position; specdec::cuda_error on CUDA errors.
template <class T, class U>
void compute_indicators(cudaStream_t stream, row_batch<const T> draft_rows, row_batch<const U> companion_rows,
                        std::span<const token_id> tokens, std::span<double> s, std::span<double> a) {
  detail::check_indicator_batches(draft_rows, companion_rows, tokens, s, a);
  const std::size_t n = tokens.size(), vocab_size = draft_rows.width();
  workspace_plan counting;
  counting.take<indicator_status>(n);
  const std::size_t status_bytes = counting.bytes();
  const device_buffer buffer(status_bytes + indicators_workspace_bytes(n, vocab_size), stream);
  workspace_plan plan(buffer.span());
  indicator_status* status = plan.take<indicator_status>(n);
  compute_indicators(stream, draft_rows, companion_rows, tokens, s, a, std::span<indicator_status>(status, n),
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
