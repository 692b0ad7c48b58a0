//! \file backend/cuda/sample.cuh
//! \brief Batched categorical sampling from probabilities [B][V] on the GPU, one request stream per
//! row, with the tokens of `specdec::sample_categorical` (bit-identical, by the determinism contract
//! of sampling/categorical.hpp); and sampling after top-k / top-p / min-p filters (`top_p_sample`,
//! `sample_filtered`) without writing a filtered copy of the rows.
//!
//! Kernels (kernels/sample.cuh, on primitives/categorical.cuh): `tile_mass_kernel`, one warp per tile of 2048 entries over every row
//! at once (B * ceil(V / 2048) warps: B = 1 still fills the GPU), writes the tile masses and whether
//! every weight was usable (rules 1-3); `locate_kernel`, one warp per row, draws
//! u = stream.open(position, purpose).uniform() and locates u * Z (rules 4-6, one tile re-read).
//! Filtered sampling first finds each row's threshold tau with the radix select of filter.cuh, then
//! samples the weights w_v = p_v if p_v >= tau, else 0 (`threshold_weight`): the tokens are those of
//! seq's `keep_top_k`, `keep_top_p`, `keep_min_p` (in that order, without renormalising) followed by
//! `sample_categorical` on the same uniform, whenever the masks agree (always for top-k and min-p;
//! for top-p unless the cumulative mass is within rounding of the goal: filter.cuh). Not
//! renormalising changes no probability, only the scale of u * Z.
//! Rows with a NaN, infinite or negative entry give `not_finite`, rows of zeros `no_mass`, both with
//! token `no_token`; an ok row's token is in [0, V) and has positive weight.
//! Host work per call: one upload (the streams; for filtered sampling the filter parameters with the
//! streams), and for filtered sampling a memset of the level-0 histograms, then the launches.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/backend/cuda/kernels/sample.cuh"
#include "specdec/backend/cuda/primitives/categorical.cuh"
#include "specdec/backend/cuda/detail/error.cuh"
#include "specdec/backend/cuda/filter.cuh"
#include "specdec/backend/cuda/detail/memory.cuh"
#include "specdec/backend/cuda/softmax.cuh"
#include "specdec/backend/cuda/primitives/warp.cuh"
#include "specdec/contracts.hpp"
#include "specdec/core/row_batch.hpp"
#include "specdec/core/token.hpp"
#include "specdec/distributions/row_status.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/random/row_sampling.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec::backend::cuda {

namespace detail {

//! The workspace of the sampling passes: the tile masses and flags.
struct sample_parts {
  double* tile_mass;
  std::uint8_t* tile_usable;
  sample_parts(workspace_plan& plan, std::size_t batch, std::size_t vocab)
      : tile_mass(plan.take<double>(batch * specdec::detail::tile_count(vocab))),
        tile_usable(plan.take<std::uint8_t>(batch * specdec::detail::tile_count(vocab))) {}
};

//! Shape checks of the sampling entry points. \throws specdec::error
template <class T>
void check_sampling(const row_batch<const T>& probs, std::size_t streams, std::size_t tokens, std::size_t statuses) {
  check_rows(probs, probs, statuses);
  SPECDEC_EXPECTS(streams == probs.rows(), "cuda sampling: one request stream per row");
  SPECDEC_EXPECTS(tokens == probs.rows(), "cuda sampling: one token per row");
}

//! Host: both passes over `rows` (weights and streams in device memory).
template <class Rows>
void sample_rows(cudaStream_t stream, const Rows& rows, std::size_t batch, std::size_t vocab, const sample_parts& parts,
                 std::uint32_t position, random::purpose what, token_id* tokens, row_status* statuses) {
  const std::size_t tiles = specdec::detail::tile_count(vocab), jobs = batch * tiles;
  const std::size_t blocks = (jobs + tile_mass_warps - 1) / tile_mass_warps;
  SPECDEC_EXPECTS(blocks <= static_cast<std::size_t>(std::numeric_limits<int>::max()) &&
                      batch <= static_cast<std::size_t>(std::numeric_limits<int>::max()),
                  "cuda sampling: too many rows for one launch");
  tile_mass_kernel<<<static_cast<unsigned>(blocks), tile_mass_threads, 0, stream>>>(rows, vocab, tiles, jobs, parts.tile_mass,
                                                                                    parts.tile_usable);
  check_launch("tile_mass_kernel");
  locate_kernel<<<static_cast<unsigned>(batch), warp_size, 0, stream>>>(rows, vocab, tiles, parts.tile_mass, parts.tile_usable,
                                                                        position, what, tokens, statuses);
  check_launch("locate_kernel");
}

}  // namespace detail

//! Bytes of device workspace of `sample_categorical` for `batch` rows of `vocab` entries.
inline std::size_t sample_categorical_workspace_bytes(std::size_t batch, std::size_t vocab) {
  workspace_plan plan;
  (void)plan.take<random::request_stream>(batch);
  (void)detail::sample_parts(plan, batch, vocab);
  return plan.bytes();
}

//! tokens[b] = `specdec::sample_categorical(probs.row(b), u_b)` with u_b = streams[b].open(at.position,
//! at.what).uniform(), for every row of `probs` (float or double weights, device memory; they need not
//! sum to 1): the same token and status as seq, bit for bit. `streams` is a host span (one per row);
//! `tokens` and `statuses` are device spans; `workspace` holds
//! `sample_categorical_workspace_bytes(probs.rows(), probs.width())` bytes of device memory.
//! Asynchronous.
//! \throws specdec::error on shapes or a small workspace; specdec::cuda_error on CUDA errors.
template <class T>
void sample_categorical(cudaStream_t stream, row_batch<const T> probs, std::span<const random::request_stream> streams,
                        std::span<token_id> tokens, std::span<row_status> statuses, std::span<std::byte> workspace,
                        const row_sampling& at = {}) {
  static_assert(detail::float_or_double<T>, "cuda sample_categorical: float or double rows");
  detail::check_sampling(probs, streams.size(), tokens.size(), statuses.size());
  const std::size_t batch = probs.rows(), vocab = probs.width();
  workspace_plan plan(workspace);
  random::request_stream* device_streams = plan.take<random::request_stream>(batch);
  const detail::sample_parts parts(plan, batch, vocab);
  if (batch == 0) return;
  copy_to_device(device_streams, streams.data(), batch, stream);
  detail::sample_rows(stream, detail::dense_rows<T>{probs.data().data(), vocab, device_streams}, batch, vocab, parts, at.position,
                      at.what, tokens.data(), statuses.data());
}

//! `sample_categorical` with a workspace allocated (and freed) on `stream`.
template <class T>
void sample_categorical(cudaStream_t stream, row_batch<const T> probs, std::span<const random::request_stream> streams,
                        std::span<token_id> tokens, std::span<row_status> statuses, const row_sampling& at = {}) {
  device_buffer workspace(sample_categorical_workspace_bytes(probs.rows(), probs.width()), stream);
  sample_categorical(stream, probs, streams, tokens, statuses, workspace.span(), at);
}

//! Bytes of device workspace of `sample_filtered` and `top_p_sample`.
inline std::size_t sample_filtered_workspace_bytes(std::size_t batch, std::size_t vocab) {
  workspace_plan plan;
  (void)detail::select_parts(plan, batch);
  (void)detail::sample_parts(plan, batch, vocab);
  return plan.bytes();
}

//! Samples row b of `probs` (float probabilities, device memory) after its filters params[b] (host;
//! top-k, top-p on the survivors, min-p; temperature must be 1): the token of seq's keep_top_k,
//! keep_top_p, keep_min_p then `specdec::sample_categorical` with u_b = streams[b].open(at.position,
//! at.what).uniform() whenever the masks agree (file comments here and in filter.cuh). The filtered rows
//! are never written: the sampling passes read p_v >= tau_b ? p_v : 0. Arguments as
//! `sample_categorical`; `workspace` holds `sample_filtered_workspace_bytes(probs.rows(),
//! probs.width())` bytes.
//! \throws specdec::error on shapes, invalid parameters (`specdec::validate`), a temperature other
//! than 1, or a small workspace; specdec::cuda_error on CUDA errors.
inline void sample_filtered(cudaStream_t stream, row_batch<const float> probs, std::span<const warp_params> params,
                            std::span<const random::request_stream> streams, std::span<token_id> tokens,
                            std::span<row_status> statuses, std::span<std::byte> workspace, const row_sampling& at = {}) {
  detail::check_sampling(probs, streams.size(), tokens.size(), statuses.size());
  const std::size_t batch = probs.rows(), vocab = probs.width();
  SPECDEC_EXPECTS(params.size() == batch, "cuda sample_filtered: one warp_params per row");
  std::vector<detail::select_row> rows(batch);
  for (std::size_t b = 0; b < batch; ++b) {
    detail::validate_prob_params(params[b]);
    rows[b] = detail::select_row_for(params[b], vocab);
    if (rows[b].top_k == 0 && rows[b].top_p >= 1.0 && rows[b].min_p <= 0.0) rows[b].phase = detail::phase_done;  // tau 0
    rows[b].seed = streams[b].seed;
    rows[b].request = streams[b].request;
    rows[b].step = streams[b].step;
  }
  workspace_plan plan(workspace);
  const detail::select_parts select(plan, batch);
  const detail::sample_parts parts(plan, batch, vocab);
  if (batch == 0) return;
  detail::run_select(stream, detail::prob_source{probs.data().data()}, batch, vocab, select, rows);
  detail::sample_rows(stream, detail::filtered_rows{probs.data().data(), vocab, select.rows}, batch, vocab, parts, at.position,
                      at.what, tokens.data(), statuses.data());
}

//! `sample_filtered` with a workspace allocated (and freed) on `stream`.
inline void sample_filtered(cudaStream_t stream, row_batch<const float> probs, std::span<const warp_params> params,
                            std::span<const random::request_stream> streams, std::span<token_id> tokens,
                            std::span<row_status> statuses, const row_sampling& at = {}) {
  device_buffer workspace(sample_filtered_workspace_bytes(probs.rows(), probs.width()), stream);
  sample_filtered(stream, probs, params, streams, tokens, statuses, workspace.span(), at);
}

//! Top-p (nucleus) sampling: `sample_filtered` with top_p[b] (host, in (0, 1]) and no other filter,
//! i.e. seq's keep_top_p then sample_categorical. Arguments and errors as `sample_filtered`.
inline void top_p_sample(cudaStream_t stream, row_batch<const float> probs, std::span<const double> top_p,
                         std::span<const random::request_stream> streams, std::span<token_id> tokens,
                         std::span<row_status> statuses, std::span<std::byte> workspace, const row_sampling& at = {}) {
  SPECDEC_EXPECTS(top_p.size() == probs.rows(), "cuda top_p_sample: one top_p per row");
  std::vector<warp_params> params(probs.rows());
  for (std::size_t b = 0; b < params.size(); ++b) params[b].top_p = top_p[b];
  sample_filtered(stream, probs, params, streams, tokens, statuses, workspace, at);
}

//! `top_p_sample` with a workspace allocated (and freed) on `stream`.
inline void top_p_sample(cudaStream_t stream, row_batch<const float> probs, std::span<const double> top_p,
                         std::span<const random::request_stream> streams, std::span<token_id> tokens,
                         std::span<row_status> statuses, const row_sampling& at = {}) {
  device_buffer workspace(sample_filtered_workspace_bytes(probs.rows(), probs.width()), stream);
  top_p_sample(stream, probs, top_p, streams, tokens, statuses, workspace.span(), at);
}

}  // namespace specdec::backend::cuda
