//! \file backend/cuda/sample.cuh
//! \brief Batched categorical sampling from probabilities [B][V] on the GPU, one request stream per
//! row, with the tokens of `specdec::sample_categorical` (bit-identical, by the determinism contract
//! of sampling/categorical.hpp); and sampling after top-k / top-p / min-p filters (`top_p_sample`,
//! `sample_filtered`) without writing a filtered copy of the rows.
//!
//! Kernels (categorical.cuh): `tile_mass_kernel`, one warp per tile of 2048 entries over every row
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

#include "specdec/backend/cuda/categorical.cuh"
#include "specdec/backend/cuda/error.cuh"
#include "specdec/backend/cuda/filter.cuh"
#include "specdec/backend/cuda/memory.cuh"
#include "specdec/backend/cuda/softmax.cuh"
#include "specdec/backend/cuda/warp.cuh"
#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/distributions/row_status.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec::backend::cuda {

namespace detail {

inline constexpr int tile_mass_warps = 8;                              //!< warps (tiles) per block of `tile_mass_kernel`
inline constexpr int tile_mass_threads = tile_mass_warps * warp_size;  //!< threads per block of `tile_mass_kernel`

//! Row b's weights are its probabilities (`row_weight`, categorical.cuh); its stream is streams[b].
template <class T>
struct dense_rows {
  const T* probs;
  std::size_t vocab;
  const random::request_stream* streams;
  __device__ row_weight<T> weight(std::size_t b) const { return {probs + b * vocab}; }
  __device__ random::request_stream stream(std::size_t b) const { return streams[b]; }
};

//! w_v = p_v unless p_v is usable and below the threshold key `tau` (then +0): unusable entries pass
//! through, so that the row is reported `not_finite` as seq's sample_categorical would.
struct threshold_weight {
  const float* x;
  std::uint32_t tau;
  __device__ double operator()(std::size_t v) const {
    const float p = x[v];
    const bool below = (p >= 0.0f) & (prob_key(p) < tau);  // no short circuit: straight-line loops
    return below ? 0.0 : static_cast<double>(p);
  }
};

//! Row b's weights after its filters (the thresholds found by `run_select`); its stream travels with
//! its search state (one upload).
struct filtered_rows {
  const float* probs;
  std::size_t vocab;
  const select_row* rows;
  __device__ threshold_weight weight(std::size_t b) const { return {probs + b * vocab, rows[b].tau}; }
  __device__ random::request_stream stream(std::size_t b) const {
    return random::request_stream{rows[b].seed, rows[b].request, rows[b].step};
  }
};

//! Pass 1: the tile masses of every row; warp `job` handles tile job % tiles of row job / tiles.
template <class Rows>
__global__ void __launch_bounds__(tile_mass_threads)
    tile_mass_kernel(Rows rows, std::size_t vocab, std::size_t tiles, std::size_t jobs, double* tile_mass,
                     std::uint8_t* tile_usable) {
  const std::size_t job = static_cast<std::size_t>(blockIdx.x) * tile_mass_warps + threadIdx.x / warp_size;
  if (job >= jobs) return;  // (whole warps)
  bool usable = true;
  const double m = warp_tile_mass(rows.weight(job / tiles), tile_range::of(job % tiles, vocab), usable);
  usable = warp_all(usable);
  if (lane_id() == 0) {
    tile_mass[job] = m;
    tile_usable[job] = usable ? 1 : 0;
  }
}

//! Pass 2: one warp (block) per row locates its uniform and writes the token and the status.
template <class Rows>
__global__ void __launch_bounds__(warp_size)
    locate_kernel(Rows rows, std::size_t vocab, std::size_t tiles, const double* tile_mass, const std::uint8_t* tile_usable,
                  std::uint32_t position, random::purpose what, token_id* tokens, row_status* statuses) {
  __shared__ double shared[locate_shared_doubles];
  const std::size_t b = blockIdx.x;
  bool usable = true;
  for (std::size_t t = static_cast<std::size_t>(lane_id()); t < tiles; t += warp_size)
    usable = usable && tile_usable[b * tiles + t] != 0;
  usable = warp_all(usable);
  const double u = rows.stream(b).open(position, what).uniform();
  const located r = warp_locate(rows.weight(b), vocab, tile_mass + b * tiles, usable, u, shared);
  if (lane_id() == 0) {
    tokens[b] = r.token;
    statuses[b] = r.status;
  }
}

//! The workspace of the sampling passes: the tile masses and flags.
struct sample_parts {
  double* tile_mass;
  std::uint8_t* tile_usable;
  sample_parts(workspace_plan& plan, std::size_t batch, std::size_t vocab)
      : tile_mass(plan.take<double>(batch * specdec::detail::tile_count(vocab))),
        tile_usable(plan.take<std::uint8_t>(batch * specdec::detail::tile_count(vocab))) {}
};

//! Shape checks of the sampling entry points. \throws specdec::error
inline void check_sampling(std::size_t batch, std::size_t vocab, std::size_t probs, std::size_t streams, std::size_t tokens,
                           std::size_t statuses) {
  check_rows(batch, vocab, probs, probs, statuses);
  SPECDEC_EXPECTS(streams == batch, "cuda sampling: one request stream per row");
  SPECDEC_EXPECTS(tokens == batch, "cuda sampling: one token per row");
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

//! tokens[b] = `specdec::sample_categorical(probs[b], u_b)` with u_b = streams[b].open(position,
//! what).uniform(), for `batch` rows of `vocab` float or double weights (device, row-major; they need
//! not sum to 1): the same token and status as seq, bit for bit. `streams` is a host span (one per
//! row); `tokens` and `statuses` are device spans; `workspace` holds
//! `sample_categorical_workspace_bytes(batch, vocab)` bytes of device memory. Asynchronous.
//! \throws specdec::error on shapes or a small workspace; specdec::cuda_error on CUDA errors.
template <class T>
void sample_categorical(cudaStream_t stream, std::span<const T> probs, std::size_t batch, std::size_t vocab,
                        std::span<const random::request_stream> streams, std::span<token_id> tokens,
                        std::span<row_status> statuses, std::span<std::byte> workspace, std::uint32_t position = 0,
                        random::purpose what = random::purpose::target_sample) {
  static_assert(detail::float_or_double<T>, "cuda sample_categorical: float or double rows");
  detail::check_sampling(batch, vocab, probs.size(), streams.size(), tokens.size(), statuses.size());
  workspace_plan plan(workspace);
  random::request_stream* device_streams = plan.take<random::request_stream>(batch);
  const detail::sample_parts parts(plan, batch, vocab);
  if (batch == 0) return;
  copy_to_device(device_streams, streams.data(), batch, stream);
  detail::sample_rows(stream, detail::dense_rows<T>{probs.data(), vocab, device_streams}, batch, vocab, parts, position, what,
                      tokens.data(), statuses.data());
}

//! `sample_categorical` with a workspace allocated (and freed) on `stream`.
template <class T>
void sample_categorical(cudaStream_t stream, std::span<const T> probs, std::size_t batch, std::size_t vocab,
                        std::span<const random::request_stream> streams, std::span<token_id> tokens,
                        std::span<row_status> statuses, std::uint32_t position = 0,
                        random::purpose what = random::purpose::target_sample) {
  device_buffer workspace(sample_categorical_workspace_bytes(batch, vocab), stream);
  sample_categorical(stream, probs, batch, vocab, streams, tokens, statuses, workspace.span(), position, what);
}

//! Bytes of device workspace of `sample_filtered` and `top_p_sample`.
inline std::size_t sample_filtered_workspace_bytes(std::size_t batch, std::size_t vocab) {
  workspace_plan plan;
  (void)detail::select_parts(plan, batch);
  (void)detail::sample_parts(plan, batch, vocab);
  return plan.bytes();
}

//! Samples row b of `batch` float probability rows (device) after its filters params[b] (host; top-k,
//! top-p on the survivors, min-p; temperature must be 1): the token of seq's keep_top_k, keep_top_p,
//! keep_min_p then `specdec::sample_categorical` with u_b = streams[b].open(position, what).uniform()
//! whenever the masks agree (file comments here and in filter.cuh). The filtered rows are never
//! written: the sampling passes read p_v >= tau_b ? p_v : 0. Arguments as `sample_categorical`.
//! \throws specdec::error on shapes, invalid parameters (`specdec::validate`), a temperature other
//! than 1, or a small workspace; specdec::cuda_error on CUDA errors.
inline void sample_filtered(cudaStream_t stream, std::span<const float> probs, std::size_t batch, std::size_t vocab,
                            std::span<const warp_params> params, std::span<const random::request_stream> streams,
                            std::span<token_id> tokens, std::span<row_status> statuses, std::span<std::byte> workspace,
                            std::uint32_t position = 0, random::purpose what = random::purpose::target_sample) {
  detail::check_sampling(batch, vocab, probs.size(), streams.size(), tokens.size(), statuses.size());
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
  detail::run_select(stream, detail::prob_source{probs.data()}, batch, vocab, select, rows);
  detail::sample_rows(stream, detail::filtered_rows{probs.data(), vocab, select.rows}, batch, vocab, parts, position, what,
                      tokens.data(), statuses.data());
}

//! `sample_filtered` with a workspace allocated (and freed) on `stream`.
inline void sample_filtered(cudaStream_t stream, std::span<const float> probs, std::size_t batch, std::size_t vocab,
                            std::span<const warp_params> params, std::span<const random::request_stream> streams,
                            std::span<token_id> tokens, std::span<row_status> statuses, std::uint32_t position = 0,
                            random::purpose what = random::purpose::target_sample) {
  device_buffer workspace(sample_filtered_workspace_bytes(batch, vocab), stream);
  sample_filtered(stream, probs, batch, vocab, params, streams, tokens, statuses, workspace.span(), position, what);
}

//! Top-p (nucleus) sampling: `sample_filtered` with top_p[b] (host, in (0, 1]) and no other filter,
//! i.e. seq's keep_top_p then sample_categorical. Arguments and errors as `sample_filtered`.
inline void top_p_sample(cudaStream_t stream, std::span<const float> probs, std::size_t batch, std::size_t vocab,
                         std::span<const double> top_p, std::span<const random::request_stream> streams,
                         std::span<token_id> tokens, std::span<row_status> statuses, std::span<std::byte> workspace,
                         std::uint32_t position = 0, random::purpose what = random::purpose::target_sample) {
  SPECDEC_EXPECTS(top_p.size() == batch, "cuda top_p_sample: one top_p per row");
  std::vector<warp_params> params(batch);
  for (std::size_t b = 0; b < batch; ++b) params[b].top_p = top_p[b];
  sample_filtered(stream, probs, batch, vocab, params, streams, tokens, statuses, workspace, position, what);
}

//! `top_p_sample` with a workspace allocated (and freed) on `stream`.
inline void top_p_sample(cudaStream_t stream, std::span<const float> probs, std::size_t batch, std::size_t vocab,
                         std::span<const double> top_p, std::span<const random::request_stream> streams,
                         std::span<token_id> tokens, std::span<row_status> statuses, std::uint32_t position = 0,
                         random::purpose what = random::purpose::target_sample) {
  device_buffer workspace(sample_filtered_workspace_bytes(batch, vocab), stream);
  top_p_sample(stream, probs, batch, vocab, top_p, streams, tokens, statuses, workspace.span(), position, what);
}

}  // namespace specdec::backend::cuda
