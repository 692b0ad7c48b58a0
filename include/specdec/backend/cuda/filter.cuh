//! \file backend/cuda/filter.cuh
//! \brief Top-k, top-p and min-p on the GPU without sorting the vocabulary, and the whole warp
//! (`warp_logits`: temperature, filters, one renormalisation; `warp_probs` for T = 1): the masks of
//! distributions/warp.hpp (same order, ties at the boundary kept).
//!
//! **Method: a radix select on the bit patterns** (non-negative floats order like their patterns
//! read as integers; -0 counts as 0). Three levels of digits, bits 30..20 (the exponent and 3
//! mantissa bits), 19..9, 8..0; at each level every block of the row (`select_pass_kernel`, a row
//! split into chunks as in primitives/block.cuh) histograms the entries that match the digits chosen so far,
//! the last block to finish (a ticket counter) scans the row's histogram from the top bucket down and
//! picks the bucket holding the boundary. Each bucket records its count and the integer sum of its
//! entries' significands: within a level-0 bucket every entry has the same exponent, so a bucket's
//! mass is that integer times a power of two, **exact**, and the integer sums (atomics) do not depend
//! on the order of the blocks: the thresholds are deterministic and independent of the batch.
//! A level ends the search early when the chosen bucket holds one entry (its value is its
//! significand). Why not pivot bisection: a pivot pass resolves one comparison, a radix level 11 bits
//! for the same read; why not a sort: it moves the whole row several times.
//!  - top-k: the k-th largest value (counts; all V entries, zeros included, as seq's nth_element):
//!    exact, seq's mask. k = 0 or k >= V is off.
//!  - top-p (on top-k's survivors S, M = their mass): the largest value v with S(>= v) >= top_p * M,
//!    where S(>= v) is the mass of the survivors >= v; equivalently seq's walk down the sorted values
//!    until the cumulative mass reaches the goal, all ties of the boundary kept (when it is never
//!    reached, every survivor stays, as in seq). **Agreement:** seq adds the sorted values one by
//!    one in double, the GPU adds exact bucket masses in a block scan: the masks are identical unless
//!    the exact cumulative mass at the boundary, S(>= v) or S(> v) for the boundary value v of either
//!    side, lies within (2V + 256) 2^-53 M of top_p * M. Rows whose partial sums are all exact in
//!    double (e.g. values that are small multiples of one power of two) always agree.
//!  - min-p: keep p with double(p) >= min_p * max p, i.e. p >= the smallest float >= that cut: exact.
//!  The three filters compose as `p >= max(tau_k, tau_p, tau_min)`; the survivors are renormalised by
//!  a double sum (`kept_sum_kernel`, fixed order) and p * (1 / sum) rounded to float, as seq: the
//!  probabilities agree within (2u + (2V + 64) 2^-53) relative (u = 2^-24) plus 2^-149 when the masks agree.
//! Rows: float probabilities (the radix select's exact masses use the 24-bit significands; double
//! rows have no GPU filter), read through a row source (`prob_source`: rows in memory;
//! `softmax_source`: logit rows whose float softmax probabilities are computed on the fly from the
//! row statistics, bit for bit what softmax.cuh writes, so the search and kept sums of the fused
//! verification (verify.cuh) equal those of `warp_logits` without a probability row being stored).
//! `warp_logits` takes float or double logits and writes float
//! probabilities: softmax.cuh, then these filters on its output; its probabilities agree with seq's
//! within the softmax bound (16u) twice plus the renormalisation (36u relative in all), and its masks
//! agree unless seq's softmax output sits within that bound of a boundary. (Double logits: seq warps
//! in double, the GPU filters the float rounding of the same probabilities, so its masks may also
//! differ where that rounding ties or crosses a boundary: the k-th value, min_p * max, or the top-p
//! goal within 2^-24 relative.)
//! Cost: pass 0 reads every row once (usability, maximum, mass, level-0 histogram); each further
//! level (at most two for top-k and two for top-p) re-reads the rows still searching, from L2 when
//! the batch fits, and rows already decided return at once; the renormalisation reads and writes
//! the rows once more. Filtered sampling (sample.cuh) reads them instead for its tile masses.
#pragma once

#include <cuda_runtime.h>

#include <cub/block/block_scan.cuh>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "specdec/backend/cuda/kernels/filter.cuh"
#include "specdec/backend/cuda/primitives/block.cuh"
#include "specdec/backend/cuda/detail/error.cuh"
#include "specdec/backend/cuda/detail/memory.cuh"
#include "specdec/backend/cuda/softmax.cuh"
#include "specdec/backend/cuda/primitives/warp.cuh"
#include "specdec/contracts.hpp"
#include "specdec/core/row_batch.hpp"
#include "specdec/distributions/row_status.hpp"
#include "specdec/distributions/warp.hpp"

namespace specdec::backend::cuda {

namespace detail {

//! The workspace of the threshold search.
struct select_parts {
  select_row* rows = nullptr;
  row_histogram* hist0 = nullptr;
  row_histogram* hist = nullptr;
  select_parts() = default;
  select_parts(workspace_plan& plan, std::size_t batch)
      : rows(plan.take<select_row>(batch)), hist0(plan.take<row_histogram>(batch)), hist(plan.take<row_histogram>(batch)) {}
};

//! The workspace of a filter with renormalisation: the search and the kept mass of every chunk.
struct filter_parts {
  select_parts select;
  double* kept;
  filter_parts(workspace_plan& plan, std::size_t batch, std::size_t vocab)
      : select(plan, batch), kept(plan.take<double>(batch * chunk_count<float>(vocab))) {}
};

//! Host: the search state of a row with filters `w` (validated by the caller).
inline select_row select_row_for(const warp_params& w, std::size_t vocab) {
  select_row r{};
  r.top_k = w.top_k > 0 && static_cast<std::size_t>(w.top_k) < vocab ? static_cast<std::uint32_t>(w.top_k) : 0u;
  r.top_p = w.top_p;
  r.min_p = w.min_p;
  return r;
}

//! Host: uploads the `batch` search states `rows` and runs the passes the batch needs (1 + 2 per
//! search some row runs) over the rows of the source `src`.
template <class Source>
void run_select(cudaStream_t stream, const Source& src, std::size_t batch, std::size_t vocab, const select_parts& parts,
                std::span<const select_row> rows) {
  SPECDEC_EXPECTS(rows.size() == batch, "cuda filter: one search state per row");
  copy_to_device(parts.rows, rows.data(), batch, stream);
  bool any = false, top_k = false, top_p = false;
  for (const select_row& r : rows) {
    if (r.phase != phase_start) continue;
    any = true;
    top_k = top_k || r.top_k > 0;
    top_p = top_p || r.top_p < 1.0;
  }
  if (!any) return;
  check(cudaMemsetAsync(parts.hist0, 0, batch * sizeof(row_histogram), stream), "cudaMemsetAsync");
  const int passes = 1 + (top_k ? radix_levels - 1 : 0) + (top_p ? radix_levels - 1 : 0);
  const unsigned grid = row_chunk_grid<float>(batch, vocab);
  for (int pass = 0; pass < passes; ++pass) {
    select_pass_kernel<Source><<<grid, block_threads, 0, stream>>>(src, vocab, chunk_count<float>(vocab), parts.rows, parts.hist0,
                                                                   parts.hist, pass == 0);
    check_launch("select_pass_kernel");
  }
}

//! Host: after `run_select`, the kept mass of every chunk (`kept`: batch * chunk_count<float>(vocab)
//! doubles) of the usable rows that are not passed through.
template <class Source>
void run_kept_sum(cudaStream_t stream, const Source& src, std::size_t batch, std::size_t vocab, const select_row* rows,
                  double* kept) {
  kept_sum_kernel<Source>
      <<<row_chunk_grid<float>(batch, vocab), block_threads, 0, stream>>>(src, vocab, chunk_count<float>(vocab), rows, kept);
  check_launch("kept_sum_kernel");
}

//! Host: the renormalisation after `run_select` (statuses written when not null).
inline void run_rescale(cudaStream_t stream, float* probs, std::size_t batch, std::size_t vocab, const filter_parts& parts,
                        row_status* statuses) {
  const unsigned grid = row_chunk_grid<float>(batch, vocab);
  const std::size_t chunks = chunk_count<float>(vocab);
  run_kept_sum(stream, prob_source{probs}, batch, vocab, parts.select.rows, parts.kept);
  rescale_kernel<float><<<grid, block_threads, 0, stream>>>(probs, vocab, chunks, parts.select.rows, parts.kept, statuses);
  check_launch("rescale_kernel");
}

//! Host: validates one row's parameters for a probability row (temperature must be 1).
inline void validate_prob_params(const warp_params& w) {
  validate(w);
  SPECDEC_EXPECTS(w.temperature == 1.0, "cuda: filters on probabilities need temperature 1 (warp the logits instead)");
}

}  // namespace detail

//! Bytes of device workspace of `warp_probs` for `batch` rows of `vocab` floats.
inline std::size_t warp_probs_workspace_bytes(std::size_t batch, std::size_t vocab) {
  workspace_plan plan;
  (void)detail::filter_parts(plan, batch, vocab);
  return plan.bytes();
}

//! Warps every row of `probs` (float probabilities, device memory) in place with top-k, top-p and
//! min-p and one renormalisation, as `specdec::warp_probs` with temperature 1 (the masks and
//! agreement of the file comment). Rows with a NaN, infinite or negative entry are zero-filled
//! (not_finite); rows of zeros are left (no_mass). `params` is a host span, one per row.
//! \throws specdec::error on shapes, invalid parameters (`specdec::validate`), a temperature other
//! than 1, or a small workspace; specdec::cuda_error on CUDA errors.
inline void warp_probs(cudaStream_t stream, row_batch<float> probs, std::span<const warp_params> params,
                       std::span<row_status> statuses, std::span<std::byte> workspace) {
  detail::check_rows(probs, probs, statuses.size());
  const std::size_t batch = probs.rows(), vocab = probs.width();
  SPECDEC_EXPECTS(params.size() == batch, "cuda warp_probs: one warp_params per row");
  std::vector<detail::select_row> rows(batch);
  for (std::size_t b = 0; b < batch; ++b) {
    detail::validate_prob_params(params[b]);
    rows[b] = detail::select_row_for(params[b], vocab);
  }
  workspace_plan plan(workspace);
  const detail::filter_parts parts(plan, batch, vocab);
  if (batch == 0) return;
  detail::run_select(stream, detail::prob_source{probs.data().data()}, batch, vocab, parts.select, rows);
  detail::run_rescale(stream, probs.data().data(), batch, vocab, parts, statuses.data());
}

//! `warp_probs` with a workspace allocated (and freed) on `stream`.
inline void warp_probs(cudaStream_t stream, row_batch<float> probs, std::span<const warp_params> params,
                       std::span<row_status> statuses) {
  device_buffer workspace(warp_probs_workspace_bytes(probs.rows(), probs.width()), stream);
  warp_probs(stream, probs, params, statuses, workspace.span());
}

//! Bytes of device workspace of `warp_logits` for `batch` rows of `vocab` logits of type T.
template <class T>
std::size_t warp_logits_workspace_bytes(std::size_t batch, std::size_t vocab) {
  workspace_plan plan;
  (void)detail::softmax_parts<T>(plan, batch, vocab);
  (void)detail::filter_parts(plan, batch, vocab);
  return plan.bytes();
}

//! probs.row(b) = warp(softmax(logits.row(b) / T_b)) with the filters of params[b] (host span; `probs`
//! has the shape of `logits`): temperature,
//! top-k, top-p on the survivors, min-p, one renormalisation, as `specdec::warp_logits`
//! (distributions/warp.hpp); T = 0 gives the one-hot row on the argmax (lowest id on ties). Unusable
//! rows (NaN, +inf, all -inf) are zero-filled with seq's status. Agreement: the file comments here
//! and in softmax.cuh. Logits float or double (device), probabilities float (device).
//! \throws specdec::error on shapes, invalid parameters (`specdec::validate`) or a small workspace;
//! specdec::cuda_error on CUDA errors.
template <class T>
void warp_logits(cudaStream_t stream, row_batch<const T> logits, row_batch<float> probs, std::span<const warp_params> params,
                 std::span<row_status> statuses, std::span<std::byte> workspace) {
  static_assert(detail::float_or_double<T>, "cuda warp_logits: float or double logits");
  detail::check_rows(logits, probs, statuses.size());
  const std::size_t batch = logits.rows(), vocab = logits.width();
  SPECDEC_EXPECTS(params.size() == batch, "cuda warp_logits: one warp_params per row");
  std::vector<double> temperatures(batch);
  std::vector<detail::select_row> rows(batch);
  for (std::size_t b = 0; b < batch; ++b) {
    validate(params[b]);
    temperatures[b] = params[b].temperature;
    rows[b] = detail::select_row_for(params[b], vocab);
    if (params[b].temperature == 0.0) {  // greedy: the one-hot row, no filter, no renormalisation
      rows[b].passthrough = 1;
      rows[b].phase = detail::phase_done;
    }
  }
  workspace_plan plan(workspace);
  const detail::softmax_parts<T> soft(plan, batch, vocab);
  const detail::filter_parts parts(plan, batch, vocab);
  if (batch == 0) return;
  copy_to_device(soft.temperature, temperatures.data(), batch, stream);
  detail::launch_softmax_partials(stream, logits.data().data(), batch, vocab, soft.temperature, soft);
  detail::launch_softmax_write(stream, logits.data().data(), batch, vocab, soft.temperature, soft, probs.data().data(),
                               statuses.data(), nullptr, detail::softmax_output::probs);
  detail::run_select(stream, detail::prob_source{probs.data().data()}, batch, vocab, parts.select, rows);
  detail::run_rescale(stream, probs.data().data(), batch, vocab, parts, nullptr);  // statuses: softmax's
}

//! `warp_logits` with a workspace allocated (and freed) on `stream`.
template <class T>
void warp_logits(cudaStream_t stream, row_batch<const T> logits, row_batch<float> probs, std::span<const warp_params> params,
                 std::span<row_status> statuses) {
  device_buffer workspace(warp_logits_workspace_bytes<T>(logits.rows(), logits.width()), stream);
  warp_logits(stream, logits, probs, params, statuses, workspace.span());
}

}  // namespace specdec::backend::cuda
