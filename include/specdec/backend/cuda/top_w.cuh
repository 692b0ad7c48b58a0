//! \file backend/cuda/top_w.cuh
//! \brief Batched top-W selection on the GPU, the selection step of beam drafts (MTAD, seed 003,
//! section 2.1; draft/beam.hpp): for each of R rows of n joint scores s(i, v) (the W x V candidate
//! matrix of one beam step, flattened beam-major, -inf where q~(v | beam i) = 0), the indices of
//!   - `beam_mode::search`: the W largest scores (deterministic beam search);
//!   - `beam_mode::sample_without_replacement`: the W largest s + G, G i.i.d. standard Gumbel
//!     (Gumbel-top-k, Vieira 2014; Kool et al. 2019): W draws from p_beam (eq. (2)) without
//!     replacement.
//! Output: row r's indices in out[r * W, r * W + W), ordered by key descending, then index ascending
//! (`specdec::top_w_indices`' strict total order), padded with -1 when the row has fewer than W
//! usable keys (neither -inf nor NaN).
//!
//! **Same result as the CPU.** `search` is exact: the same indices as `top_w_indices` on the row
//! (only comparisons; -0 and +0 tie, as with `==`). `sample_without_replacement` draws its Gumbels
//! as the CPU beam drafter does: the candidates are the usable entries in index order (beam, then
//! token), and candidate c reads the c-th uniform u_c of the row's stream (`uniform_at(address, c)`,
//! the value `philox_stream::gumbel()` reads for the c-th candidate), G = gumbel_from_uniform(u_c).
//! A zero uniform makes the CPU redraw, which shifts every later candidate's uniform; the kernel
//! detects it and recomputes that row's keys sequentially with `philox_stream::gumbel()` itself. The
//! uniforms are bit-identical; the Gumbel transform uses the device's log/log1p (CUDA: within 1 ulp)
//! where the CPU uses the host's, so a key may differ by a few ulp, and the selected set can differ
//! from the CPU's only where two keys lie within those few ulp of each other at the W-th place (for
//! keys spread like Gumbels, a probability of order n 10^-15 per row).
//!
//! **Algorithm** (one block per row; n < 2^32, W <= `max_top_w`): the keys are ordered as 96-bit
//! integers (the key's order-preserving 64-bit image, then the inverted index, so every key is
//! distinct and ties go to the lower index); a most-significant-digit radix select with 8-bit digits
//! finds the W-th largest, stopping as soon as every entry of the chosen bucket is selected (2-3
//! passes over the row for continuous keys; up to 12 when many keys tie, since the index digits then
//! decide); one more pass gathers the W winners, which are ranked in shared memory. `sample_without_replacement` first writes the keys to a workspace (one pass: a block-wide
//! count of usable entries gives each its candidate index).
//! Memory: `top_w_workspace_bytes` then a caller-owned device workspace, or the overload that
//! allocates on the stream. Scores, streams and output are device memory. Asynchronous.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "specdec/backend/cuda/kernels/top_w.cuh"
#include "specdec/backend/cuda/detail/error.cuh"
#include "specdec/backend/cuda/detail/memory.cuh"
#include "specdec/backend/cuda/primitives/warp.cuh"
#include "specdec/contracts.hpp"
#include "specdec/core/row_batch.hpp"
#include "specdec/draft/beam.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/random/uniform.hpp"

namespace specdec::backend::cuda {

//! The largest W the kernels take (the winners are ranked in shared memory).
inline constexpr std::size_t max_top_w = 1024;

namespace detail {

//! The shapes of a call, checked.
struct top_w_shape {
  std::size_t rows;
  bool gumbel;
};

template <class T>
top_w_shape check_top_w(beam_mode mode, const row_batch<const T>& scores, std::size_t w,
                        std::span<const random::stream_address> streams, std::span<std::int64_t> out) {
  SPECDEC_EXPECTS(mode == beam_mode::search || mode == beam_mode::sample_without_replacement,
                  "specdec::backend::cuda::top_w: the mode must be search or sample_without_replacement");
  const std::size_t n = scores.width();
  SPECDEC_EXPECTS(n >= 1 && n <= 0xFFFFFFFFull, "specdec::backend::cuda::top_w: the row length n must be in [1, 2^32)");
  SPECDEC_EXPECTS(w <= max_top_w, "specdec::backend::cuda::top_w: W must be <= max_top_w");
  const std::size_t rows = scores.rows();
  SPECDEC_EXPECTS(out.size() == rows * w, "specdec::backend::cuda::top_w: out must hold W entries per row");
  const bool gumbel = mode == beam_mode::sample_without_replacement;
  SPECDEC_EXPECTS(!gumbel || streams.size() == rows, "specdec::backend::cuda::top_w: one stream address per row");
  return {rows, gumbel};
}

//! Launches the keys (Gumbel mode) and the selection; `keys` is the workspace part (Gumbel only).
template <class T>
void launch_top_w(cudaStream_t stream, const top_w_shape& shape, const T* scores, std::size_t n, std::size_t w,
                  const random::stream_address* streams, std::int64_t* out, double* keys, bool sequential) {
  if (shape.rows == 0 || w == 0) return;
  const auto grid = static_cast<unsigned>(shape.rows);
  const std::size_t shared = chosen_slots(w) * (sizeof(unsigned long long) + sizeof(unsigned));
  if (shape.gumbel) {
    gumbel_keys_kernel<T><<<grid, top_w_threads, 0, stream>>>(scores, n, streams, keys, sequential);
    check_launch("specdec::backend::cuda::top_w: gumbel_keys_kernel");
    top_w_kernel<double><<<grid, top_w_threads, shared, stream>>>(keys, n, w, out);
  } else {
    top_w_kernel<T><<<grid, top_w_threads, shared, stream>>>(scores, n, w, out);
  }
  check_launch("specdec::backend::cuda::top_w: top_w_kernel");
}

}  // namespace detail

//! Device bytes `top_w` needs: rows * n doubles of keys for `sample_without_replacement`, none for
//! `search`.
inline std::size_t top_w_workspace_bytes(beam_mode mode, std::size_t rows, std::size_t n) {
  workspace_plan plan;
  if (mode == beam_mode::sample_without_replacement) plan.take<double>(rows * n);
  return plan.bytes();
}

//! The W best of each row of `scores` (rows of n = scores.width() entries, device memory) into `out`
//! ([rows][W], device memory), by `mode` (see the file comment); `streams` ([rows], device memory)
//! are the rows' stream addresses (the beam drafter's `request_stream.at(t, purpose::beam)`; unused
//! by `search`). `workspace`: device memory of at least `top_w_workspace_bytes(mode, rows, n)` bytes.
//! Asynchronous on `stream`.
//! \pre mode is search or sample_without_replacement; 1 <= n < 2^32; W <= max_top_w;
//!      out.size() == rows * W; one stream per row for sample_without_replacement.
//! \throws specdec::error otherwise or when the workspace is too small; specdec::cuda_error on CUDA errors.
template <class T>
void top_w(cudaStream_t stream, beam_mode mode, row_batch<const T> scores, std::size_t w,
           std::span<const random::stream_address> streams, std::span<std::int64_t> out, std::span<std::byte> workspace) {
  const detail::top_w_shape shape = detail::check_top_w(mode, scores, w, streams, out);
  const std::size_t n = scores.width();
  workspace_plan plan(workspace);
  double* keys = shape.gumbel ? plan.take<double>(shape.rows * n) : nullptr;
  detail::launch_top_w(stream, shape, scores.data().data(), n, w, streams.data(), out.data(), keys, false);
}

//! `top_w` with a workspace allocated (and freed) on `stream`.
template <class T>
void top_w(cudaStream_t stream, beam_mode mode, row_batch<const T> scores, std::size_t w,
           std::span<const random::stream_address> streams, std::span<std::int64_t> out) {
  const detail::top_w_shape shape = detail::check_top_w(mode, scores, w, streams, out);
  const device_buffer buffer(top_w_workspace_bytes(mode, shape.rows, scores.width()), stream);
  top_w(stream, mode, scores, w, streams, out, buffer.span());
}

}  // namespace specdec::backend::cuda
